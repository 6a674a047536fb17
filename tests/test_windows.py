"""Random-traffic windows (DESIGN §2 "Random-traffic windows", "Input identity"; issue 14).

Every expected value here is written out by hand from the files the test
makes (which days, which pools, how many rows), not computed by fairmon:
- rows that carry their own ds count for day ds exactly when
  ds - window + 1 <= row ds <= ds;
- a pool without per-row dates counts as a whole: under ``contained`` when its
  declared range lies inside that window, under ``overlap`` when it meets it;
- group_counts' random window_start/window_end are the span of what was used;
- a day with no admitted random traffic gives NaN and a gate that says why;
- the seed 001 §4.1 regimes scale p.

Staging here bypasses the raw GX suites (the files are clean by
construction): :func:`_stage` parses each file the days need and stages it
as a run would. Only the last test runs flows (slow).
"""

import datetime as dt
import json
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from fairmon.pipelines.checks.suites import DQResult
from fairmon.pipelines.core.config import ConfigError, ImpressionsConfig, load_config
from fairmon.pipelines.executor.day_checks import check_days
from fairmon.pipelines.ingest.adapters import normalize_unit, read_unit, rows_in
from fairmon.pipelines.ingest.identity import unit_key
from fairmon.pipelines.ingest.range_counts import count_batch, count_statements, group_totals
from fairmon.pipelines.ingest.sources import current_inputs, units_for_day
from fairmon.pipelines.ingest.staging import Staged, input_source, replace_units
from fairmon.pipelines.ingest.windows import pool_admitted, random_window_note
from fairmon.pipelines.orchestration.ops import detect_stale
from fairmon.pipelines.simulation.simulated import config_toml, write_simulation
from fairmon.pipelines.storage import db
from fairmon.transforms.contract import InputContractError
from fairmon.transforms.reo.reo_tables import GROUP_COUNTS_SCHEMA, reo_tables
from fairmon.transforms.simulators.impressions import REGIMES, SimulationSpec, regime_spec, truth_tables

D0 = dt.date(2026, 3, 1)


def day(i: int) -> dt.date:
    return D0 + dt.timedelta(days=i)


# --- helpers ------------------------------------------------------------------


def _rows(n: int, n_pos: int) -> pl.DataFrame:
    """``n`` rows, groups alternating "a"/"b", the first ``n_pos`` positive."""
    return pl.DataFrame(
        {"grp": ["a" if i % 2 == 0 else "b" for i in range(n)], "s1": [int(i < n_pos) for i in range(n)]}
    )


def _config(root: Path, impressions: str, window: int, policy: str | None, name: str = "f") -> Path:
    """A config ``<name>.toml`` in ``root`` (warehouse and DuckDB file ``<name>.duckdb`` beside it)."""
    pol = f'pool_policy = "{policy}"\n' if policy else ""
    path = root / f"{name}.toml"
    path.write_text(
        f'warehouse = "wh-{name}"\nduckdb = "{name}.duckdb"\n[impressions]\n{impressions}'
        f'signals = ["s1"]\nattributes = ["grp"]\nrandom_window_days = {window}\n{pol}'
    )
    return path


TIKTOK = 'format = "tiktok"\npath = "default/{ds}.csv"\nrandom_path = "random/random_{start}_{end}.csv"\n'


def _stage(cfg, days: list[dt.date]) -> None:
    """Stage every impressions file any of ``days`` needs (as a run does, minus the raw suite)."""
    src = input_source(cfg, "impressions")
    units = {u.file: u for d in days for u in units_for_day(cfg, d)}
    ok = DQResult("impressions", "impressions_raw", "test", 0, [])
    batch = []
    for u in units.values():
        raw = read_unit(cfg, u)
        batch.append(Staged(u, normalize_unit(cfg, u, raw), rows_in(raw), 0, 0, ok))
    replace_units(cfg, src, batch)


def count_days(cfg, days: list[dt.date]) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """count_batch of ``days`` as three frames with a ds column: group counts, traffic totals, key rows."""
    counted = count_batch(cfg, days)
    dated = [(ds, *parts) for ds, parts in counted.items()]
    return (
        pl.concat([c for _, c, _, _ in dated]),
        pl.concat([t.select(pl.lit(ds, pl.Date).alias("ds"), *t.columns) for ds, _, t, _ in dated]),
        pl.concat([h.frame() for _, _, _, h in dated]),
    )


def _random(counts: pl.DataFrame, ds: dt.date) -> dict:
    """{n, n_pos, window_start, window_end} of the day's random traffic (attribute grp), or {} when none."""
    r = counts.filter((pl.col("ds") == ds) & (pl.col("traffic") == "random") & (pl.col("attribute") == "grp"))
    if r.is_empty():
        return {}
    assert r.get_column("window_start").n_unique() == 1 and r.get_column("window_end").n_unique() == 1
    return {
        "n": int(r.get_column("n").sum()),
        "n_pos": int(r.get_column("n_pos").sum()),
        "window_start": r.get_column("window_start")[0],
        "window_end": r.get_column("window_end")[0],
    }


def _record_run(cfg, run_id: str, ds: dt.date) -> None:
    """A run of day ``ds`` recorded with the inputs the day needs now (as the daily flow records them)."""
    with db.connect(cfg.duckdb_path) as con:
        db.execute(con, "runs_create")
        db.execute(con, "runs_migrate")
        db.execute(
            con,
            "runs_start",
            run_id=run_id,
            ds=ds,
            started_at=dt.datetime(2026, 3, 10),
            config_path="",
            config_fp=cfg.fingerprint(),
            params="{}",
            inputs=json.dumps(current_inputs(cfg, ds), default=str),
        )


