-- Record one finished run.
INSERT INTO runs (run_id, ds, started_at, finished_at, status, detail, config_path, config_fp, params, inputs, outputs,
                  timings)
VALUES ($run_id, $ds, $started_at, now()::TIMESTAMP, $status, $detail, $config_path, $config_fp, $params, $inputs,
        $outputs, $timings)
