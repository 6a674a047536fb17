-- threshold_prevalence_diff restricted to published days: days whose latest data-quality results are all successful.
CREATE OR REPLACE VIEW threshold_prevalence_diff_published AS
SELECT t.* FROM threshold_prevalence_diff AS t
WHERE t.ds IN (SELECT ds FROM dq_results GROUP BY ds HAVING bool_and(success))
