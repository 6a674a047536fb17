-- A population's individuals from the warehouse's ledger files (registered as `ledger_members_new`),
-- unless the DuckDB ledger lists that population already.
INSERT INTO privacy_ledger_members
SELECT * FROM ledger_members_new AS m
WHERE NOT EXISTS (SELECT 1 FROM privacy_ledger_members AS p WHERE p.population = m.population)
