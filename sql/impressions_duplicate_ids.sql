-- Add the id keys of `raw_part` (one file's rows) that occur more than once
-- ($keys: __file, ds, traffic, request_id, item_id as present) with their
-- number of copies, for the ids_unique rule. One hash aggregation over the
-- key columns of one file, so memory follows the largest file, not the range.
INSERT INTO copies BY NAME
SELECT COLUMNS(lambda c: list_contains($keys, c)), count(*)::BIGINT AS id_copies
FROM raw_part
GROUP BY ALL
HAVING count(*) > 1
