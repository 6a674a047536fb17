-- The staged impressions rows each day of the registered frame `day_files`
-- (day DATE, file VARCHAR: the files each day needs, resolved now) counts,
-- one row per (day, staged row), written once for sql/group_counts.sql and
-- sql/count_spans.sql (each includes this query as a subquery,
-- pipelines/storage/db.py sql_text). Only rows of a day's own current files
-- count (DESIGN §2 "Input identity"): rows staged from a file no longer
-- resolved never reach a count.
-- Default and other named stages: rows of the day, by arm.
-- Random traffic (DESIGN §2 "Random-traffic windows"), shared by all arms
-- (arm = 'all'), from the day's trailing window w0 = day - $window_days + 1 .. day:
-- a staged row covers ds_start..ds (a row with its own date: ds_start = ds; a
-- pool without per-row dates: its declared range). $pool_policy 'contained'
-- takes rows whose range lies inside the window, 'overlap' rows whose range
-- meets it; for dated rows both mean exactly w0 <= ds <= day. day_files lists
-- only the pools the policy admits; the condition here says the same.
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
