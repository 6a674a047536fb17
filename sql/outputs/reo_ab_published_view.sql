-- reo_ab restricted to published days: days whose latest data-quality results are all successful.
CREATE OR REPLACE VIEW reo_ab_published AS
SELECT t.* FROM reo_ab AS t
WHERE t.ds IN (SELECT ds FROM dq_results GROUP BY ds HAVING bool_and(success))
