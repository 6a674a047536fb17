-- A day's own staged rows, for every day of the registered frame `day_files`
-- (day DATE, file VARCHAR: the files each day needs, resolved now): the rows
-- of every traffic but random of its current files dated the day
-- (ds_start = ds = day), with the day. Only rows of a day's own current files
-- count (DESIGN §2 "Input identity"): rows staged from a file no longer
-- resolved never reach a count. Random rows are counted per unit
-- (sql/count_random_shares.sql). Included as a subquery by
-- sql/count_random_shares.sql, sql/group_counts.sql and sql/count_spans.sql.
SELECT f.day, i.*
FROM impressions AS i JOIN day_files AS f
  ON i.src_file = f.file AND i.ds = f.day AND i.ds_start = f.day
WHERE i.traffic <> 'random'
