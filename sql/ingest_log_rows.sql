-- File rows staged for each of the files $files (identities), from the ingest log.
SELECT file, rows FROM ingest_log WHERE list_contains($files, file)
