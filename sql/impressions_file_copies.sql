-- Pairs of a day's impressions files ($files: the files the day counts,
-- resolved now) whose staged rows are the same rows: one file copied under
-- another name (a random pool copied with another declared range would count
-- its traffic twice). Each file's staged profile (one row per distinct
-- combination of the contract columns with its count n) is summed to an
-- order-free signature: the sum of the hashes of its rows without the file's
-- own name and first row, and for a pool ($pools: files whose dates are their
-- declared range, not the rows') without its dates; a row with its own date
-- keeps it. Costs a few thousand staged rows a day, no input row.
WITH staged AS (
    SELECT i.*, CASE WHEN i.src_file IN (SELECT unnest($pools::VARCHAR[])) THEN NULL ELSE [i.ds_start, i.ds] END AS __dates
    FROM impressions AS i
    WHERE i.src_file IN (SELECT unnest($files::VARCHAR[]))
),
rows AS (
    SELECT src_file,
           hash(*COLUMNS(* EXCLUDE (src_file, src_row, ds_start, ds))) AS h,
           n
    FROM staged
),
sig AS (
    SELECT src_file AS file, sum(h::HUGEINT) AS s, count(*) AS k, sum(n) AS n
    FROM rows
    GROUP BY src_file
)
SELECT a.file AS first, b.file AS second, a.n::BIGINT AS n
FROM sig AS a JOIN sig AS b ON a.s = b.s AND a.k = b.k AND a.n = b.n AND a.file < b.file
WHERE a.n > 0
ORDER BY first, second
