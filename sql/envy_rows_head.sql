-- The envy_rows staging table bound but not run: its columns, to check a frame fits it.
SELECT * FROM envy_rows LIMIT 0
