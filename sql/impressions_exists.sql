-- Whether the staging table exists yet (0 or 1).
SELECT count(*)::BIGINT AS n FROM information_schema.tables
WHERE table_name = 'impressions' AND table_schema = 'main'
