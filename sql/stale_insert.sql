-- Mark day $ds stale because $file changed (idempotent).
INSERT OR REPLACE INTO stale_days VALUES ($ds, $file, now()::TIMESTAMP)
