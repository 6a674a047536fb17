-- Days whose inputs changed after they were computed, with the file that changed.
CREATE TABLE IF NOT EXISTS stale_days (ds DATE, file VARCHAR, detected_at TIMESTAMP, PRIMARY KEY (ds, file))
