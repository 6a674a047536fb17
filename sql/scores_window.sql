-- Scored items with a known outcome in the window $window_start..$ds (prevalence at the threshold).
SELECT model, score, outcome, COLUMNS('^attr__')
FROM scores
WHERE ds BETWEEN $window_start AND $ds AND list_contains($files, src_file) AND outcome IS NOT NULL AND score IS NOT NULL
