-- The count stage on rows a caller hands the API (fairmon.group_counts,
-- fairmon.reo: src/fairmon/api/counting.py): the registered frame `rows_in`,
-- rows already through the input contract (transforms/contract.py
-- normalize_impressions: traffic, arm, y, n, cbucket and the attr__ columns),
-- counted as one day $ds by sql/count_keys.sql, the pipeline's own
-- aggregation. Random traffic is shared by all arms (arm 'all', as
-- sql/group_counts_pooled.sql counts it). The rows are one file, so the keys
-- sql/impressions_bucket.sql gave them stand (rehashed false: per-cluster
-- keys when the ids number at most cluster_exact_max, hash buckets otherwise).
WITH counted AS (
    SELECT $ds::DATE AS ds, NULL::INTEGER AS share, traffic,
           CASE WHEN traffic = 'random' THEN 'all' ELSE arm END AS arm,
           y, n, cbucket, false AS rehashed, COLUMNS('^attr__')
    FROM rows_in
)
{{include count_keys}}