def _random_files(units) -> list[str]:
    return sorted(u.file.name for u in units if u.scope == "random")


# --- rows with their own ds: contract format, window exact --------------------

# contract layout: in/<day>/default.csv and in/<day>/random.csv, every row dated its day.
# Random rows per day: 10·(i+1) for day index i (positives: i+1), so every window has its own sum.
CONTRACT_DAYS = range(0, 9)
W_CONTRACT = 3


@pytest.fixture()
def contract(tmp_path):
    for i in CONTRACT_DAYS:
        folder = tmp_path / "in" / str(day(i))
        folder.mkdir(parents=True)
        for traffic, n, n_pos in (("default", 40, 20), ("random", 10 * (i + 1), i + 1)):
            _rows(n, n_pos).with_columns(pl.lit(str(day(i))).alias("ds"), pl.lit(traffic).alias("traffic")).write_csv(
                folder / f"{traffic}.csv"
            )
    return load_config(_config(tmp_path, 'format = "contract"\npath = "in/{ds}/*.csv"\n', W_CONTRACT, None))


def test_contract_rows_are_windowed_by_their_own_ds_exactly(contract):
    cfg = contract
    D = day(5)  # window: day(3), day(4), day(5)
    files = sorted(unit_key(cfg, u.file) for u in units_for_day(cfg, D))
    assert files == sorted(f"in/{day(i)}/{t}.csv" for i in (3, 4, 5) for t in ("default", "random"))
    assert [i["file"] for i in current_inputs(cfg, D)] == files
    # stage the days around it too: day(6)'s rows (ds + 1) and day(2)'s (ds - window) are in the staging table
    _stage(cfg, [day(4), D, day(6)])
    counts, totals, _ = count_days(cfg, [D])
    # 40 + 50 + 60 random rows (days 3, 4, 5), 4 + 5 + 6 positives; day 6 (70) and day 2 (30) never count
    assert _random(counts, D) == {"n": 150, "n_pos": 15, "window_start": day(3), "window_end": D}
    assert totals.filter(pl.col("traffic") == "random").get_column("n").to_list() == [150]
    rec = counts.filter((pl.col("traffic") == "default") & (pl.col("attribute") == "grp"))
    assert rec.get_column("n").sum() == 40 and set(rec.get_column("window_end")) == {D}


def test_contract_window_rule_holds_in_sql_even_for_files_registered_for_the_day(contract):
    # sql/group_counts.sql on its own: every staged file (days 2..6) registered for D,
    # as if identity had let them through: rows dated D+1 or D-window still do not count.
    cfg, D = contract, day(5)
    _stage(cfg, [day(4), D, day(6)])
    with db.connect(cfg.duckdb_path) as con:
        files = con.sql("SELECT DISTINCT src_file FROM impressions").pl().get_column("src_file").to_list()
        assert len(files) == 10  # days 2..6, default + random
        con.register("day_files", pl.DataFrame({"day": [D] * len(files), "file": files}))
        for policy in ("contained", "overlap"):
            counts = group_totals(*count_statements(con, 128, W_CONTRACT, policy))
            assert _random(counts, D) == {"n": 150, "n_pos": 15, "window_start": day(3), "window_end": D}
        con.unregister("day_files")


def test_contract_file_cannot_carry_a_row_of_another_day(contract):
    cfg, D = contract, day(5)
    f = cfg.resolve(f"in/{D}/random.csv")
    rows = pl.read_csv(f, infer_schema=False)
    rows.with_columns(
        pl.when(pl.int_range(pl.len()) == 3).then(pl.lit(str(day(6)))).otherwise("ds").alias("ds")
    ).write_csv(f)
    unit = next(u for u in units_for_day(cfg, D) if u.file == f)
    with pytest.raises(InputContractError, match=rf"row dated {day(6)} in a file for {D}"):
        normalize_unit(cfg, unit, read_unit(cfg, unit))


def _dated(f: Path, value: str) -> None:
    """Rewrite the fourth row's ds of CSV file ``f`` to ``value``."""
    rows = pl.read_csv(f, infer_schema=False)
    rows.with_columns(pl.when(pl.int_range(pl.len()) == 3).then(pl.lit(value)).otherwise("ds").alias("ds")).write_csv(f)


def test_a_row_of_another_day_quarantines_the_day_at_pre_flight_naming_file_row_and_value(contract):
    """What normalize_unit refuses (above) is found by the pre-flight value scan first, so the day is
    quarantined with the reason named rather than failing at ingest; a ds that is no day of the calendar is
    the suite's ds_is_a_real_day alone, not reported twice."""
    from fairmon.pipelines.ingest.preflight_values import value_findings

    cfg, D = contract, day(5)
    f = cfg.resolve(f"in/{D}/default.csv")
    _dated(f, str(day(6)))
    (finding,) = value_findings(cfg, [D])[D]
    assert finding.check == "ds_in_files_days" and finding.file == f"in/{D}/default.csv"
    assert finding.message == (
        f"in/{D}/default.csv: column 'ds', row 4: '{day(6)}' (1 row(s) fail ds_in_files_days); accepted: {D}"
    )
    _dated(f, "2026-02-30")
    assert [x.check for x in value_findings(cfg, [D])[D]] == ["ds_is_a_real_day"]
    _dated(f, str(D))
    assert value_findings(cfg, [D]) == {}


