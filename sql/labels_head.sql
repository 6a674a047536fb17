-- The labels staging table bound but not run: its columns, to check a frame fits it.
SELECT * FROM labels LIMIT 0
