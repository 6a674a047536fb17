-- Column names of the labels staging table, in order (to check a frame fits it).
SELECT column_name FROM information_schema.columns
WHERE table_name = 'labels' AND table_schema = 'main'
ORDER BY ordinal_position