@pytest.mark.parametrize("zone, hour", [("UTC", 0), ("America/New_York", 19), ("Asia/Tokyo", 0)])
def test_a_zoned_day_passes_the_pre_flight_only_at_midnight_utc_and_its_refusal_says_why(tmp_path, zone, hour):
    """A Parquet ds typed as a timestamp with a time zone: a UTC midnight (also written in New York's zone)
    passes the value scan; Tokyo's midnight (15:00 UTC the day before) is refused naming the file, row and
    instant, and why (parse_date and the gate read such a day only at midnight UTC)."""
    from fairmon.pipelines.ingest.preflight_values import value_findings

    D = day(5)
    (tmp_path / "in").mkdir()
    stamp = dt.datetime.combine(D - dt.timedelta(days=hour > 12), dt.time(hour))
    for traffic in ("default", "random"):
        _rows(40, 20).with_columns(
            pl.lit(stamp).dt.replace_time_zone(zone).alias("ds"), pl.lit(traffic).alias("traffic")
        ).write_parquet(tmp_path / "in" / f"{D}-{traffic}.parquet")
    cfg = load_config(_config(tmp_path, 'format = "contract"\npath = "in/{ds}-*.parquet"\n', 1, None))
    found = value_findings(cfg, [D])
    if zone != "Asia/Tokyo":
        assert found == {}
        return
    own = [f for f in found[D] if f.file == f"in/{D}-default.parquet"]
    assert [f.check for f in own] == ["ds_is_date", "ds_is_a_real_day"]
    assert own[0].message == (
        f"in/{D}-default.parquet: column 'ds', row 1: '{day(4)} 15:00:00 UTC' (40 row(s) fail ds_is_date); "
        "a timestamp with a time zone is a day only at midnight UTC: write ds as a DATE or 'YYYY-MM-DD'"
    )


def test_a_zoned_day_of_another_day_or_a_null_is_named_without_the_zones_note(tmp_path):
    """The note on zoned instants goes only with ds_is_date / ds_is_a_real_day of an instant shown in UTC:
    a UTC midnight of another day fails ds_in_files_days as a day (its text, whatever DuckDB's session zone
    labels it with), a null fails ds_not_null, neither with the note. The gate's own failures get the same
    note (explain_raw), from the values it quotes."""
    from fairmon.pipelines.checks.suites import DQResult
    from fairmon.pipelines.checks.value_checks import shown_as_checked
    from fairmon.pipelines.ingest.preflight import explain_raw
    from fairmon.pipelines.ingest.preflight_values import value_findings
    from fairmon.transforms.contract_values import ZONED_DAY
    from fairmon.transforms.gate_frames import raw_check_frame

    D = day(5)
    (tmp_path / "in").mkdir()
    ds = [dt.datetime.combine(day(4), dt.time(0))] * 39 + [None]
    for traffic in ("default", "random"):
        _rows(40, 20).with_columns(
            pl.Series("ds", ds).dt.replace_time_zone("UTC"), pl.lit(traffic).alias("traffic")
        ).write_parquet(tmp_path / "in" / f"{D}-{traffic}.parquet")
    cfg = load_config(_config(tmp_path, 'format = "contract"\npath = "in/{ds}-*.parquet"\n', 1, None))
    own = [f.message for f in value_findings(cfg, [D])[D] if f.file == f"in/{D}-default.parquet"]
    assert own == [
        f"in/{D}-default.parquet: column 'ds', row 40: '(empty)' (1 row(s) fail ds_not_null)",
        f"in/{D}-default.parquet: column 'ds', row 1: '{day(4)}' (39 row(s) fail ds_in_files_days); accepted: {D}",
    ]
    # as DuckDB hands the instants over on a machine in Los Angeles: shown as the checks see them
    raw = pl.DataFrame({"ds": pl.Series(ds).dt.replace_time_zone("UTC").dt.convert_time_zone("America/Los_Angeles")})
    assert shown_as_checked(raw, raw_check_frame(raw, ["ds"]))["ds"][0] == str(day(4))
    failures = [
        {"name": "ds_is_date", "severity": "critical", "sample": [f"{day(4)} 15:00:00 UTC"]},
        {"name": "ds_is_date", "severity": "critical", "sample": ["2026/03/05"]},
    ]
    explained = explain_raw(
        cfg,
        "impressions",
        tmp_path / "in" / f"{D}-default.parquet",
        DQResult("impressions", "impressions_raw", "f", 30, failures),
    )
    assert [f.get("note") for f in explained.failures] == [ZONED_DAY, None]


def test_a_row_of_another_day_quarantines_each_day_that_reads_the_file_in_a_multi_day_run(contract):
    """In a run of several days the pre-flight only warns: the gate's raw check quarantines the days that
    read the file (its own day and the days whose random window holds it), and the others publish."""
    from fairmon.pipelines.executor.days import run_days

    cfg, D = contract, day(5)
    _dated(cfg.resolve(f"in/{D}/random.csv"), str(day(6)))
    results = {r["ds"]: r for r in run_days(cfg, [day(4), D, day(6)])}
    assert results[day(4)]["status"] == "published", results[day(4)].get("error")
    for d in (D, day(6)):  # day 6's window (days 4..6) reads day 5's random file
        assert results[d]["status"] == "quarantined", results[d]
        assert "ds_in_files_days" in results[d]["error"] and f"in/{D}/random.csv" in results[d]["error"]


