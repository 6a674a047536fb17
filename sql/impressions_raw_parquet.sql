-- The rows of Parquet files registered as `raw_file` (read with filename and
-- file_row_number), with the file as __file and its 1-based row as __row.
SELECT * EXCLUDE (file_row_number, filename), filename AS __file, file_row_number + 1 AS __row
FROM raw_file
