"""fairmon pipelines: Prefect flows, tasks and the CLI. Wiring only; the
statistics live in :mod:`transforms` and the SQL in ``sql/``."""
