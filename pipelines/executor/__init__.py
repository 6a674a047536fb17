"""The executor: one code path that runs a batch of days through ingest -> counts -> checks -> estimators ->
checks -> publish, in process; Prefect (pipelines/orchestration) only wraps it."""
