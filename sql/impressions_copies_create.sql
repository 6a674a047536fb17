-- DuckDB engine: the table of duplicated id keys, from the first file's
-- (registered as `dup_part`, sql/impressions_duplicate_ids.sql).
CREATE OR REPLACE TEMP TABLE copies AS SELECT * FROM dup_part
