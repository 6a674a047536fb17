-- Empty table of duplicated id keys (columns $keys of `raw_part`, plus
-- id_copies), filled by sql/impressions_duplicate_ids.sql one file at a time.
CREATE OR REPLACE TEMP TABLE copies AS
SELECT COLUMNS(lambda c: list_contains($keys, c)), 0::BIGINT AS id_copies
FROM raw_part
LIMIT 0
