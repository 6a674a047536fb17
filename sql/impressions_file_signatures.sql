-- Per impressions file of $files (identities, resolved now): an order-free
-- signature of its staged rows (one row per distinct combination of the
-- contract columns with its count n; sql/impressions_file_copies.sql pairs
-- files by it): s, the sum of the hashes of its rows without the file's own
-- name and first row, and for a pool ($pools: files whose dates are their
-- declared range, not the rows') without its dates (a row with its own date
-- keeps it); k, its staged rows; n, the logged rows they stand for. A file
-- with no staged row has no row here. Reads staged rows, no input row; kept
-- per file for the run (pipelines/ingest/file_summaries.py).
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
)
SELECT src_file AS file, sum(h::HUGEINT) AS s, count(*)::BIGINT AS k, sum(n)::BIGINT AS n
FROM rows
GROUP BY src_file
