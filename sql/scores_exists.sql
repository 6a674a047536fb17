-- Whether the scores staging table exists yet (0 or 1). Kept for
-- pipelines/orchestration/flows.py; the staging tables' own statements are
-- generated from their declarations (pipelines/ingest/staging_tables.py exists()).
SELECT count(*)::BIGINT AS n FROM duckdb_tables()
WHERE table_name = 'scores' AND schema_name = 'main' AND database_name = current_database()
