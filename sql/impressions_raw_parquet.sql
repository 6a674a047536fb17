-- The rows of the Parquet files $files: __file = $first_index + the file's
-- position in the list, __row = its 0-based row (plain column references,
-- free to project).
SELECT * EXCLUDE (file_row_number), CAST(file_index + $first_index AS BIGINT) AS __file, file_row_number AS __row
FROM read_parquet($files, file_row_number = true)
