-- One row per ingested file: which input it feeds, what it was (size, content
-- digest, config) when it was staged, and the raw data-quality result it passed with.
CREATE TABLE IF NOT EXISTS ingest_log (
    file        VARCHAR PRIMARY KEY,
    source      VARCHAR,
    size        BIGINT,
    digest      BIGINT,
    config_fp   VARCHAR,
    ds_start    DATE,
    ds          DATE,
    scope       VARCHAR,
    rows        BIGINT,
    ingested_at TIMESTAMP,
    dq          VARCHAR
)
