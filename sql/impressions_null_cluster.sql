-- The first row (0-based __row, with its file {{scope:key}}) whose cluster id
-- {{cluster}} is null or blank (an empty or all-space text), or no row. Clustered rows need an id on every row: a
-- null id would make all such rows one cluster (sql/impressions_bucket.sql
-- gives them one key), a silent and wrong design effect.
SELECT {{scope:key}} AS __scope, min(__row) AS __row
FROM raw_in
WHERE {{cluster}} IS NULL OR trim({{cluster:text}}) = ''
GROUP BY 1
ORDER BY 1
LIMIT 1
