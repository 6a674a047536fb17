-- Every staged file with its recorded fingerprint (to detect late or changed data).
SELECT file, source, size, mtime_ns, ds_start, ds, scope, rows FROM ingest_log ORDER BY file
