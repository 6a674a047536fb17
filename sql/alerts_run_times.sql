-- What decides whether a quarantined / failed alert's run of days is over (DESIGN §4.9), per day: when its latest
-- run started if that run published (published_at, else null), and when its latest quarantined or failed run
-- started (bad_at, null without one). A later day closes the run only when it published after the run's days failed.
SELECT ds,
       CASE WHEN arg_max(status, started_at) = 'published' THEN max(started_at) END AS published_at,
       max(started_at) FILTER (WHERE status IN ('quarantined', 'failed')) AS bad_at
FROM runs
GROUP BY ds
ORDER BY ds
