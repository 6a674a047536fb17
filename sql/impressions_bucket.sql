-- The impressions rows registered as `raw_in` with __cbucket: the hash bucket
-- (0 .. $buckets - 1) of the row's cluster id, the column named $cluster_col
-- (request_id or user_id, config [estimation] cluster_by). Every file hashes
-- the same id to the same bucket, so a cluster that spans files (a user over
-- the random-traffic window) stays one. The profile then groups by __cbucket
-- too: per bucket and group the rows and positives that the cluster-robust
-- variance needs come out of the same scan (transforms/cluster.py).
SELECT *, (hash(COLUMNS(lambda c: c = $cluster_col)) % $buckets)::INTEGER AS __cbucket
FROM raw_in
