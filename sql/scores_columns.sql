-- Column names of the scores staging table, in order (to check a frame fits it).
SELECT column_name FROM information_schema.columns
WHERE table_name = 'scores' AND table_schema = 'main'
ORDER BY ordinal_position
