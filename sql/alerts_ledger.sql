-- The privacy ledger's releases (DESIGN §4.6), for the budget_low alerts (DESIGN §4.9): one row per
-- release part, keyed by the population it spent from.
SELECT dataset, released_at, epsilon FROM privacy_ledger ORDER BY released_at, release_id
