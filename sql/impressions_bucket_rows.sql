-- DuckDB engine: sql/impressions_bucket.sql's __cbucket (formula 5, the same
-- key for every id on every engine) for rows whose ids rarely repeat (e.g. a
-- request_id per row): the SHA-1 of each row's id, not of each distinct id
-- joined back to its rows. With one row per id the join is a large part of the
-- statement; with many rows per id hashing every row costs more than the join
-- (bench/README.md), so profiles.py picks this statement from a sample of the
-- rows (sql/impressions_bucket_sample.sql). Each file's ({{scope:key}}) number of
-- distinct ids decides between per-cluster keys and hash buckets as there;
-- a null id counts as one id (SELECT DISTINCT).
WITH __sizes AS (
    SELECT __scope, count(*) AS __n_ids
    FROM (SELECT DISTINCT {{scope:key}} AS __scope, {{cluster:text}} AS __cid FROM raw_in) AS __ids
    GROUP BY __scope
)
SELECT raw_in.* EXCLUDE (__h),
       CAST(CASE WHEN __sizes.__n_ids <= $exact THEN -1 - raw_in.__h % $span ELSE raw_in.__h % $buckets END AS INTEGER)
           AS __cbucket
FROM (
    SELECT *, coalesce(CAST('0x' || substr(sha1({{cluster:text}}), 1, 8) AS BIGINT), 6893924396578271964) AS __h
    FROM raw_in
) AS raw_in
JOIN __sizes ON {{scope:key}} = __sizes.__scope
