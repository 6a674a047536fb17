-- Record one finished run.
INSERT INTO runs VALUES ($run_id, $ds, $started_at, now()::TIMESTAMP, $status, $detail, $config_path, $config_fp,
                         $params, $inputs, $outputs)
