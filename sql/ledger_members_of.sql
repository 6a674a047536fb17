-- The individuals of one population of the DuckDB ledger, to write them to the warehouse's ledger files.
SELECT population, item_id FROM privacy_ledger_members WHERE population = $population ORDER BY item_id
