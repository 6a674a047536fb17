-- The impressions rows registered as `raw_in` with __cbucket: the hash bucket
-- (0 .. $buckets - 1) of the row's cluster id, the column {{cluster}}
-- (request_id or user_id, config [estimation] cluster_by). Every file hashes
-- the same id to the same bucket, so a cluster that spans files (a user over
-- the random-traffic window) stays one. The profile then groups by __cbucket
-- too: per bucket and group the rows and positives that the cluster-robust
-- variance needs come out of the same scan (transforms/reo/cluster.py).
-- Portable (pipelines/storage/portable.py): hash() is each engine's own
-- (DuckDB's 64-bit hash; Spark's Murmur3), so which clusters share a bucket
-- depends on the engine; ((h % b) + b) % b keeps Spark's signed hash in range.
-- The hash is shifted right by one bit and cast to BIGINT first: DuckDB's
-- hash is UBIGINT, and UBIGINT % (a bound INTEGER) is computed in HUGEINT,
-- which made this scan 3x slower (bench/README.md, issue 20).
SELECT *, CAST(((CAST(hash({{cluster}}) >> 1 AS BIGINT) % $buckets) + $buckets) % $buckets AS INTEGER) AS __cbucket
FROM raw_in
