-- The impressions rows registered as `raw_in` with __cbucket: the hash bucket
-- (0 .. $buckets - 1) of the row's cluster id, the column {{cluster}}
-- (request_id or user_id, config [estimation] cluster_by). Every file hashes
-- the same id to the same bucket, so a cluster that spans files (a user over
-- the random-traffic window) stays one. The profile then groups by __cbucket
-- too: per bucket and group the rows and positives that the cluster-robust
-- variance needs come out of the same scan (transforms/reo/cluster.py).
-- Formula 3 (pipelines/core/config.py BUCKET_FORMULA), the same on every
-- engine (DESIGN §1 "Engines"): the id as text, its SHA-1 digest of the UTF-8
-- bytes, the first 4 bytes of the digest (its first 8 hex digits) read as an
-- unsigned big-endian 32-bit integer, modulo $buckets:
--     bucket = int(sha1(utf8(id)).hexdigest()[:8], 16) % buckets
-- A null id is one cluster, in bucket 6893924396578271964 % $buckets (where
-- DuckDB's hash put it before). sha1() gives the same lowercase hex digest on
-- DuckDB and Spark; DuckDB reads the hex digits with CAST('0x' || … AS BIGINT),
-- which the Spark translation spells CAST(conv(…, 16, 10) AS BIGINT)
-- (pipelines/storage/portable.py). The value is below 2^32, so BIGINT holds
-- it and the modulo is never negative. Engine-specific hash() is not used:
-- DuckDB's and Spark's differ, and so would the buckets and the intervals.
-- Each distinct id is hashed once and its bucket joined back to its rows
-- (null ids match as one, IS NOT DISTINCT FROM): SHA-1 per row cost
-- 1.5 CPU-s per 10^7 rows on DuckDB (md5: 1.55 s; the former hash(): 0.15 s),
-- most of the clustered scan; with 8 rows a request the join halves it
-- (bench/README.md, issue 37).
WITH __ids AS (
    SELECT __cid,
           CAST(coalesce(CAST('0x' || substr(sha1(__cid), 1, 8) AS BIGINT), 6893924396578271964) % $buckets AS INTEGER) AS __cbucket
    FROM (SELECT DISTINCT {{cluster:text}} AS __cid FROM raw_in) AS __distinct_ids
)
SELECT raw_in.*, __ids.__cbucket
FROM raw_in
JOIN __ids ON {{cluster:text}} IS NOT DISTINCT FROM __ids.__cid
