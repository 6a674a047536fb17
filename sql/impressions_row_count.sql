-- Rows of `raw` (used when a file has none of the contract columns to group
-- by): one profile row, or none for an empty file.
SELECT count(*)::BIGINT AS __n, min(__row)::BIGINT + 1 AS __first_row
FROM raw
HAVING count(*) > 0
