-- Record (or update) a staged file's fingerprint and its raw data-quality result.
INSERT OR REPLACE INTO ingest_log
VALUES ($file, $source, $size, $mtime_ns, $config_fp, $ds_start, $ds, $scope, $rows, now()::TIMESTAMP, $dq)
