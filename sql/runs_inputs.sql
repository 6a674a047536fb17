-- The inputs a run recorded when it started (JSON).
SELECT inputs FROM runs WHERE run_id = $run_id
