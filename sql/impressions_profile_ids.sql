-- As impressions_profile.sql, for a file with request_id and item_id: each
-- row also carries id_copies, the number of rows sharing its id key, from the
-- temporary table `copies` of duplicated keys (sql/impressions_duplicate_ids.sql;
-- run only when that table is not empty).
SELECT COLUMNS(lambda c: list_contains($columns, c)),
       coalesce(id_copies, 1)::BIGINT AS id_copies,
       count(*)::BIGINT AS __n,
       min(__row)::BIGINT + 1 AS __first_row
FROM raw NATURAL LEFT JOIN copies
GROUP BY ALL
