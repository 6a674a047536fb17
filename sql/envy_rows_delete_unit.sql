-- Remove one staged file's per-user rows before they are re-inserted
-- ($file: the file's identity, as for impressions_delete_unit.sql).
DELETE FROM envy_rows WHERE src_file = $file
