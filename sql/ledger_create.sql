-- Privacy budget spent per data set: one row per differentially private release.
CREATE TABLE IF NOT EXISTS privacy_ledger (
    dataset     VARCHAR,
    release_id  VARCHAR PRIMARY KEY,
    epsilon     DOUBLE,
    released_at TIMESTAMP,
    description VARCHAR
)
