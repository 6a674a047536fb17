-- How many id keys sql/impressions_duplicate_ids.sql found duplicated.
SELECT count(*)::BIGINT AS n FROM copies
