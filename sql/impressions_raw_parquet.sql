-- The rows of a Parquet file registered as `raw_file` (read with
-- file_row_number = true), with the 1-based file row as __row.
SELECT * EXCLUDE (file_row_number), file_row_number + 1 AS __row
FROM raw_file
