"""Ingest: which files make up a day, reading them, and staging them into DuckDB."""
