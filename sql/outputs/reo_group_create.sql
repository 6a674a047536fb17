-- DESIGN §3 reo_group; n_rec/n_rand are the group's rows, ci_* bound delta_U.
CREATE TABLE IF NOT EXISTS reo_group (
    ds DATE, arm VARCHAR, attribute VARCHAR, "group" VARCHAR,
    n_rec BIGINT, n_rand BIGINT, n_pos_rec BIGINT, n_pos_rand BIGINT,
    P DOUBLE, Q DOUBLE, U DOUBLE, delta_U DOUBLE, se_delta_U DOUBLE, ci_low DOUBLE, ci_high DOUBLE,
    ci_method VARCHAR, reason VARCHAR,
    run_id VARCHAR  -- the run that wrote the row (matches the day's dq_results when consistent)
)
