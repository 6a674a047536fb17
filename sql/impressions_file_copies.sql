-- Pairs of a day's impressions files whose staged rows are the same rows:
-- one file copied under another name (a random pool copied with another
-- declared range would count its traffic twice). Over the registered frame
-- `file_signatures` (file, s, k, n: sql/impressions_file_signatures.sql of
-- the files the day counts, resolved now): two files with the same
-- signature, rows and logged rows.
SELECT a.file AS first, b.file AS second, a.n::BIGINT AS n
FROM file_signatures AS a JOIN file_signatures AS b ON a.s = b.s AND a.k = b.k AND a.n = b.n AND a.file < b.file
WHERE a.n > 0
ORDER BY first, second
