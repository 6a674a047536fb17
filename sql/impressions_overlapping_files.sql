-- Pairs of a day's impressions files ($files: the files the day counts,
-- resolved now) whose staged rows share a traffic and overlapping dates
-- ([ds_start, ds]: a row's own day, or a pool's declared range), the only
-- pairs whose rows can repeat an id key (DESIGN §2: (ds, traffic,
-- request_id, item_id) is unique). Clean inputs have none: a day's file holds
-- its own day, a pool its range, another traffic another file. Reads the
-- staged profiles only (a few thousand rows a day, no input row).
WITH spans AS (
    SELECT DISTINCT src_file AS file, traffic, ds_start, ds
    FROM impressions
    WHERE src_file IN (SELECT unnest($files::VARCHAR[])) AND n > 0
)
SELECT DISTINCT a.file AS first, b.file AS second
FROM spans AS a JOIN spans AS b
  ON a.traffic = b.traffic AND a.file < b.file AND a.ds_start <= b.ds AND b.ds_start <= a.ds
ORDER BY first, second
