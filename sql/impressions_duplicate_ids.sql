-- The id keys ({{keys}}: __file, ds, traffic, request_id, item_id as present)
-- of the rows registered as `raw_part` that occur more than once, with their
-- number of copies, for the ids_unique rule. One hash aggregation over the key
-- columns: DuckDB runs it file by file (memory follows the largest file) and
-- collects the keys in the temporary table `copies`; Spark runs it over all
-- the files at once. Portable (pipelines/storage/portable.py).
SELECT {{keys}}, CAST(count(*) AS BIGINT) AS id_copies
FROM raw_part
GROUP BY {{keys}}
HAVING count(*) > 1
