-- Runs tables written before stage timings were recorded gain the column.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS timings VARCHAR
