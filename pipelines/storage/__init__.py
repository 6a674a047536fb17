"""Storage: the DuckDB file (staging, run records), the Parquet warehouse, the run lock."""