# --- a pool whose rows carry their own ds (TikTok layout) ----------------------


def test_pool_with_per_row_dates_counts_only_rows_of_the_window(tmp_path):
    # random_<day 2>_<day 7>.csv: rows dated day 2..7, 100·(i-1) rows on day i, i positives
    (tmp_path / "default").mkdir()
    (tmp_path / "random").mkdir()
    parts = [_rows(100 * (i - 1), i).with_columns(pl.lit(str(day(i))).alias("ds")) for i in range(2, 8)]
    pl.concat(parts).write_csv(tmp_path / "random" / f"random_{day(2)}_{day(7)}.csv")
    D = day(5)
    _rows(40, 10).write_csv(tmp_path / "default" / f"{D}.csv")
    cfg = load_config(_config(tmp_path, TIKTOK, 3, "overlap"))
    _stage(cfg, [D])
    counts, _, _ = count_days(cfg, [D])
    # window day 3..5: 200 + 300 + 400 rows, 3 + 4 + 5 positives; rows of day 6, 7 (after ds) and day 2 do not count;
    # the span is that of the rows used, not the pool's declared range
    assert _random(counts, D) == {"n": 900, "n_pos": 12, "window_start": day(3), "window_end": D}
    # contained decides on the declared range (a file is admitted before it is read): this pool is not inside
    cfg_c = load_config(_config(tmp_path, TIKTOK, 3, "contained"))
    assert _random_files(units_for_day(cfg_c, D)) == []
    assert _random(count_days(cfg_c, [D])[0], D) == {}


# --- pools without per-row dates: contained vs overlap -------------------------

# Three pools (TikTok layout, no per-row dates), window 4 days:
#   P1 = day 0..2 (100 rows, 10 positives), P2 = day 3..5 (200 rows, 20), P3 = day 4..8 (400 rows, 40).
POOLS = {"P1": (0, 2, 100, 10), "P2": (3, 5, 200, 20), "P3": (4, 8, 400, 40)}
W_POOLS = 4
# day index -> pools used, worked out by hand from the window [day - 3, day]:
#   day 0 [-3, 0]: meets P1, contains none      day 5 [2, 5]: meets P1 P2 P3, contains P2
#   day 1 [-2, 1]: meets P1, contains none      day 6 [3, 6]: meets P2 P3, contains P2
#   day 2 [-1, 2]: meets P1, contains P1        day 7 [4, 7]: meets P2 P3, contains none
#   day 3 [0, 3]:  meets P1 P2, contains P1     day 8 [5, 8]: meets P2 P3, contains none
#   day 4 [1, 4]:  meets P1 P2 P3, contains none
OVERLAP = {0: "P1", 1: "P1", 2: "P1", 3: "P1 P2", 4: "P1 P2 P3", 5: "P1 P2 P3", 6: "P2 P3", 7: "P2 P3", 8: "P2 P3"}
CONTAINED = {0: "", 1: "", 2: "P1", 3: "P1", 4: "", 5: "P2", 6: "P2", 7: "", 8: ""}


def _pool_file(name: str) -> str:
    a, b, *_ = POOLS[name]
    return f"random_{day(a)}_{day(b)}.csv"


@pytest.fixture()
def pools(tmp_path):
    (tmp_path / "default").mkdir()
    (tmp_path / "random").mkdir()
    for i in range(9):
        _rows(60, 30).write_csv(tmp_path / "default" / f"{day(i)}.csv")
    for name, (_, _, n, n_pos) in POOLS.items():
        _rows(n, n_pos).write_csv(tmp_path / "random" / _pool_file(name))
    return {p: load_config(_config(tmp_path, TIKTOK, W_POOLS, p, name=p)) for p in ("contained", "overlap")}


def test_pool_admission_rule():
    D = day(6)  # window day 3..6
    assert pool_admitted(day(3), day(6), D, 4, "contained") and pool_admitted(day(3), day(6), D, 4, "overlap")
    assert not pool_admitted(day(2), day(6), D, 4, "contained") and pool_admitted(day(2), day(6), D, 4, "overlap")
    assert not pool_admitted(day(3), day(7), D, 4, "contained") and pool_admitted(day(3), day(7), D, 4, "overlap")
    assert not pool_admitted(day(7), day(9), D, 4, "overlap")  # starts after ds
    assert not pool_admitted(day(0), day(2), D, 4, "overlap")  # ends before the window
    with pytest.raises(ValueError, match="pool_policy"):
        pool_admitted(day(3), day(6), D, 4, "any")


