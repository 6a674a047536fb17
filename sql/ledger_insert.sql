-- Record a release part's ε against its population key.
INSERT INTO privacy_ledger VALUES ($dataset, $release_id, $epsilon, now()::TIMESTAMP, $description)
