-- As impressions_profile.sql, for a file with request_id and item_id: each
-- row also carries id_copies, the number of rows sharing its id key ($keys:
-- ds, traffic, request_id, item_id as present), so the suite's ids_unique
-- rule can name the duplicated rows. Keys seen once are not materialised:
-- only the (usually empty) set of duplicated keys is joined back.
WITH copies AS (
    SELECT COLUMNS(lambda c: list_contains($keys, c)), count(*)::BIGINT AS id_copies
    FROM raw
    GROUP BY ALL
    HAVING count(*) > 1
)
SELECT COLUMNS(lambda c: list_contains($columns, c)),
       coalesce(id_copies, 1)::BIGINT AS id_copies,
       count(*)::BIGINT AS __n,
       min(__row)::BIGINT AS __first_row
FROM raw NATURAL LEFT JOIN copies
GROUP BY ALL
ORDER BY __first_row