@pytest.mark.parametrize("policy,expected", [("contained", CONTAINED), ("overlap", OVERLAP)])
@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_each_day_uses_the_pools_its_policy_admits(pools, policy, expected):
    cfg = pools[policy]
    days = [day(i) for i in range(9)]
    for i, d in enumerate(days):
        want = sorted(_pool_file(p) for p in expected[i].split())
        assert _random_files(units_for_day(cfg, d)) == want, d
        # what a run records as its inputs (and late-data detection compares) follows the policy
        recorded = [r["file"] for r in current_inputs(cfg, d)]
        assert recorded == sorted([f"default/{d}.csv", *(f"random/{f}" for f in want)]), d
    _stage(cfg, days)
    counts, totals, _ = count_days(cfg, days)  # a backfill counts the range in one statement
    for i, d in enumerate(days):
        used = expected[i].split()
        got = _random(counts, d)
        if not used:
            assert got == {}, d
            continue
        assert got == {
            "n": sum(POOLS[p][2] for p in used),
            "n_pos": sum(POOLS[p][3] for p in used),
            "window_start": day(min(POOLS[p][0] for p in used)),  # the used pools' declared ranges
            "window_end": day(max(POOLS[p][1] for p in used)),
        }, d
        tot = totals.filter((pl.col("ds") == d) & (pl.col("traffic") == "random")).get_column("n").to_list()
        assert tot == [got["n"]], d
    if policy == "contained":  # never a random row from after the day
        rand = counts.filter(pl.col("traffic") == "random")
        assert (rand.get_column("window_end") <= rand.get_column("ds")).all()
        assert (rand.get_column("window_start") >= rand.get_column("ds") - dt.timedelta(days=W_POOLS - 1)).all()
    else:  # look-ahead is visible: day 4's pools reach day 8
        assert _random(counts, day(4))["window_end"] == day(8)


@pytest.mark.parametrize("policy", ["contained", "overlap"])
@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_a_range_counted_in_chunks_gives_each_day_its_own_counts(pools, policy, monkeypatch):
    """count_batch counts a pool once for the days that share it, chunk after chunk (a share
    counted in one chunk serves the days of later chunks): each day's held counts, totals and
    key rows are those of the day counted alone, whatever the chunks, and whether the batch holds
    them as frames or packed (a held-frames budget of 0 packs every one)."""
    from fairmon.pipelines.ingest import range_counts

    cfg, days = pools[policy], [day(i) for i in range(9)]
    _stage(cfg, days)
    alone = {d: count_days(cfg, [d]) for d in days}
    held_as = {1: 0, 10: 10**9, 10**9: 0}  # key rows packed, held as frames, packed
    for budget in (1, 10, 10**9):  # a day a chunk; 1-2 days (shares span chunks); one chunk
        monkeypatch.setattr(range_counts, "COUNT_ROWS_BUDGET", budget)
        monkeypatch.setattr(range_counts, "HELD_FRAMES_BUDGET", held_as[budget])
        counted = range_counts.count_batch(cfg, days)
        for d in days:
            counts, totals, held = counted[d]
            want_counts, want_totals, want_keys = alone[d]
            assert counts.equals(want_counts) and totals.equals(want_totals.drop("ds")), (budget, d)
            assert held.frame().sort(want_keys.columns).equals(want_keys.sort(want_keys.columns)), (budget, d)


@pytest.mark.parametrize(("policy", "rows"), [("overlap", 100 + 200 + 400), ("contained", 100 + 200)])
def test_a_range_counts_each_random_pool_once(pools, policy, rows, monkeypatch):
    """count_batch counts a pool's rows once for the range, however many days' windows hold it:
    the random rows its statements count are those of the pools some day uses (OVERLAP: all three,
    700 rows; CONTAINED: P1 and P2, 300), not a pool again for each set of pools a day uses
    (overlap: 100 + 300 + 700 + 600 = 1,700)."""
    from fairmon.pipelines.ingest import range_counts

    cfg, days = pools[policy], [day(i) for i in range(9)]
    _stage(cfg, days)
    counted = []
    real = range_counts.pooled_rows

    def spy(con, shares, buckets):
        counted.append(out := real(con, shares, buckets))
        return out

    monkeypatch.setattr(range_counts, "pooled_rows", spy)
    range_counts.count_batch(cfg, days)
    assert sum(int(f.get_column("n").sum()) for f in counted) == rows


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_the_sql_applies_the_policy_too(pools):
    # every staged pool registered for day 6 (window day 3..6): contained still takes only P2,
    # overlap P2 and P3 (P1 ends on day 2)
    cfg = pools["overlap"]
    _stage(cfg, [day(i) for i in range(9)])
    D = day(6)
    with db.connect(cfg.duckdb_path) as con:
        files = con.sql("SELECT DISTINCT src_file FROM impressions").pl().get_column("src_file").to_list()
        con.register("day_files", pl.DataFrame({"day": [D] * len(files), "file": files}))
        contained = _random(group_totals(*count_statements(con, 128, W_POOLS, "contained")), D)
        overlap = _random(group_totals(*count_statements(con, 128, W_POOLS, "overlap")), D)
        con.unregister("day_files")
    assert contained == {"n": 200, "n_pos": 20, "window_start": day(3), "window_end": day(5)}
    assert overlap == {"n": 600, "n_pos": 60, "window_start": day(3), "window_end": day(8)}


def test_a_late_pool_makes_a_day_stale_only_if_its_policy_admits_it(pools, tmp_path):
    cfg = pools["contained"]
    D = day(3)  # window day 0..3; uses P1
    _record_run(cfg, "r1", D)
    late_overlapping = tmp_path / "random" / f"random_{day(3)}_{day(4)}.csv"  # meets the window, not inside
    _rows(10, 1).write_csv(late_overlapping)
    assert detect_stale(cfg).is_empty()
    assert detect_stale(pools["overlap"]).is_empty()  # its own DuckDB file: no run of day 3 there
    _record_run(pools["overlap"], "r2", D)  # uses P1, P2
    _rows(10, 1).write_csv(late_overlapping.with_name(f"random_{day(2)}_{day(4)}.csv"))
    assert detect_stale(pools["overlap"]).get_column("file").to_list() == [f"random/random_{day(2)}_{day(4)}.csv"]
    late_inside = tmp_path / "random" / f"random_{day(1)}_{day(3)}.csv"
    _rows(10, 1).write_csv(late_inside)
    assert detect_stale(cfg).get_column("file").to_list() == [f"random/{late_inside.name}"]


