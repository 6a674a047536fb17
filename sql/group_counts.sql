-- Per-key counts of each day's own rows (sql/count_own_rows.sql: its rows
-- of every traffic but random, by arm; sql/count_keys.sql) for the days of
-- the registered frame `count_days` (day DATE, rehashed BOOLEAN: whether the
-- day maps per-cluster keys to hash buckets, sql/count_random_shares.sql).
-- A day's random rows are counted per unit (sql/group_counts_pooled.sql).
-- share is null.
WITH counted AS (
    SELECT r.day AS ds, NULL::INTEGER AS share, r.traffic, r.arm, r.y, r.n, r.cbucket, k.rehashed,
           COLUMNS('^attr__')
    FROM ({{include count_own_rows}}) AS r
    JOIN count_days AS k ON k.day = r.day
)
{{include count_keys}}
