-- threshold_prevalence restricted to published days: days whose latest data-quality results are all successful.
CREATE OR REPLACE VIEW threshold_prevalence_published AS
SELECT t.* FROM threshold_prevalence AS t
WHERE t.ds IN (SELECT ds FROM dq_results GROUP BY ds HAVING bool_and(success))
