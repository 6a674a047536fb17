-- DESIGN §3 threshold_prevalence.
CREATE TABLE IF NOT EXISTS threshold_prevalence (
    ds DATE, model VARCHAR, attribute VARCHAR, "group" VARCHAR, t DOUBLE, d DOUBLE, window_start DATE, window_end DATE, n_window BIGINT, prevalence_at_threshold DOUBLE, se DOUBLE, ci_low DOUBLE, ci_high DOUBLE, implied_cost_ratio DOUBLE, cost_ratio_ci_low DOUBLE, cost_ratio_ci_high DOUBLE, naive_window_mean DOUBLE, slope DOUBLE, hc VARCHAR, reason VARCHAR,
    run_id VARCHAR  -- the run that wrote the row (matches the day's dq_results when consistent)
)
