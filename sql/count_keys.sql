-- The aggregation of sql/group_counts.sql and sql/group_counts_pooled.sql
-- (each includes it after its CTE `counted`: staged rows with ds, share,
-- traffic, arm, y, n, cbucket, rehashed and the attr__* columns): per-group
-- counts n and n_pos (Y = 1) per ds x share x traffic x arm x attribute x
-- group x cluster key. Staged rows carry n, the logged pairs they stand for
-- (transforms/contract.py). Rows are unpivoted (one row per attribute:
-- attribute columns are the staging columns named attr__*) and aggregated
-- once, by their keys and group. A null attribute value is counted as the
-- group '(missing)'. {{attribute_rows}} is `counted` with a row per attribute
-- (attribute: the attr__ column's name, grp: its value), written by
-- range_counts.count_sql: an UNPIVOT of the attr__ columns, or for a table
-- of one such column that column renamed, the same rows without UNPIVOT's
-- list per row (a large part of the statement with thousands of groups).
-- cbucket: the cluster key of the rows' cluster id when the count stage
-- clusters (sql/impressions_bucket.sql, transforms/reo/cluster.py), else
-- null; on rows marked rehashed (sql/count_random_shares.sql) a per-cluster
-- key k (negative) becomes its id's hash bucket (-1 - k) % $buckets before
-- the aggregation, so buckets that meet each other or keys >= 0 are summed
-- there (integer sums: the same as summing per key first).
-- No ORDER BY: the per-key rows need no order (range_counts.group_totals
-- sorts the group counts it publishes; the estimators index key rows by key).
SELECT ds,
       share,
       traffic,
       arm,
       attribute,
       grp AS "group",
       cbucket::INTEGER AS cbucket,
       sum(n)::BIGINT AS n,
       coalesce(sum(n) FILTER (WHERE y), 0)::BIGINT AS n_pos
FROM (
    SELECT ds, share, traffic, arm, y, n,
           CASE WHEN cbucket >= 0 OR NOT rehashed THEN cbucket ELSE (-1 - cbucket) % $buckets END AS cbucket,
           substr(attribute, 7) AS attribute,
           coalesce(grp, '(missing)') AS grp
    FROM {{attribute_rows}}
)
GROUP BY ds, share, traffic, arm, attribute, grp, cbucket
