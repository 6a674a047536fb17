-- Status of the latest run (by start time) of each day in $start..$end; a
-- killed run stays 'running' and counts as not published.
SELECT ds, arg_max(status, started_at) AS status, count(*)::BIGINT AS n_runs
FROM runs
WHERE ds BETWEEN $start AND $end
GROUP BY ds
ORDER BY ds
