-- Forget every file staged into one staging table ($source: its name), whose
-- rows were dropped (a config whose attributes no longer match them): each
-- file is staged again when a day needs it.
DELETE FROM ingest_log WHERE source = $source
