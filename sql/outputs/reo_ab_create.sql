-- DESIGN §3 reo_ab, plus Welch degrees of freedom (partition), the confidence level and the reason for NaNs.
CREATE TABLE IF NOT EXISTS reo_ab (
    ds DATE, attribute VARCHAR, control VARCHAR, treatment VARCHAR, metric VARCHAR,
    diff DOUBLE, se DOUBLE, ci_low DOUBLE, ci_high DOUBLE, p_value DOUBLE, method VARCHAR,
    df DOUBLE, level DOUBLE, reason VARCHAR,
    run_id VARCHAR  -- the run that wrote the row (matches the day's dq_results when consistent)
)
