-- One row per ingested file: what it was (size, mtime, config) when it was
-- staged, and the raw data-quality result it passed with (JSON of DQResult).
CREATE TABLE IF NOT EXISTS ingest_log (
    file        VARCHAR PRIMARY KEY,
    size        BIGINT,
    mtime_ns    BIGINT,
    config_fp   VARCHAR,
    ds_start    DATE,
    ds          DATE,
    scope       VARCHAR,
    rows        BIGINT,
    ingested_at TIMESTAMP,
    dq          VARCHAR
)
