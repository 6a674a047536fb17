-- DESIGN §3 sdt.
CREATE TABLE IF NOT EXISTS sdt (
    ds DATE, attribute VARCHAR, "group" VARCHAR, labeler_id VARCHAR, window_start DATE, window_end DATE, n_pos BIGINT, n_neg BIGINT, fpr DOUBLE, fnr DOUBLE, prevalence DOUBLE, criterion_t DOUBLE, se_t DOUBLE, d_prime DOUBLE, se_d_prime DOUBLE, implied_threshold DOUBLE, implied_threshold_ci_low DOUBLE, implied_threshold_ci_high DOUBLE, cost_ratio DOUBLE, cost_ratio_ci_low DOUBLE, cost_ratio_ci_high DOUBLE, corrected BOOLEAN, p_vs_pool DOUBLE, reason VARCHAR,
    run_id VARCHAR  -- the run that wrote the row (matches the day's dq_results when consistent)
)
