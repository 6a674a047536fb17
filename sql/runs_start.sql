-- Record a run as it starts (status 'running'), with the inputs it resolved:
-- a run killed before it finishes stays 'running', so the day is neither
-- published nor forgotten (--only-failed and the scheduled run pick it up).
INSERT INTO runs (run_id, ds, started_at, status, detail, config_path, config_fp, params, inputs)
VALUES ($run_id, $ds, $started_at, 'running', '', $config_path, $config_fp, $params, $inputs)
