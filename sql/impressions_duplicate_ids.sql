-- The id keys of `raw` that occur more than once ($keys: ds, traffic,
-- request_id, item_id as present in the file) with their number of copies,
-- for the ids_unique rule; one hash aggregation over the key columns only.
CREATE OR REPLACE TEMP TABLE copies AS
SELECT COLUMNS(lambda c: list_contains($keys, c)), count(*)::BIGINT AS id_copies
FROM raw
GROUP BY ALL
HAVING count(*) > 1
