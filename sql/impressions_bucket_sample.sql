-- The first $rows rows registered as `raw_in` (a scan stops there): their
-- number of distinct cluster ids ({{cluster}}) and of rows, from which
-- profiles.py picks sql/impressions_bucket_rows.sql (ids mostly distinct) or
-- sql/impressions_bucket.sql (ids repeat). Both give every row the same key;
-- the sample decides the cost only.
SELECT count(DISTINCT {{cluster:text}})::BIGINT AS ids, count(*)::BIGINT AS n
FROM (SELECT {{cluster}} FROM raw_in LIMIT $rows) AS __sample
