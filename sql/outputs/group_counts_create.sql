-- DESIGN §3 group_counts (window_start/window_end: span of the rows counted).
CREATE TABLE IF NOT EXISTS group_counts (
    ds DATE, source VARCHAR, traffic VARCHAR, arm VARCHAR, attribute VARCHAR, "group" VARCHAR,
    n BIGINT, n_pos BIGINT, window_start DATE, window_end DATE,
    run_id VARCHAR  -- the run that wrote the row (matches the day's dq_results when consistent)
)
