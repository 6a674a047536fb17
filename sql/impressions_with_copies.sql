-- The rows registered as `raw_ids` with id_copies: how many rows share the
-- row's id key ({{keys}}: __file when several files, request_id, item_id),
-- from the temporary table `copies` of the duplicated keys
-- (engines.collect_copies; 1 for a key not in it). For the profile with rows
-- per cluster bucket (sql/impressions_profile_buckets.sql), which then groups
-- its profile rows by id_copies too, as sql/impressions_profile_ids.sql does.
SELECT r.*, CAST(coalesce(c.id_copies, 1) AS BIGINT) AS id_copies
FROM raw_ids AS r LEFT JOIN copies AS c USING ({{keys}})
