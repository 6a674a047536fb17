-- DuckDB's allocator (jemalloc) keeps memory its queries freed and returns it to
-- the system only when a later allocation happens to purge it. With background
-- threads jemalloc purges freed pages on its own, so a large scan's memory
-- does not stay resident after it (bench/README.md). The
-- setting is the process's (one allocator); results are unchanged.
SET allocator_background_threads = true
