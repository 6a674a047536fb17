-- Staging table for impressions, created from the first normalised frame `staged`
-- (layout: transforms/contract.py). LIMIT 0 copies the schema only.
CREATE TABLE IF NOT EXISTS impressions AS SELECT * FROM staged LIMIT 0
