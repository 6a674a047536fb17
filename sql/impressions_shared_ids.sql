-- The id keys that occur in both `ids_a` and `ids_b` (the rows of two of a
-- day's files, each with ds, traffic, request_id, item_id: a file without ds
-- or traffic has them added first, NULL ds for a pool; a ds the day text the contract reads, engines.day_text), up
-- to $limit of them (first by key), each with the number of shared keys
-- (n_shared). A NULL ds (a pool: its rows carry no date, only the declared
-- range) matches any ds. One hash join over the distinct keys; DuckDB and
-- Spark spill what does not fit. Portable (pipelines/storage/portable.py).
WITH a AS (
    SELECT DISTINCT CAST(ds AS VARCHAR) AS ds, CAST(traffic AS VARCHAR) AS traffic,
           CAST(request_id AS VARCHAR) AS request_id, CAST(item_id AS VARCHAR) AS item_id
    FROM ids_a
),
b AS (
    SELECT DISTINCT CAST(ds AS VARCHAR) AS ds, CAST(traffic AS VARCHAR) AS traffic,
           CAST(request_id AS VARCHAR) AS request_id, CAST(item_id AS VARCHAR) AS item_id
    FROM ids_b
),
shared AS (
    SELECT DISTINCT coalesce(a.ds, b.ds) AS ds, a.traffic AS traffic, a.request_id AS request_id, a.item_id AS item_id
    FROM a JOIN b
      ON a.traffic = b.traffic AND a.request_id = b.request_id AND a.item_id = b.item_id
     AND (a.ds = b.ds OR a.ds IS NULL OR b.ds IS NULL)
),
ranked AS (
    SELECT ds, traffic, request_id, item_id, count(*) OVER () AS n_shared,
           row_number() OVER (ORDER BY ds, traffic, request_id, item_id) AS k
    FROM shared
)
SELECT ds, traffic, request_id, item_id, n_shared
FROM ranked
WHERE k <= $limit
ORDER BY k
