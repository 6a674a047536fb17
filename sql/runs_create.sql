-- One row per daily run (history, never rewritten): what ran, on which inputs, with which result.
CREATE TABLE IF NOT EXISTS runs (
    run_id      VARCHAR PRIMARY KEY,
    ds          DATE,
    started_at  TIMESTAMP,
    finished_at TIMESTAMP,
    status      VARCHAR,   -- published | quarantined | failed
    detail      VARCHAR,   -- error or failed expectations
    config_path VARCHAR,
    config_fp   VARCHAR,
    params      VARCHAR,   -- JSON
    inputs      VARCHAR,   -- JSON: file, source, size, digest (content), rows
    outputs     VARCHAR,   -- JSON: table -> rows
    timings     VARCHAR    -- JSON: stage -> wall seconds (pipelines/core/timing.py)
)
