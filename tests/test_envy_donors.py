"""Swap-row donor groups (DESIGN §4.7; seed 004 App. B eq. 6): resolved from the
user attribute table, the donor's own rows anywhere in the window or the row's
policy_group, never counted in a silent ``(missing)`` donor group; what cannot
be resolved is the named check swap_donor_group_resolved with its count."""

import datetime as dt

import duckdb
import polars as pl
import pytest

from fairmon.pipelines.storage import db

D1, D2 = dt.date(2026, 1, 1), dt.date(2026, 1, 2)
COLUMNS = "ds, src_file, user_id, donor_user_id, donor_group, n, n_pos, attr__g"


def _con(rows: str, attributes: pl.DataFrame | None = None) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE envy_rows AS SELECT * FROM (VALUES {rows}) AS t({COLUMNS})")
    con.register("envy_files", pl.DataFrame({"file": ["f"]}))
    empty = pl.DataFrame(schema={"user_id": pl.String, "attribute": pl.String, "grp": pl.String})
    con.register("envy_user_attributes", empty if attributes is None else attributes)
    return con


# u1 (group a) is served on day 2 by u2 (rows only on day 1, group b), by u9 (no row
# anywhere) and by a policy_group-only row; u3 (group a) by itself
ROWS = (
    "(DATE '2026-01-01', 'f', 'u2', NULL, NULL, 4, 1, 'b'), "
    "(DATE '2026-01-02', 'f', 'u1', NULL, NULL, 5, 4, 'a'), "
    "(DATE '2026-01-02', 'f', 'u1', 'u2', NULL, 3, 1, 'a'), "
    "(DATE '2026-01-02', 'f', 'u1', 'u9', NULL, 6, 2, 'a'), "
    "(DATE '2026-01-02', 'f', 'u1', 'u8', NULL, 1, 1, 'a'), "
    "(DATE '2026-01-02', 'f', 'u1', NULL, 'b', 2, 0, 'a'), "
    "(DATE '2026-01-02', 'f', 'u3', 'u3', NULL, 7, 7, 'a')"
)


def _cells(con, group_attribute: str = "g") -> dict:
    got = db.query(con, "envy_group_counts", group_attribute=group_attribute, start=D1, ds=D2)
    cells = got.group_by("group", "donor_group", "is_day").agg(pl.col("n").sum(), pl.col("n_pos").sum())
    return {(r["group"], r["donor_group"], r["is_day"]): (r["n"], r["n_pos"]) for r in cells.iter_rows(named=True)}


def test_donor_without_rows_that_day_takes_its_group_from_another_day_and_none_is_missing():
    """u2 has no row on day 2 but one on day 1 (group b): its 3 swap rows count in (a, b) beside
    the policy_group row (2 rows, 0 positive); u9 and u8, known nowhere, are left out: no
    `(missing)` donor group. (a, a) is u3's own swap row."""
    cells = _cells(_con(ROWS))
    assert cells == {
        ("b", None, False): (4, 1),
        ("a", None, True): (5, 4),
        ("a", "b", True): (5, 1),
        ("a", "a", True): (7, 7),
    }
    unresolved = db.query(_con(ROWS), "envy_unresolved_donors", group_attribute="g", attributes=["g"], start=D1, ds=D2)
    assert unresolved.to_dicts() == [
        {"donor_user_id": "u9", "policy_group": None, "attributes": "g", "n_day": 6, "n_window": 6},
        {"donor_user_id": "u8", "policy_group": None, "attributes": "g", "n_day": 1, "n_window": 1},
    ]


def test_user_table_resolves_a_donor_with_no_rows_and_comes_first():
    """The attribute table names u9 (group b) and u8 (null: `(missing)`, as for a target with a
    null attribute) and overrides u2's own rows (group c): every swap row resolves."""
    table = pl.DataFrame({"user_id": ["u9", "u8", "u2"], "attribute": ["g"] * 3, "grp": ["b", "(missing)", "c"]})
    cells = _cells(_con(ROWS, table))
    assert cells[("a", "b", True)] == (6 + 2, 2 + 0)  # u9 and the policy_group row
    assert cells[("a", "c", True)] == (3, 1)
    assert cells[("a", "(missing)", True)] == (1, 1)
    con = _con(ROWS, table)
    assert db.query(con, "envy_unresolved_donors", group_attribute="g", attributes=["g"], start=D1, ds=D2).height == 0