# --- a day with no admitted pool ------------------------------------------------


def test_no_contained_pool_gives_nan_and_a_gate_that_names_the_policy(pools):
    cfg = pools["contained"]
    D = day(4)  # window day 1..4 meets P1, P2 and P3, contains none
    _stage(cfg, [D])
    counts, _, _ = count_days(cfg, [D])
    counts = counts.cast(GROUP_COUNTS_SCHEMA)
    assert set(counts.get_column("traffic")) == {"default"}
    _, reo = reo_tables(counts, D)
    row = reo.row(0, named=True)
    assert math.isnan(row["reo"]) and row["n_rand"] == 0
    assert "no random traffic in the window" in row["reason"]
    assert row["rand_window_start"] is None and row["rand_window_end"] is None

    note = random_window_note(cfg, D)
    assert f"window {day(1)}..{D}" in note and 'pool_policy = "contained"' in note
    for p in ("P1", "P2", "P3"):
        a, b, *_ = POOLS[p]
        assert f"random/{_pool_file(p)} ({day(a)}..{day(b)})" in note
    assert 'pool_policy = "overlap"' in note and "random_window_days" in note

    # the day's gate: random_traffic_present fails and says why
    dq = check_days(cfg, {D: counts})[D]
    assert dq.failed_critical == ["random_traffic_present"]
    assert 'pool_policy = "contained"' in dq.summary() and _pool_file("P1") in dq.summary()
    (failure,) = json.loads(dq.row(D)["details"])  # dq_results keeps the reason
    assert failure["note"] == note


def test_note_without_any_overlapping_pool(pools):
    cfg = pools["contained"]
    D = day(20)  # no pool near
    assert _random_files(units_for_day(cfg, D)) == []
    assert random_window_note(cfg, D).endswith("no pooled random file overlaps it")


# --- config ---------------------------------------------------------------------


def test_pool_policy_config(tmp_path):
    field = ImpressionsConfig.model_fields["pool_policy"]
    assert field.default == "contained" and "contained" in field.description and "overlap" in field.description
    assert load_config(_config(tmp_path, TIKTOK, 7, None)).impressions.pool_policy == "contained"
    with pytest.raises(ConfigError, match="impressions.pool_policy"):
        load_config(_config(tmp_path, TIKTOK, 7, "partial"))
    # the policy picks staged files, it does not change them: switching it re-stages nothing
    a = load_config(_config(tmp_path, TIKTOK, 7, "contained")).fingerprint()
    assert load_config(_config(tmp_path, TIKTOK, 7, "overlap")).fingerprint() == a


def test_simulator_config_uses_overlap(tmp_path):
    spec = SimulationSpec(start=D0, days=2, rows_per_day=200, random_rows_per_day=100, random_pool_days=7)
    cfg = load_config(write_simulation(spec, tmp_path / "sim")["config"])
    assert cfg.impressions.pool_policy == "overlap"
    assert 'pool_policy = "contained"' in config_toml(tmp_path, "csv", 7, pool_policy="contained")
    with pytest.raises(ValueError, match="pool_policy"):
        config_toml(tmp_path, "csv", 7, pool_policy="any")


# --- seed 001 §4.1 regimes -----------------------------------------------------


def test_regimes_scale_p_as_the_paper_does():
    # DESIGN §5: p = (0.01, 0.05), (0.001, 0.005), (0.0001, 0.0005); q = (10 p1, 5 p2);
    # complements p~1 = 0.25 (1 - p1 - p2), p~2 = 0.75 (1 - p1 - p2), the same for q~.
    paper = {"dense": (0.01, 0.05), "sparse": (0.001, 0.005), "very_sparse": (0.0001, 0.0005)}
    assert {k: v["p"] for k, v in REGIMES.items()} == paper
    for regime, (p1, p2) in paper.items():
        spec = regime_spec(regime, rows_per_day=10_000, days=1)
        q1, q2 = 10 * p1, 5 * p2
        Q, P = spec.true_QP("all")
        assert P == pytest.approx([p1, p2], rel=1e-12) and Q == pytest.approx([q1, q2], rel=1e-12)
        rand_neg = [s * (1 - r) for s, r in zip(spec.rand_share, spec.rand_rate)]
        rec_neg = [s * (1 - r) for s, r in zip(spec.rec_share, spec.rec_rate)]
        assert rand_neg == pytest.approx([0.25 * (1 - p1 - p2), 0.75 * (1 - p1 - p2)], rel=1e-12)
        assert rec_neg == pytest.approx([0.25 * (1 - q1 - q2), 0.75 * (1 - q1 - q2)], rel=1e-12)
        assert spec.random_rows_per_day == spec.rows_per_day == 10_000  # one n for both, as in the paper
        # truth: U = (10, 5), mean 7.5, population std 2.5 -> REO = 1/3
        _, reo = truth_tables(spec)
        assert reo.get_column("reo").to_list() == pytest.approx([1 / 3], abs=1e-12)
    assert regime_spec("sparse", rows_per_day=1000, random_rows_per_day=300).random_rows_per_day == 300


