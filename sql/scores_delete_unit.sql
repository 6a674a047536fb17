-- Remove the rows of one staged scores file before it is re-inserted (re-ingest replaces).
DELETE FROM scores WHERE src_file = $file
