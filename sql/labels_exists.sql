-- Whether the labels staging table exists yet (0 or 1).
SELECT count(*)::BIGINT AS n FROM information_schema.tables
WHERE table_name = 'labels' AND table_schema = 'main'
