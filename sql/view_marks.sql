-- Each view of the DuckDB file's main schema with its comment: the mark of the SQL fairmon created it with
-- (pipelines/storage/ddl.py view_mark), NULL for a view created otherwise.
SELECT view_name, comment FROM duckdb_views()
WHERE NOT internal AND schema_name = 'main' AND database_name = current_database()
