-- Privacy budget spent per population of individuals (DESIGN §4.6): one row per differentially
-- private release part; `dataset` is the population key (see sql/ledger_spent.sql).
CREATE TABLE IF NOT EXISTS privacy_ledger (
    dataset     VARCHAR,
    release_id  VARCHAR PRIMARY KEY,
    epsilon     DOUBLE,
    released_at TIMESTAMP,
    description VARCHAR
)
