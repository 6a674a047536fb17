-- Record the DuckDB file's owner: the project and its warehouse, relative to the file's folder.
INSERT INTO fairmon_owner VALUES ($project, $warehouse)
