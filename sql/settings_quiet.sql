-- No DuckDB progress bar on long scans (fairmon reports progress itself).
SET enable_progress_bar = false
