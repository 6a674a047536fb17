-- Per impressions file of $files (identities, resolved now): the traffic and
-- dates ([ds_start, ds]: a row's own day) of its staged rows with n > 0, and
-- whether it is a pool ($pools: its rows carry no date of their own, only
-- the declared range). sql/impressions_overlapping_files.sql pairs files by
-- them. Reads staged rows, no input row; kept per file for the run
-- (pipelines/ingest/file_summaries.py).
SELECT DISTINCT src_file AS file, traffic, ds_start, ds,
       src_file IN (SELECT unnest($pools::VARCHAR[])) AS pool
FROM impressions
WHERE src_file IN (SELECT unnest($files::VARCHAR[])) AND n > 0