def test_regime_rows_have_the_regime_p():
    # the simulator's random rows follow the regime: positives of each group ~ Binomial(n, p_k)
    from fairmon.transforms.simulators.impressions import simulate_random_pool

    spec = regime_spec("dense", rows_per_day=200_000, days=1, seed=3)
    rows = simulate_random_pool(spec, spec.start, spec.start)
    y = pl.any_horizontal(pl.exclude("request_id", "item_id", "young_adult").cast(pl.Boolean))
    for k, p in enumerate((0.01, 0.05)):
        got = rows.filter(y & (pl.col("young_adult") == k)).height
        assert abs(got - 200_000 * p) < 4 * np.sqrt(200_000 * p * (1 - p))


# --- end to end (slow): the run does not crash, the gate says why ---------------


def test_runs_follow_the_policy_end_to_end(pools, tmp_path, prefect_harness):
    import duckdb

    from fairmon.pipelines.orchestration.runner import run_days

    cfg = pools["contained"]
    days = [day(i) for i in range(9)]
    results = {r["ds"]: r for r in run_days(cfg, days)}
    for i, d in enumerate(days):
        if CONTAINED[i]:
            assert results[d]["status"] == "published", results[d].get("error")
            row = results[d]["reo"][0]
            assert row["rand_window_end"] <= d and row["n_rand"] == sum(POOLS[p][2] for p in CONTAINED[i].split())
        else:
            assert results[d]["status"] == "quarantined"
            err = results[d]["error"]
            assert "random_traffic_present" in err and 'pool_policy = "contained"' in err, err
    con = duckdb.connect(str(cfg.duckdb_path), read_only=True)
    try:
        runs = con.sql("SELECT ds, inputs, params FROM runs").pl()
    finally:
        con.close()
    for ds, inputs, params in runs.iter_rows():
        files = sorted(i["file"] for i in json.loads(inputs) if i["file"].startswith("random/"))
        assert files == sorted(f"random/{_pool_file(p)}" for p in CONTAINED[(ds - D0).days].split())
        assert json.loads(params)["random_window"] == {"random_window_days": W_POOLS, "pool_policy": "contained"}

    # with random_traffic_present a warning, the day publishes its REO as NaN with the reason
    path = tmp_path / "contained.toml"
    path.write_text(path.read_text() + '[quality.severity]\nrandom_traffic_present = "warning"\n')
    (r,) = run_days(load_config(path), [day(0)])
    assert r["status"] == "published", r.get("error")
    assert math.isnan(r["reo"][0]["reo"]) and "no random traffic in the window" in r["reo"][0]["reason"]
    (gate,) = [d for d in r["dq"] if d["suite"] == "impressions_day"]
    assert gate["failed_warning"] == "random_traffic_present"
    assert 'pool_policy = "contained"' in json.loads(gate["details"])[0]["note"]


def test_plan_counts_random_traffic_per_day_over_the_span_used(pools):
    # day 4 under overlap used P1, P2, P3: 700 random rows over day 0..8 (9 days), not over the 4-day window
    from fairmon.pipelines.privacy.audit_release import plan_from_counts
    from fairmon.pipelines.storage.warehouse import write_partitions

    cfg = pools["overlap"]
    D = day(4)
    _stage(cfg, [D])
    counts, _, _ = count_days(cfg, [D])
    write_partitions(cfg.warehouse_path, D, {"group_counts": counts.cast(GROUP_COUNTS_SCHEMA)})
    plan, _ = plan_from_counts(cfg, D, D, 0.1, 0.05, None)
    assert plan.get_column("n_rand_window").to_list() == [700]
    assert plan.get_column("rand_per_day").to_list() == pytest.approx([700 / 9])


def test_look_ahead_follows_the_random_span():
    """reo.look_ahead is true exactly when the random rows' span ends after ds."""
    from fairmon.transforms.reo.reo_tables import reo_tables

    ds = dt.date(2026, 1, 3)
    rows = []
    for traffic, pos, ws, we in (
        ("default", (300, 200), ds, ds),
        ("random", (200, 200), dt.date(2026, 1, 1), dt.date(2026, 1, 7)),  # a pool ending after ds
    ):
        for g, p in zip("ab", pos):
            rows.append((ds, "impressions", traffic, "all", "s", g, 10_000, p, ws, we))
    cols = ["ds", "source", "traffic", "arm", "attribute", "group", "n", "n_pos", "window_start", "window_end"]
    counts = pl.DataFrame(rows, schema=cols, orient="row")
    _, reo = reo_tables(counts, ds)
    assert reo.get_column("look_ahead").to_list() == [True]
    later = dt.date(2026, 1, 7)
    _, reo7 = reo_tables(counts.with_columns(pl.lit(later).alias("ds")), later)
    assert reo7.get_column("look_ahead").to_list() == [False]


def test_a_backfill_in_batches_publishes_what_one_batch_does(pools, prefect_harness):
    """A long range runs in batches of days (memory follows the batch):
    with batches of 2 days, pools shared by days of different batches are staged
    once and every day publishes the same tables as with the range one batch
    (overlap policy: pools P1..P3 span batches)."""
    from fairmon.pipelines.orchestration.runner import run_days
    from fairmon.pipelines.storage.warehouse import read_table

    cfg = pools["overlap"]
    days = [day(i) for i in range(9)]
    tables = ("group_counts", "reo", "reo_group", "dq_results")

    def published(batch_days: int, seen: list, force: bool) -> dict[str, pl.DataFrame]:
        results = run_days(cfg, days, batch_days=batch_days, on_batch=seen.append, force_ingest=force)
        assert [r["status"] for r in results] == ["published"] * len(days), [r.get("error") for r in results]
        return {t: read_table(cfg.warehouse_path, t).drop("run_id").sort(pl.all()) for t in tables}

    once, chunked = [], []
    parts = published(2, chunked, force=False)  # a fresh project, in batches
    whole = published(31, once, force=True)  # everything again, at once
    assert len(once) == 1 and len(chunked) == 5
    # each file staged once: the 9 days' files and the three pools, some of which serve days of two chunks
    assert sum(p["staged"] for p in chunked) == once[0]["staged"] == 9 + 3
    for t in tables:
        assert parts[t].equals(whole[t]), t