def test_policy_group_only_resolves_the_group_attribute():
    """A policy_group names groups of the group attribute only: for another attribute the row is
    unresolved (reported once, with the attribute), for the configured one it resolves."""
    con = _con(ROWS)
    got = db.query(con, "envy_unresolved_donors", group_attribute="other", attributes=["g"], start=D1, ds=D2)
    pg = got.filter(pl.col("donor_user_id").is_null()).to_dicts()
    assert pg == [{"donor_user_id": None, "policy_group": "b", "attributes": "g", "n_day": 2, "n_window": 2}]
    assert ("a", "b", True) in _cells(_con(ROWS), "g") and _cells(_con(ROWS), "other")[("a", "b", True)] == (3, 1)


def _cfg(tmp_path, severity: str = "", user_table: str = ""):
    from fairmon.pipelines.core.config import load_config

    text = (
        'warehouse = "wh"\nduckdb = "f.duckdb"\n[impressions]\nformat = "contract"\npath = "d/{ds}.csv"\n'
        f'signals = ["click"]\nattributes = ["g"]\n[envy]\nstart = 2026-01-01\n{user_table}\n'
        f"[quality.severity]\n{severity}\n"
    )
    (tmp_path / "f.toml").write_text(text)
    return load_config(tmp_path / "f.toml")


def test_donor_check_counts_the_unresolved_rows_and_names_donors(tmp_path):
    """swap_donor_group_resolved: unexpected_count = the window's unresolved rows (7), the day's
    (7), the donors (u9 first: most rows); critical when group_envy would be empty, a warning while it has
    rows (they are counted there), as configured when [quality.severity] names it."""
    from fairmon.pipelines.executor.day_checks import donor_group_check

    unresolved = db.query(_con(ROWS), "envy_unresolved_donors", group_attribute="g", attributes=["g"], start=D1, ds=D2)
    r = donor_group_check(_cfg(tmp_path), D2, unresolved)
    assert not r.success and r.failed_critical == ["swap_donor_group_resolved"]
    published = donor_group_check(_cfg(tmp_path), D2, unresolved, group_rows=4)
    assert published.success and published.failed_warning == ["swap_donor_group_resolved"]
    strict = donor_group_check(_cfg(tmp_path, 'swap_donor_group_resolved = "critical"'), D2, unresolved, group_rows=4)
    assert not strict.success
    f = r.failures[0]
    assert (f["unexpected_count"], f["n_day"], f["n_donors"], f["sample"]) == (7, 7, 2, ["u9", "u8"])
    assert "swap_donor_group_resolved (7 unexpected: ['u9', 'u8'])" in r.summary()
    warn = donor_group_check(_cfg(tmp_path, 'swap_donor_group_resolved = "warning"'), D2, unresolved)
    assert warn.success and warn.failed_warning == ["swap_donor_group_resolved"]
    ok = donor_group_check(_cfg(tmp_path), D2, unresolved.clear())
    assert ok.success and ok.failures == [] and ok.n_expectations == 1


def test_user_table_is_read_long_and_bad_tables_are_named(tmp_path):
    from fairmon.pipelines.ingest.adapters import envy_user_attributes
    from fairmon.transforms.contract import InputContractError

    cfg = _cfg(tmp_path, user_table='user_table = "u.csv"')
    (tmp_path / "u.csv").write_text("user_id,g,other\nu1,a,x\nu2,,y\n")
    got = envy_user_attributes(cfg).sort("user_id")
    assert got.to_dicts() == [
        {"user_id": "u1", "attribute": "g", "grp": "a"},
        {"user_id": "u2", "attribute": "g", "grp": "(missing)"},
    ]
    (tmp_path / "u.csv").write_text("user_id,g\nu1,a\nu2,b\nu1,b\n")
    with pytest.raises(InputContractError, match="column 'user_id', row 3: user_id repeated"):
        envy_user_attributes(cfg)
    (tmp_path / "u.csv").write_text("id,g\nu1,a\n")
    with pytest.raises(InputContractError, match="no column user_id"):
        envy_user_attributes(cfg)


