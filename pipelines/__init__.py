"""fairmon pipelines: Prefect flows, the runner, ingest, storage and the faces
(CLI, report). Wiring and I/O only; the statistics live in
:mod:`fairmon.transforms` and the SQL in ``sql/``."""
