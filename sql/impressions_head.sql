-- The impressions staging table bound but not run: its columns, to check a frame fits it.
SELECT * FROM impressions LIMIT 0
