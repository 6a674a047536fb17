-- Per-group counts n and n_pos (Y = 1) for every day of the registered frame
-- `day_files`, per cluster key: one row per ds x traffic x arm x attribute x
-- group x cbucket, of the rows each day counts (sql/count_rows.sql: the day's
-- own current files, its random window). count_days
-- (pipelines/ingest/range_counts.py) sums them over cbucket for group_counts
-- (DESIGN §3) and keeps them per key for the robust variance; the span of
-- the rows' dates is sql/count_spans.sql's.
-- Staged rows carry n, the logged pairs they stand for (transforms/contract.py).
-- Rows are unpivoted first (one row per attribute: attribute columns are the
-- staging columns named attr__*) and aggregated once, by their keys and group:
-- aggregating over all attribute columns before the unpivot needs a second
-- aggregation after it, of nearly as many rows at many groups (bench/README
-- issue 37 item 3).
-- A null attribute value is counted as the group '(missing)'.
-- cbucket: the cluster key of the rows' cluster id when the count stage
-- clusters (sql/impressions_bucket.sql, transforms/reo/cluster.py), else null.
-- A day whose keyed rows (all traffics) all carry per-cluster keys (negative)
-- of at most $buckets clusters keeps them: exact per-cluster sums. Otherwise
-- (a day in `rehash`) each per-cluster key k becomes its id's hash bucket
-- (-1 - k) % $buckets, so a cluster has one key on all its rows of the day
-- (issue 38). The key is mapped before the one aggregation, so hash buckets
-- that meet each other or the day's own keys >= 0 are summed there (integer
-- sums: the same as summing per key first). `rehash` reads the day's keys
-- from the joined rows, not from an aggregate of them: a join and a few
-- thousand (day, key) pairs, where deciding from the aggregated rows held
-- all of them and joined each to its day (~1 CPU-s of 7 days at K = 4,096,
-- bench/README issue 37 item 3).
-- No ORDER BY: the per-key rows (up to K x buckets a day) need no order, as
-- count_days sorts the group counts it publishes and the estimators index
-- the key rows by key (transforms/reo/cluster.py bucket_sums: integer sums,
-- the same in any row order). Sorting them cost ~1.2 CPU-s of 7 days at
-- K = 4,096 (bench/README issue 37 item 3).
WITH rehash AS (
    SELECT day
    FROM ({{include count_rows}}) AS r
    WHERE cbucket IS NOT NULL
    GROUP BY day
    HAVING bool_or(cbucket < 0) AND NOT (bool_and(cbucket < 0) AND count(DISTINCT cbucket) <= $buckets)
),
long AS (
    SELECT day, traffic, arm, y, n,
           CASE WHEN cbucket >= 0 OR day NOT IN (SELECT day FROM rehash) THEN cbucket
                ELSE (-1 - cbucket) % $buckets END AS cbucket,
           substr(attribute, 7) AS attribute,
           coalesce(grp, '(missing)') AS grp
    FROM ({{include count_rows}}) AS r
    UNPIVOT INCLUDE NULLS (grp FOR attribute IN (COLUMNS('^attr__')))
)
SELECT day AS ds,
       traffic,
       arm,
       attribute,
       grp AS "group",
       cbucket::INTEGER AS cbucket,
       sum(n)::BIGINT AS n,
       coalesce(sum(n) FILTER (WHERE y), 0)::BIGINT AS n_pos
FROM long
GROUP BY day, traffic, arm, attribute, grp, cbucket
