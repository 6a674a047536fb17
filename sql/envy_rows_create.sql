-- Staging table of per-user rows for the envy audit (DESIGN §4.7), created
-- from the first frame `envy_staged` (layout: pipelines/ingest/adapters.py
-- envy_profile). LIMIT 0 copies the schema only.
CREATE TABLE IF NOT EXISTS envy_rows AS SELECT * FROM envy_staged LIMIT 0
