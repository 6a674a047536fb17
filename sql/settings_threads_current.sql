-- The number of threads DuckDB runs statements with now (sql/settings_threads.sql).
SELECT CAST(current_setting('threads') AS BIGINT) AS threads
