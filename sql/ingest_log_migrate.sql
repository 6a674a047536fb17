-- Ingest logs written when a file was fingerprinted by its modification time (column mtime_ns, left
-- unread) gain the content digest; their rows have none, so each file is staged once more.
ALTER TABLE ingest_log ADD COLUMN IF NOT EXISTS digest BIGINT
