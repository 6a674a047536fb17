-- The impressions rows registered as `raw_in` with __cbucket, the cluster key
-- of the row's cluster id, the column {{cluster}} (request_id or user_id,
-- config [estimation] cluster_by). The profile then groups by __cbucket too:
-- per key and group the rows and positives that the cluster-robust variance
-- needs come out of the same scan (transforms/reo/cluster.py).
-- Formula 5 (pipelines/core/config.py BUCKET_FORMULA), the same on every
-- engine (DESIGN §1 "Engines"). h = the id as text, its SHA-1 digest of the
-- UTF-8 bytes, the first 4 bytes of the digest (its first 8 hex digits) read
-- as an unsigned big-endian 32-bit integer (a null id: 6893924396578271964).
-- The key depends on the id and on how many distinct ids its file
-- (__file, or all the rows when they are one file) holds, never on other files:
--   * at most $exact ids in the file ([estimation] cluster_exact_max): the
--     per-cluster key -1 - h % $span (negative; $span = $buckets *
--     floor((2^31 - 1) / $buckets), so two ids share a key with probability
--     about 2^-31 a pair);
--   * more: the hash bucket h % $buckets (0 .. $buckets - 1).
-- Since $buckets divides $span, a per-cluster key k maps to its id's bucket
-- as (-1 - k) % $buckets: sql/group_counts.sql keeps per-cluster keys for a
-- day whose rows all have them and number at most $exact clusters (exact
-- per-cluster sums), and maps them to buckets otherwise, so an id has one
-- key on every row of a day and a day's sums do not depend on which other
-- days' files were scanned with it.
-- sha1() gives the same lowercase hex digest on DuckDB and Spark; DuckDB reads
-- the hex digits with CAST('0x' || … AS BIGINT), which the Spark translation
-- spells CAST(conv(…, 16, 10) AS BIGINT) (pipelines/storage/portable.py). h is
-- below 2^63, so BIGINT holds it and no modulo is of a negative number.
-- Each file's number of distinct ids is an aggregate over the distinct ids
-- (__sizes), not a window over them (a window partitions and sorts them).
-- Engine-specific hash() is not used: DuckDB's and Spark's differ, and so
-- would the keys and the intervals. Each distinct id of a file is hashed once
-- and its key joined back to its rows (null ids match as one, IS NOT DISTINCT
-- FROM): SHA-1 per row is most of a clustered scan's cost (bench/README.md).
WITH __distinct_ids AS (
    SELECT DISTINCT {{scope:key}} AS __scope, {{cluster:text}} AS __cid FROM raw_in
),
__sizes AS (
    SELECT __scope, count(*) AS __n_ids FROM __distinct_ids GROUP BY __scope
),
__ids AS (
    SELECT d.__scope,
           d.__cid,
           coalesce(CAST('0x' || substr(sha1(d.__cid), 1, 8) AS BIGINT), 6893924396578271964) AS __h,
           s.__n_ids
    FROM __distinct_ids AS d
    JOIN __sizes AS s ON d.__scope = s.__scope
)
SELECT raw_in.*,
       CAST(CASE WHEN __ids.__n_ids <= $exact THEN -1 - __ids.__h % $span ELSE __ids.__h % $buckets END AS INTEGER)
           AS __cbucket
FROM raw_in
JOIN __ids ON {{scope:key}} = __ids.__scope AND {{cluster:text}} IS NOT DISTINCT FROM __ids.__cid
