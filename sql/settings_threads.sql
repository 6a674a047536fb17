-- The number of threads DuckDB runs a statement with ($threads; the database's
-- setting, restored after the statement that needed another). The staging
-- insert (pipelines/ingest/staging_tables.insert) runs on one: a parallel
-- insert of a large frame writes one partly filled row group per thread's
-- batch, which the checkpoint at close then merges and rewrites (a file up to
-- twice the size, bench/README.md). One thread writes full row groups in the
-- frame's order, so the table's rows and their order are the same.
SET threads = $threads
