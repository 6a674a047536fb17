-- Record a release part's ε against its population key (the time as written to the warehouse's ledger file).
INSERT INTO privacy_ledger VALUES ($dataset, $release_id, $epsilon, $released_at, $description)
