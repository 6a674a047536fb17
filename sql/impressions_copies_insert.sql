-- DuckDB engine: add a further file's duplicated id keys (`dup_part`).
INSERT INTO copies BY NAME SELECT * FROM dup_part
