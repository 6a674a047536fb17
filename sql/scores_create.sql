-- Staging table for scores, created from the first normalised frame `staged` (schema only).
CREATE TABLE IF NOT EXISTS scores AS SELECT * FROM staged LIMIT 0
