-- Fingerprint and raw data-quality result of a file as it was last staged (no row: never staged).
SELECT size, mtime_ns, config_fp, rows, dq FROM ingest_log WHERE file = $file
