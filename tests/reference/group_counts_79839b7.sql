-- Per-group counts n and n_pos (Y = 1) for every day of the registered frame
-- `day_files` (day DATE, file VARCHAR: the files each day needs, resolved now),
-- one row per ds x traffic x arm x attribute x group (DESIGN §3 group_counts).
-- Only rows of a day's own current files count (DESIGN §2 "Input identity"):
-- rows staged from a file no longer resolved never reach a count.
-- Default and other named stages: rows of the day, by arm.
-- Random traffic (DESIGN §2 "Random-traffic windows"), shared by all arms
-- (arm = 'all'), from the day's trailing window w0 = day - $window_days + 1 .. day:
-- a staged row covers ds_start..ds (a row with its own date: ds_start = ds; a
-- pool without per-row dates: its declared range). $pool_policy 'contained'
-- takes rows whose range lies inside the window, 'overlap' rows whose range
-- meets it; for dated rows both mean exactly w0 <= ds <= day. day_files lists
-- only the pools the policy admits; the condition here says the same.
-- window_start/window_end: the span of the rows used (min ds_start, max ds),
-- so window_end > ds means rows that may come from after the day.
-- Staged rows carry n, the logged pairs they stand for (transforms/contract.py).
-- Rows are unpivoted first (one row per attribute: attribute columns are the
-- staging columns named attr__*) and aggregated once, by their keys and group:
-- aggregating over all attribute columns before the unpivot needs a second
-- aggregation after it, of nearly as many rows at many groups (bench/README
-- issue 37 item 3).
-- A null attribute value is counted as the group '(missing)'. A backfill
-- counts its whole range in one statement.
-- cbucket: the cluster key of the rows' cluster id when the count stage
-- clusters (sql/impressions_bucket.sql, transforms/reo/cluster.py), else null.
-- A day whose keyed rows (all traffics) all carry per-cluster keys (negative)
-- of at most $buckets clusters keeps them: exact per-cluster sums. Otherwise
-- each per-cluster key k becomes its id's hash bucket (-1 - k) % $buckets, so
-- a cluster has one key on all its rows of the day (issue 38); only such a
-- day's keyed rows are summed again (`out`: its hash buckets may meet each
-- other and the day's own keys >= 0), all others are final as aggregated. The rows come
-- out per key (at most $buckets per group) and count_days sums them for
-- group_counts and keeps the per-key sums for the robust variance.
-- No ORDER BY: count_days sorts the group counts it publishes (K rows a day);
-- the per-key rows (up to K x buckets a day) need no order, as the
-- estimators index them by key (transforms/reo/cluster.py bucket_sums:
-- integer sums, the same in any row order). Sorting them cost ~1.2 CPU-s of
-- 7 days at K = 4,096 (bench/README issue 37 item 3).
WITH src AS (
    SELECT f.day, i.traffic, i.arm, i.y, i.n, i.ds_start, i.ds, i.cbucket, COLUMNS('^attr__')
    FROM impressions AS i JOIN day_files AS f
      ON i.src_file = f.file AND i.ds = f.day AND i.ds_start = f.day
    WHERE i.traffic <> 'random'
    UNION ALL BY NAME
    SELECT f.day, i.traffic, 'all' AS arm, i.y, i.n, i.ds_start, i.ds, i.cbucket, COLUMNS('^attr__')
    FROM impressions AS i JOIN day_files AS f
      ON i.src_file = f.file AND i.ds_start <= f.day AND i.ds >= f.day - ($window_days - 1)
    WHERE i.traffic = 'random'
      AND ($pool_policy = 'overlap' OR (i.ds_start >= f.day - ($window_days - 1) AND i.ds <= f.day))
),
long AS (
    SELECT day, traffic, arm, y, n, ds_start, ds, cbucket, attribute, grp
    FROM src UNPIVOT INCLUDE NULLS (grp FOR attribute IN (COLUMNS('^attr__')))
),
pre AS (
    SELECT day, traffic, arm, cbucket, attribute, coalesce(grp, '(missing)') AS grp,
           sum(n) AS n, coalesce(sum(n) FILTER (WHERE y), 0) AS n_pos,
           min(ds_start) AS ws, max(ds) AS we
    FROM long
    GROUP BY day, traffic, arm, cbucket, attribute, coalesce(grp, '(missing)')
),
key_days AS (
    SELECT day,
           bool_and(cbucket < 0) AND count(DISTINCT cbucket) <= $buckets AS exact,
           bool_or(cbucket < 0) AS cluster_keys
    FROM pre
    WHERE cbucket IS NOT NULL
    GROUP BY day
),
spans AS (
    SELECT day, traffic, arm, min(ws) AS window_start, max(we) AS window_end
    FROM pre
    GROUP BY day, traffic, arm
),
keyed AS (
    SELECT p.day, p.traffic, p.arm, p.attribute, p.grp, p.n, p.n_pos,
           p.cbucket IS NULL OR k.exact OR NOT k.cluster_keys AS kept,
           CASE WHEN p.cbucket >= 0 OR k.exact THEN p.cbucket ELSE (-1 - p.cbucket) % $buckets END AS cbucket
    FROM pre AS p
    LEFT JOIN key_days AS k ON p.day = k.day
),
out AS (
    SELECT day, traffic, arm, attribute, grp, cbucket, n, n_pos
    FROM keyed
    WHERE kept
    UNION ALL
    SELECT day, traffic, arm, attribute, grp, cbucket, sum(n) AS n, sum(n_pos) AS n_pos
    FROM keyed
    WHERE NOT kept
    GROUP BY day, traffic, arm, attribute, grp, cbucket
)
SELECT o.day AS ds,
       'impressions' AS source,
       o.traffic,
       o.arm,
       substr(o.attribute, 7) AS attribute,
       o.grp AS "group",
       o.cbucket,
       o.n::BIGINT AS n,
       o.n_pos::BIGINT AS n_pos,
       s.window_start,
       s.window_end
FROM out AS o
JOIN spans AS s USING (day, traffic, arm)
