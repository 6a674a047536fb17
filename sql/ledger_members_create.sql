-- The individuals behind each population key of the privacy ledger (DESIGN §4.6):
-- one row per (population, item_id); a population's list is written once, with its first release.
CREATE TABLE IF NOT EXISTS privacy_ledger_members (
    population VARCHAR,
    item_id    VARCHAR,
    PRIMARY KEY (population, item_id)
)
