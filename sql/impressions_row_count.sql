-- Rows of `raw` (used when a file has none of the contract columns to group
-- by): one profile row, or none for an empty file. Portable
-- (pipelines/storage/portable.py).
SELECT CAST(count(*) AS BIGINT) AS __n, CAST(min(__row) AS BIGINT) + 1 AS __first_row
FROM raw
HAVING count(*) > 0
