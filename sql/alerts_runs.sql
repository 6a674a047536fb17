-- The evidence of the quarantined / failed alerts (DESIGN §4.9): per day, each spell of runs that ended so, the
-- spell being the day's bad runs before one same next published run (fixed_at; null while none has published
-- since), with its first run's status, detail and start (bad_from). A day re-run and published later keeps its
-- alert (history is not rewritten); a day continues the alert of the day before only when their spells overlap
-- in time (alert_tables.run_alerts), and whether an alert is still open is the report's question.
WITH timed AS (
    SELECT ds, status, detail, started_at,
           min(started_at) FILTER (WHERE status = 'published') OVER (
               PARTITION BY ds ORDER BY started_at ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING
           ) AS fixed_at
    FROM runs
)
SELECT ds,
       arg_min(status, started_at) AS status,
       arg_min(detail, started_at) AS detail,
       min(started_at) AS bad_from,
       fixed_at
FROM timed
WHERE status IN ('quarantined', 'failed')
GROUP BY ds, fixed_at
ORDER BY ds, bad_from
