-- As impressions_profile.sql, for rows with request_id and item_id: each row
-- also carries id_copies, the number of rows sharing its id key ({{keys}}),
-- from `copies`, the duplicated keys (sql/impressions_duplicate_ids.sql; run
-- only when there are some). A key with a null part matches nothing (1 copy).
-- Portable (pipelines/storage/portable.py).
SELECT {{columns}},
       CAST(coalesce(c.id_copies, 1) AS BIGINT) AS id_copies,
       CAST(count(*) AS BIGINT) AS __n,
       CAST(min(__row) AS BIGINT) + 1 AS __first_row
FROM raw LEFT JOIN copies AS c USING ({{keys}})
GROUP BY {{columns}}, coalesce(c.id_copies, 1)
