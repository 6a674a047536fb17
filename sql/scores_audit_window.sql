-- Scored items of $model with a known outcome in the window $window_start..$ds, for the private audit
-- release: with item_id, oldest first (ds, then load order), so the last row per item_id is its latest.
SELECT item_id, ds, score, outcome, COLUMNS('^attr__')
FROM scores
WHERE ds BETWEEN $window_start AND $ds AND list_contains($files, src_file) AND model = $model
  AND outcome IS NOT NULL AND score IS NOT NULL
ORDER BY ds, rowid
