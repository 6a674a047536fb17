-- Remove the rows of one staged labels file before it is re-inserted (re-ingest replaces).
DELETE FROM labels WHERE src_file = $file
