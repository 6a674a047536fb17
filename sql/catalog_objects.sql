-- Every table and view of the DuckDB file's main schema with its kind ('BASE TABLE' or 'VIEW').
SELECT table_name, table_type FROM information_schema.tables
WHERE table_schema = 'main' AND table_catalog = current_database()
