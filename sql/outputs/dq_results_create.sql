-- DESIGN §3 dq_results, plus the subject validated (file or table), the number
-- of failed warnings and the names of the failed expectations by severity.
-- success = no critical expectation failed.
CREATE TABLE IF NOT EXISTS dq_results (
    ds DATE, "table" VARCHAR, suite VARCHAR, subject VARCHAR, success BOOLEAN,
    n_expectations BIGINT, n_failed BIGINT, n_warnings BIGINT,
    failed_critical VARCHAR, failed_warning VARCHAR, details VARCHAR,
    run_id VARCHAR  -- the run that wrote the row (matches the day's dq_results when consistent)
)
