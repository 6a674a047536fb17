-- Pairs of a day's impressions files ($files: the files the day counts,
-- resolved now) whose staged rows could share an id key (DESIGN §2: (ds,
-- traffic, request_id, item_id) is unique): the same traffic and
-- overlapping dates ([ds_start, ds]: a row's own day), or, when either file
-- is a pool ($pools: its rows carry no date of their own, only the declared
-- range, so a copy declared over other days still repeats them), the same
-- traffic alone. Clean inputs have none: a day's file holds its own day,
-- random traffic comes from one pool or from pools of other rows, another
-- traffic from another file. Reads the staged profiles only (a few thousand
-- rows a day, no input row).
WITH spans AS (
    SELECT DISTINCT src_file AS file, traffic, ds_start, ds,
           src_file IN (SELECT unnest($pools::VARCHAR[])) AS pool
    FROM impressions
    WHERE src_file IN (SELECT unnest($files::VARCHAR[])) AND n > 0
)
SELECT DISTINCT a.file AS first, b.file AS second
FROM spans AS a JOIN spans AS b
  ON a.traffic = b.traffic AND a.file < b.file
 AND (a.pool OR b.pool OR (a.ds_start <= b.ds AND b.ds_start <= a.ds))
ORDER BY first, second