@pytest.mark.slow
def test_run_resolves_a_donor_from_another_day_and_quarantines_an_unknown_one(tmp_path):
    """End to end on the envious simulator (fairmon simulate-envy, 2 days): on day 2 the donor
    with the most swap rows has no row of its own (its own default and swap rows removed) and
    still counts in its group from day 1; then 7 swap rows name a donor `ghost` known nowhere:
    the day publishes (group_envy has rows; the check is a warning naming 7 rows and `ghost`, and
    group_envy's donor_rows_left_out says 7); an [envy] user_table naming ghost's group counts
    them again (donor_rows_left_out 0), and no `(missing)` donor group appears."""
    import json

    from typer.testing import CliRunner

    from fairmon.pipelines.core.config import load_config
    from fairmon.pipelines.faces.cli import app
    from fairmon.pipelines.storage.warehouse import read_table

    folder = tmp_path / "sim"
    res = CliRunner().invoke(app, ["simulate-envy", "--out", str(folder), "--scenario", "envious", "--days", "2"])
    assert res.exit_code == 0, res.output
    config = folder / "fairmon.toml"
    path = folder / "logs" / f"{D2}.parquet"
    rows = pl.read_parquet(path)
    donor = rows.filter(pl.col("traffic") == "swap")["policy_user_id"].value_counts(sort=True)["policy_user_id"][0]
    group = rows.filter(pl.col("user_id") == donor)["user_group"][0]
    own = pl.col("user_id").eq(donor) & pl.col("traffic").is_in(["default", "swap"])
    rows = rows.filter(~own)
    served = rows.filter(pl.col("policy_user_id") == donor)
    assert served.height > 0 and rows.filter(own).height == 0
    rows.write_parquet(path)

    def run() -> tuple[int, str]:
        r = CliRunner().invoke(app, ["run", "-c", str(config), "--date", str(D2), "--no-prefect"])
        return r.exit_code, r.output

    code, out = run()
    assert code == 0, out
    wh = load_config(config).warehouse_path
    ge = read_table(wh, "group_envy").filter(pl.col("ds") == D2)
    assert set(ge["donor_group"]) == {"0", "1"}
    counts = served.group_by("user_group").len()
    cross = {r["user_group"]: r["len"] for r in counts.iter_rows(named=True)}
    same_or_cross = ge.filter(pl.col("donor_group") == group)
    # every (g, group-of-donor) cell holds at least the donor's swap rows of target group g
    for r in same_or_cross.iter_rows(named=True):
        assert r["n_same" if r["group"] == group else "n_cross"] >= cross.get(r["group"], 0)

    swap = rows.with_row_index().filter(pl.col("traffic") == "swap")["index"][:7]
    ghost = pl.int_range(pl.len()).is_in(swap.implode())
    rows = rows.with_columns(
        pl.when(ghost).then(pl.lit("ghost")).otherwise(pl.col("policy_user_id")).alias("policy_user_id")
    )
    rows.write_parquet(path)
    code, out = run()
    assert code == 0, out
    dq = read_table(wh, "dq_results").filter((pl.col("ds") == D2) & (pl.col("suite") == "envy_donors"))
    row = dq.sort("run_id").row(-1, named=True)
    assert row["success"] and row["failed_warning"] == "swap_donor_group_resolved"
    (f,) = json.loads(row["details"])
    assert (f["unexpected_count"], f["n_day"], f["sample"]) == (7, 7, ["ghost"])
    ge = read_table(wh, "group_envy").filter(pl.col("ds") == D2)
    assert set(ge["donor_rows_left_out"]) == {7} and read_table(wh, "envy_user").filter(pl.col("ds") == D2).height

    (folder / "users.csv").write_text("user_id,user_group\nghost,1\n")
    config.write_text(config.read_text() + 'user_table = "users.csv"\n')
    code, out = run()
    assert code == 0, out
    ge = read_table(wh, "group_envy").filter(pl.col("ds") == D2)
    assert set(ge["donor_group"]) == {"0", "1"} and set(ge["donor_rows_left_out"]) == {0}


