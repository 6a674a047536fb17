-- Whether the envy_rows staging table exists yet (0 or 1).
SELECT count(*)::BIGINT AS n FROM duckdb_tables()
WHERE table_name = 'envy_rows' AND schema_name = 'main' AND database_name = current_database()
