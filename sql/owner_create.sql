-- Which warehouse (and project) this DuckDB file serves: one row, written by the first run on the file.
CREATE TABLE IF NOT EXISTS fairmon_owner (project VARCHAR, warehouse VARCHAR)
