-- Per-key counts of each day's own rows (sql/count_keys.sql): the days of
-- the registered frame `count_days` (day DATE, rehashed BOOLEAN: whether the
-- day maps per-cluster keys to hash buckets, sql/count_random_shares.sql),
-- their rows of every traffic but random from the files of the registered
-- frame `day_files` (day DATE, file VARCHAR: the files each day needs,
-- resolved now). Only rows of a day's own current files count (DESIGN §2
-- "Input identity"): rows staged from a file no longer resolved never reach
-- a count. A day's own rows are its rows (ds_start = ds = day), by arm; its
-- random rows are counted per share (sql/group_counts_pooled.sql). share is null.
WITH counted AS (
    SELECT f.day AS ds, NULL::INTEGER AS share, i.traffic, i.arm, i.y, i.n, i.cbucket, k.rehashed,
           COLUMNS('^attr__')
    FROM impressions AS i
    JOIN day_files AS f ON i.src_file = f.file AND i.ds = f.day AND i.ds_start = f.day
    JOIN count_days AS k ON k.day = f.day
    WHERE i.traffic <> 'random'
)
{{include count_keys}}
