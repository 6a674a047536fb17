-- Fingerprints of the files a day's run read ($files: list of paths).
SELECT file, source, size, mtime_ns, rows FROM ingest_log WHERE list_contains($files, file) ORDER BY file