def test_both_queries_take_the_donor_resolution_from_one_file():
    """sql/envy_group_counts.sql and sql/envy_unresolved_donors.sql include the text of
    sql/envy_resolved_rows.sql (``{{include …}}``, expanded by db.sql_text), so the rows the
    donor check reports are exactly the swap rows group envy leaves out: on ROWS, the fragment's
    unresolved swap rows are u9's 6 and u8's 1, and the resolved ones are u2's 3, the policy_group
    row's 2 and u3's own 7 (3 + 2 + 7 = the swap cells of the first test)."""
    fragment = db.sql_text("envy_resolved_rows").rstrip()
    for name in ("envy_group_counts", "envy_unresolved_donors"):
        text = db.sql_text(name)
        assert fragment in text and "{{" not in text
    rows = db.query(_con(ROWS), "envy_resolved_rows", group_attribute="g", start=D1, ds=D2)
    swap = rows.filter(pl.col("is_swap"))
    assert sorted(swap.filter(pl.col("resolved_group").is_null()).get_column("n").to_list()) == [1, 6]
    assert sorted(swap.filter(pl.col("resolved_group").is_not_null()).get_column("n").to_list()) == [2, 3, 7]


def test_an_include_cycle_is_an_error_naming_the_chain(tmp_path, monkeypatch):
    """A file that includes itself through another raises ValueError naming the chain."""
    (tmp_path / "cyc_a.sql").write_text("SELECT * FROM ({{include cyc_b}})")
    (tmp_path / "cyc_b.sql").write_text("SELECT * FROM ({{ include cyc_a }})")
    monkeypatch.setattr(db, "sql_file", lambda name: tmp_path / f"{name}.sql")
    db.sql_text.cache_clear()
    try:
        with pytest.raises(ValueError, match="cyc_a -> cyc_b -> cyc_a"):
            db.sql_text("cyc_a")
    finally:
        db.sql_text.cache_clear()


def test_a_donor_seen_only_in_random_traffic_resolves_and_counts_nothing_else():
    """u9 serves u1 on day 2 and has no default or swap row, but a random-traffic row (staged with
    n = 0, group b): its 6 swap rows count in (a, b); the random row adds no row to any cell, no
    own-policy arm to envy_user_counts and no target."""
    rows = ROWS + (
        ", (DATE '2026-01-01', 'f', 'u9', NULL, NULL, 0, 0, 'b'), (DATE '2026-01-02', 'f', 'u7', NULL, NULL, 0, 0, 'a')"
    )
    before, after = _cells(_con(ROWS)), _cells(_con(rows))
    assert after[("a", "b", True)] == (before[("a", "b", True)][0] + 6, before[("a", "b", True)][1] + 2)
    assert {k: v for k, v in after.items() if k != ("a", "b", True)} == {
        k: v for k, v in before.items() if k != ("a", "b", True)
    }
    unresolved = db.query(_con(rows), "envy_unresolved_donors", group_attribute="g", attributes=["g"], start=D1, ds=D2)
    assert unresolved["donor_user_id"].to_list() == ["u8"]
    users = db.query(_con(rows), "envy_user_counts", start=D1, ds=D2).sort("user_id", "donor", nulls_last=True)
    assert (
        users.to_dicts()
        == db.query(_con(ROWS), "envy_user_counts", start=D1, ds=D2)
        .sort("user_id", "donor", nulls_last=True)
        .to_dicts()
    )


def test_the_envy_profile_stages_random_rows_as_group_carriers_only(tmp_path):
    """adapters.envy_profile on a contract CSV: default and swap rows count (n, n_pos); a random row
    of u5 is staged with n = 0 and u5's group, no donor."""
    from fairmon.pipelines.ingest.adapters import envy_profile
    from fairmon.pipelines.ingest.identity import IngestUnit

    cfg = _cfg(tmp_path)
    (tmp_path / "d").mkdir()
    f = tmp_path / "d" / f"{D1}.csv"
    f.write_text(
        "ds,traffic,user_id,policy_user_id,click,g\n"
        f"{D1},default,u1,,1,a\n{D1},default,u1,,0,a\n{D1},swap,u1,u5,1,a\n{D1},random,u5,,1,b\n{D1},random,u5,,0,b\n"
    )
    got = envy_profile(cfg, IngestUnit(file=f, ds_start=D1, ds_end=D1, scope="all"))
    rows = {(r["user_id"], r["donor_user_id"], r["attr__g"]): (r["n"], r["n_pos"]) for r in got.iter_rows(named=True)}
    assert rows == {("u1", None, "a"): (2, 1), ("u1", "u5", "a"): (1, 1), ("u5", None, "b"): (0, 0)}
