-- Fingerprint (size, content digest, config), rows and raw data-quality result of each
-- of the files $files (identities) as last staged; a file never staged has no row.
SELECT file, size, digest, config_fp, rows, dq FROM ingest_log WHERE list_contains($files, file)
