-- Distinct-value profile of one impressions file, registered as `raw` (its rows
-- plus __row, the 0-based file row): one engine scan grouping by the contract
-- columns present in the file ($columns: ds, traffic, arm, signals,
-- attributes). One row per distinct combination, with the rows it stands for
-- (__n) and its first file row (__first_row). The data-quality suite and the
-- staging step work on this profile, never on the rows as Python objects.
SELECT COLUMNS(lambda c: list_contains($columns, c)),
       count(*)::BIGINT AS __n,
       min(__row)::BIGINT + 1 AS __first_row
FROM raw
GROUP BY ALL
