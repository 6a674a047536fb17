-- The latest run's status of each day in $start..$end (days never run are absent).
SELECT ds, arg_max(status, finished_at) AS status, count(*)::BIGINT AS n_runs
FROM runs
WHERE ds BETWEEN $start AND $end
GROUP BY ds
ORDER BY ds
