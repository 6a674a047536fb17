-- Every row of the DuckDB privacy ledger, to compare with the warehouse's ledger files (DESIGN §4.6).
SELECT dataset, release_id, epsilon, released_at, description FROM privacy_ledger
