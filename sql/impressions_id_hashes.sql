-- DuckDB engine: one 64-bit hash of each row's id key ({{keys}}: the file,
-- ds, traffic, request_id, item_id) of the rows registered as `raw_part`
-- (one file). When the hashes are all distinct the keys are too, and the
-- exact duplicate-id aggregation (sql/impressions_duplicate_ids.sql) is not
-- needed for the file; a repeated hash (a duplicated key, or rarely two keys
-- with one hash) sends the file to the exact aggregation.
SELECT hash({{keys}}) AS __id_hash
FROM raw_part
