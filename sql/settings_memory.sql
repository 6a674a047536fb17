-- DuckDB's allocator (jemalloc) keeps memory its queries freed and returns it to
-- the system only when a later allocation happens to purge it: after the
-- profile scan of a backfill's files (~1.2 GB at K = 4,096 clustered) about
-- 0.4 GB stayed resident through the counts, the estimators and GX. With
-- background threads jemalloc purges freed pages on its own: the process's
-- peak at 7 days x 4,096 groups fell 1.74 -> 1.32 GB (bench/README issue 37
-- item 3). The setting is the process's (one allocator); results are unchanged.
SET allocator_background_threads = true
