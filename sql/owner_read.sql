-- The DuckDB file's owner record (no row before the first run).
SELECT project, warehouse FROM fairmon_owner LIMIT 1