def test_a_new_cluster_bucket_formula_restages_clustered_files_only(tmp_path, monkeypatch):
    """Staged rows carry their cluster bucket (sql/impressions_bucket.sql): when
    the formula changes, a clustered config's fingerprint changes, so every file
    is staged again and no user is split between two formulas' buckets; an
    unclustered config stages no buckets and keeps its fingerprint."""
    from fairmon.pipelines.core import config as config_module

    clustered = load_config(_config(tmp_path, TIKTOK, 7, None))
    path = _config(tmp_path, TIKTOK, 7, None, name="n")
    path.write_text(path.read_text() + '[estimation]\ncluster_by = "none"\n')
    unclustered = load_config(path)
    assert clustered.estimation.cluster_by == "auto" and unclustered.estimation.cluster_by == "none"
    before = clustered.fingerprint(), unclustered.fingerprint()
    monkeypatch.setattr(config_module, "BUCKET_FORMULA", config_module.BUCKET_FORMULA + 1)
    assert clustered.fingerprint() != before[0]
    assert unclustered.fingerprint() == before[1]


def test_a_pool_named_twice_by_the_config_counts_once(tmp_path):
    """A pool matched by random_path and declared again in random_pools is one file the day
    needs: its rows count once in the group counts and in the traffic totals that check them."""
    (tmp_path / "default").mkdir()
    (tmp_path / "random").mkdir()
    for i in range(3):
        _rows(60, 30).write_csv(tmp_path / "default" / f"{day(i)}.csv")
    pool = f"random/random_{day(0)}_{day(2)}.csv"
    _rows(100, 10).write_csv(tmp_path / pool)
    path = _config(tmp_path, TIKTOK, 3, "overlap")
    declared = f'[[impressions.random_pools]]\npath = "{pool}"\nstart = {day(0)}\nend = {day(2)}\n'
    path.write_text(path.read_text() + declared)
    cfg = load_config(path)
    days = [day(i) for i in range(3)]
    _stage(cfg, days)
    counts, totals, _ = count_days(cfg, [day(2)])
    assert _random(counts, day(2)) == {"n": 100, "n_pos": 10, "window_start": day(0), "window_end": day(2)}
    assert totals.filter(pl.col("traffic") == "random").get_column("n").to_list() == [100]


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_a_batch_reads_each_files_summary_once(pools, monkeypatch):
    """file_summaries (the copies and shared-ids checks' per-file signatures and spans): in a
    batch, a file summarised once is not read again, a new batch reads it again, and the rows
    are those of one statement over all the files (a file with no staged row has none, as a
    pool or not)."""
    from fairmon.pipelines.executor.day_checks import pool_keys
    from fairmon.pipelines.ingest import file_summaries as fs

    cfg = pools["overlap"]
    _stage(cfg, [day(i) for i in range(9)])
    with db.connect(cfg.duckdb_path) as con:
        files = [*sorted(con.sql("SELECT DISTINCT src_file FROM impressions").pl().get_column("src_file")), "none.csv"]
    pooled = [p for p in pool_keys(cfg) if p in files]
    assert pooled and len(files) > 4

    def same(a: pl.DataFrame, b: pl.DataFrame) -> bool:
        return a.sort(pl.all()).equals(b.sort(pl.all()))

    with db.connect(cfg.duckdb_path) as con:
        want = {k: db.query(con, f"impressions_file_{k}", files=files, pools=pooled) for k in fs.KINDS}
    reads: list[tuple[str, tuple[str, ...]]] = []
    query = db.query

    def counted(con, name, **params):
        reads.append((name, tuple(params["files"])))
        return query(con, name, **params)

    monkeypatch.setattr(fs.db, "query", counted)
    batch = fs.FileSummaries()
    with db.connect(cfg.duckdb_path) as con:
        for kind in fs.KINDS:
            first = fs.file_summaries(con, kind, files[:3], pooled, batch)
            assert same(first, want[kind].filter(pl.col("file").is_in(files[:3])))
            assert same(fs.file_summaries(con, kind, files, pooled, batch), want[kind])
        assert reads == [(f"impressions_file_{k}", tuple(f)) for k in fs.KINDS for f in (files[:3], files[3:])]
        reads.clear()
        assert same(fs.file_summaries(con, "spans", files, pooled, batch), want["spans"]) and reads == []
        later = fs.FileSummaries()  # the next batch, after its own ingest
        assert same(
            fs.file_summaries(con, "spans", files[:2], pooled, later),
            want["spans"].filter(pl.col("file").is_in(files[:2])),
        )
        assert reads == [("impressions_file_spans", tuple(files[:2]))]
    with pytest.raises(ValueError, match="unknown file summary"):
        fs.file_summaries(None, "rows", files, pooled)
