-- Remove one staged file's rows before they are re-inserted, so re-ingesting
-- replaces it. $file is the file's identity (its path relative to the config's
-- folder, pipelines/ingest/adapters.py unit_key): each file is its own unit,
-- so a day split over several files keeps every file's rows.
DELETE FROM impressions WHERE src_file = $file
