-- The latest run of every day (by start time): its id, status, the inputs it resolved and its parameters.
SELECT ds,
       arg_max(run_id, started_at) AS run_id,
       arg_max(status, started_at) AS status,
       arg_max(inputs, started_at) AS inputs,
       arg_max(detail, started_at) AS detail,
       arg_max(params, started_at) AS params
FROM runs
GROUP BY ds
ORDER BY ds
