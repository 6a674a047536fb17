-- Pairs of a day's impressions files whose staged rows could share an id
-- key (DESIGN §2: (ds, traffic, request_id, item_id) is unique), over the
-- registered frame `file_spans` (file, traffic, ds_start, ds, pool:
-- sql/impressions_file_spans.sql of the files the day counts, resolved now):
-- the same traffic and overlapping dates, or, when either file is a pool (a
-- copy declared over other days still repeats its rows), the same traffic
-- alone. Clean inputs have none: a day's file holds its own day, random
-- traffic comes from one pool or from pools of other rows, another traffic
-- from another file.
SELECT DISTINCT a.file AS first, b.file AS second
FROM file_spans AS a JOIN file_spans AS b
  ON a.traffic = b.traffic AND a.file < b.file
 AND (a.pool OR b.pool OR (a.ds_start <= b.ds AND b.ds_start <= a.ds))
ORDER BY first, second
