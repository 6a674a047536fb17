-- DESIGN §3 reo, plus the confidence level, the naive diagnostics and the reason for NaNs.
CREATE TABLE IF NOT EXISTS reo (
    ds DATE, arm VARCHAR, attribute VARCHAR, K BIGINT,
    reo DOUBLE, se DOUBLE, ci_low DOUBLE, ci_high DOUBLE, n_rec BIGINT, n_rand BIGINT,
    rand_window_start DATE, rand_window_end DATE, ci_method VARCHAR, level DOUBLE,
    exceeds_80pct_rule BOOLEAN, reo_naive_recommended_only DOUBLE, reo_naive_missing_as_negative DOUBLE,
    reason VARCHAR,
    run_id VARCHAR  -- the run that wrote the row (matches the day's dq_results when consistent)
)
