-- Close a run: its final status (published | quarantined | failed), detail, outputs and stage timings.
UPDATE runs
SET finished_at = now()::TIMESTAMP, status = $status, detail = $detail, inputs = $inputs, outputs = $outputs,
    timings = $timings
WHERE run_id = $run_id
