-- Release rows of the warehouse's ledger files (registered as `ledger_new`) that the DuckDB ledger lacks.
INSERT INTO privacy_ledger SELECT * FROM ledger_new
