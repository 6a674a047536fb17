-- sdt restricted to published days: days whose latest data-quality results are all successful.
CREATE OR REPLACE VIEW sdt_published AS
SELECT t.* FROM sdt AS t
WHERE t.ds IN (SELECT ds FROM dq_results GROUP BY ds HAVING bool_and(success))
