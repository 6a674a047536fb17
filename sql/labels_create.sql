-- Staging table for labels, created from the first normalised frame `staged` (schema only).
CREATE TABLE IF NOT EXISTS labels AS SELECT * FROM staged LIMIT 0
