-- The evidence of the quarantined / failed alerts (DESIGN §4.9): every day some run of which ended so, with
-- the first such run's status and detail. A day re-run and published later keeps its alert (history is not
-- rewritten); whether it is still open is the report's question (its latest run).
SELECT ds,
       arg_min(status, started_at) AS status,
       arg_min(detail, started_at) AS detail
FROM runs
WHERE status IN ('quarantined', 'failed')
GROUP BY ds
ORDER BY ds
