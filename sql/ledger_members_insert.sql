-- The individuals of $population (`release_members`, item_id), unless the population is listed already.
INSERT INTO privacy_ledger_members
SELECT DISTINCT $population, CAST(item_id AS VARCHAR)
FROM release_members
WHERE NOT EXISTS (SELECT 1 FROM privacy_ledger_members WHERE population = $population)
