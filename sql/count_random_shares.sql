-- Which days of the registered frame `day_files` (day DATE, file VARCHAR: the
-- files each day needs, resolved now) count the same random-traffic rows, so
-- that sql/group_counts_pooled.sql counts a random pool once for every day whose
-- window it serves instead of once per day. One row per (day, random unit
-- the day counts): a unit is a staged random file's rows of one date range
-- (ds_start..ds: a row with its own date has ds_start = ds; a pool without
-- per-row dates has its declared range); a day without random rows has one
-- row with null unit and share.
-- A day counts the units of its current files that meet its trailing window
-- w0 = day - $window_days + 1 .. day (DESIGN §2 "Random-traffic windows"):
-- $pool_policy 'contained' takes units whose range lies inside the window,
-- 'overlap' units whose range meets it; for dated rows both mean exactly
-- w0 <= ds <= day.
-- rehashed: whether the day maps its per-cluster keys to hash buckets. A day
-- whose keyed rows (its own rows of every traffic but random, and its random
-- units' rows) all carry per-cluster keys (negative) of at most $exact
-- clusters ([estimation] cluster_exact_max) keeps them: exact per-cluster
-- sums. Otherwise each per-cluster key k becomes its id's hash bucket
-- (-1 - k) % cluster_buckets (sql/count_keys.sql), so a cluster has one key
-- on all its rows of the day.
-- share: days with the same units and the same rehashed count the same random
-- rows under the same keys, so they share one number (any integer; null
-- without random rows).
-- own_rows (per day) and unit_rows (per unit): staged rows, from which
-- range_counts.count_range sizes its statements.
WITH units AS (
    SELECT src_file, ds_start, ds, cbucket, count(*) AS n_rows
    FROM impressions
    WHERE traffic = 'random' AND src_file IN (SELECT file FROM day_files)
    GROUP BY ALL
),
day_units AS (
    SELECT DISTINCT f.day, u.src_file, u.ds_start, u.ds
    FROM units AS u JOIN day_files AS f
      ON u.src_file = f.file AND u.ds_start <= f.day AND u.ds >= f.day - ($window_days - 1)
    WHERE $pool_policy = 'overlap' OR (u.ds_start >= f.day - ($window_days - 1) AND u.ds <= f.day)
),
own AS (
    SELECT day, cbucket, count(*) AS n_rows
    FROM ({{include count_own_rows}}) AS o
    GROUP BY ALL
),
day_keys AS (
    SELECT day, cbucket FROM own WHERE cbucket IS NOT NULL
    UNION
    SELECT d.day, u.cbucket
    FROM day_units AS d JOIN units AS u USING (src_file, ds_start, ds)
    WHERE u.cbucket IS NOT NULL
),
rehash AS (
    SELECT day,
           bool_or(cbucket < 0) AND NOT (bool_and(cbucket < 0) AND count(DISTINCT cbucket) <= $exact) AS rehashed
    FROM day_keys
    GROUP BY day
),
pools AS (
    SELECT day, list((src_file, ds_start, ds) ORDER BY src_file, ds_start, ds) AS pool
    FROM day_units
    GROUP BY day
),
own_rows AS (
    SELECT day, sum(n_rows) AS own_rows FROM own GROUP BY day
),
days AS (
    SELECT d.day, coalesce(r.rehashed, false) AS rehashed, p.pool, coalesce(o.own_rows, 0)::BIGINT AS own_rows
    FROM (SELECT DISTINCT day FROM day_files) AS d
    LEFT JOIN rehash AS r USING (day)
    LEFT JOIN pools AS p USING (day)
    LEFT JOIN own_rows AS o USING (day)
),
unit_rows AS (
    SELECT src_file, ds_start, ds, sum(n_rows)::BIGINT AS unit_rows FROM units GROUP BY ALL
)
SELECT d.day, d.rehashed, d.own_rows,
       CASE WHEN d.pool IS NOT NULL THEN dense_rank() OVER (ORDER BY d.pool, d.rehashed) END::INTEGER AS share,
       u.src_file, u.ds_start, u.ds, r.unit_rows
FROM days AS d
LEFT JOIN day_units AS u USING (day)
LEFT JOIN unit_rows AS r USING (src_file, ds_start, ds)
