-- The scores staging table bound but not run: its columns, to check a frame fits it.
SELECT * FROM scores LIMIT 0
