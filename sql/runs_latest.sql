-- The latest run of every day (by start time): its id, status and the inputs it resolved.
SELECT ds,
       arg_max(run_id, started_at) AS run_id,
       arg_max(status, started_at) AS status,
       arg_max(inputs, started_at) AS inputs,
       arg_max(detail, started_at) AS detail
FROM runs
GROUP BY ds
ORDER BY ds
