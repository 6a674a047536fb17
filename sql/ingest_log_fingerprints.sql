-- Size, mtime and config fingerprint of each of the files $files (identities)
-- as last staged; a file never staged has no row.
SELECT file, size, mtime_ns, config_fp FROM ingest_log WHERE list_contains($files, file)
