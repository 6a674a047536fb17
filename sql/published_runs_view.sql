-- The latest run of each day (by start time) when it published: what every
-- <table>_published view joins on (same ds, same run_id). A day whose latest
-- run failed, was quarantined or was killed ('running') is not published.
CREATE OR REPLACE VIEW published_runs AS
SELECT ds, run_id FROM (
    SELECT ds, arg_max(run_id, started_at) AS run_id, arg_max(status, started_at) AS status
    FROM runs
    GROUP BY ds
)
WHERE status = 'published'
