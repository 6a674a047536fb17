-- DESIGN §3 threshold_prevalence_diff.
CREATE TABLE IF NOT EXISTS threshold_prevalence_diff (
    ds DATE, model VARCHAR, attribute VARCHAR, group_a VARCHAR, group_b VARCHAR, t DOUBLE, d DOUBLE, diff DOUBLE, se DOUBLE, ci_low DOUBLE, ci_high DOUBLE, p_value DOUBLE,
    run_id VARCHAR  -- the run that wrote the row (matches the day's dq_results when consistent)
)
