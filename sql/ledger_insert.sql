-- Record a release's ε against its data set.
INSERT INTO privacy_ledger VALUES ($dataset, $release_id, $epsilon, now()::TIMESTAMP, $description)
