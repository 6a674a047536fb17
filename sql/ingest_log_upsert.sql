-- Record (or update) a staged file's fingerprint and its raw data-quality result.
INSERT OR REPLACE INTO ingest_log (file, source, size, digest, config_fp, ds_start, ds, scope, rows, ingested_at, dq)
VALUES ($file, $source, $size, $digest, $config_fp, $ds_start, $ds, $scope, $rows, now()::TIMESTAMP, $dq)
