"""Data-quality gate: suites, severities, quarantine, dq_results and the gated report."""

import datetime as dt
import json
import math
import re
import subprocess
import sys
from html.parser import HTMLParser

import duckdb
import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from fairmon.pipelines.checks.gate import QualityGate
from fairmon.pipelines.checks.suites import DQResult, expand_spec, load_spec
from fairmon.pipelines.faces.cli import app
from fairmon.pipelines.ingest.profiles import profile_rows
from fairmon.pipelines.storage.warehouse import read_table
from fairmon.transforms.gate_frames import day_check_frame, excluded_days, published_days, raw_check_frame
from fairmon.transforms.planning.traffic import random_traffic_required
from fairmon.transforms.reo.ab_tables import reo_ab_table
from fairmon.transforms.reo.check_frames import group_counts_check_frame, reo_ab_check_frame, reo_check_frame
from fairmon.transforms.reo.reo_tables import GROUP_COUNTS_SCHEMA

D0 = dt.date(2026, 4, 1)
RAW_PARAMS = {
    "required_columns": ["ds", "traffic", "arm", "s1", "s2", "grp"],
    "signals": ["s1", "s2"],
    "attributes": ["grp"],
    "traffic_values": ["default", "random"],
}


# --- pure pieces ------------------------------------------------------------------


def test_thm_e1_reference_value():
    # ⌈3 / 0.01 · 0.1⁻² · ln(2/0.05)⌉ = ⌈110,666.3⌉
    assert random_traffic_required(0.01, 0.1, 0.05) == 110_667
    assert random_traffic_required(np.array([0.05, 0.0]), 0.2, 0.1)[0] == math.ceil(3 / 0.05 / 0.04 * math.log(20))
    assert math.isinf(random_traffic_required(np.array([0.0]), 0.1, 0.05)[0])
    with pytest.raises(ValueError):
        random_traffic_required(0.1, 0.1, 1.5)


def test_expand_spec_for_each_requires_params_and_severity():
    spec = load_spec("impressions_raw")
    cols = ["ds", "traffic", "arm", "s1", "s2", "grp"]  # no ids -> no uniqueness check
    entries = expand_spec(spec, RAW_PARAMS, cols, {"attribute_not_null": "critical", "traffic_known": "warning"})
    names = {e["name"]: e for e in entries}
    assert {"signal_not_null[s1]", "signal_is_boolean[s2]", "column_exists[grp]"} <= set(names)
    assert "ids_unique" not in names
    assert names["traffic_known"]["kwargs"]["value_set"] == ["default", "random"]
    assert names["traffic_known"]["severity"] == "warning"
    assert names["attribute_not_null[grp]"]["severity"] == "critical"  # override by name prefix
    with_ids = expand_spec(spec, RAW_PARAMS, cols + ["id_copies"], {})  # profile of a file with ids
    assert "ids_unique" in {e["name"] for e in with_ids}
    with pytest.raises(ValueError, match="severity"):
        expand_spec(spec, RAW_PARAMS, cols, {"has_rows": "fatal"})


def test_every_suite_file_is_well_formed():
    from pathlib import Path

    from fairmon.pipelines.checks.gx_import import import_gx

    gx = import_gx()  # as fairmon imports it (PySpark's Spark Connect hidden: its import may sys.exit)

    from fairmon.resources import suites

    # Every suite the package ships, so a new expectations/*.json is checked without editing this test.
    names = suites()
    folder = Path(__file__).resolve().parent.parent / "expectations"
    assert names and set(names) == {p.stem for p in folder.glob("*.json")}
    entry_keys = {"name", "type", "severity", "kwargs", "for_each", "requires", "note"}
    for name in names:
        spec = load_spec(name)
        assert isinstance(spec, dict) and set(spec) <= {"suite", "table", "description", "expectations"}, name
        assert spec["suite"] == name and isinstance(spec["table"], str) and spec["table"], name
        assert isinstance(spec.get("description", ""), str) and isinstance(spec["expectations"], list), name
        for e in spec["expectations"]:
            where = (name, e.get("name"))
            assert isinstance(e, dict) and set(e) <= entry_keys, (where, set(e) - entry_keys)
            assert isinstance(e["name"], str) and e["name"], where
            assert e["severity"] in ("critical", "warning"), where
            expectation = getattr(gx.expectations, e["type"], None)
            assert expectation is not None, (where, e["type"])
            # kwargs are keyword arguments of that GX expectation (a misspelt one would be dropped or refused)
            unknown = set(e["kwargs"]) - set(expectation.__fields__)
            assert isinstance(e["kwargs"], dict) and not unknown, (where, unknown)
            if "for_each" in e:  # repeated per item of a config list, named per item
                assert isinstance(e["for_each"], str) and "{item}" in e["name"], where
            assert isinstance(e.get("requires", []), list), where
        assert len({e["name"] for e in spec["expectations"]}) == len(spec["expectations"]), name


def test_dq_result_success_ignores_warnings():
    r = DQResult(
        "impressions", "impressions_day", "x", 5, [{"name": "random_traffic_sufficient", "severity": "warning"}]
    )
    assert r.success and r.failed_warning == ["random_traffic_sufficient"]
    r.failures.append(
        {"name": "group_has_positives", "severity": "critical", "unexpected_count": 1, "rows": [2], "sample": [0]}
    )
    assert not r.success
    assert "group_has_positives (1 unexpected, rows 2: [0])" in r.summary()


def _counts(rows):
    return (
        pl.DataFrame(rows, schema=["traffic", "arm", "attribute", "group", "n", "n_pos"], orient="row")
        .with_columns(
            pl.lit(D0).alias("ds"),
            pl.lit("impressions").alias("source"),
            pl.lit(D0).alias("window_start"),
            pl.lit(D0).alias("window_end"),
        )
        .select(list(GROUP_COUNTS_SCHEMA))
        .cast(GROUP_COUNTS_SCHEMA)
    )


def test_day_check_frame_rates_and_sufficiency():
    c = _counts(
        [
            ("default", "all", "g", "a", 100, 30),
            ("default", "all", "g", "(missing)", 10, 0),
            ("random", "all", "g", "a", 400, 100),
            ("random", "all", "g", "b", 600, 50),
        ]
    )
    f = day_check_frame(c, 0.1, 0.05)
    assert "(missing)" not in f.get_column("group").to_list()
    assert f.filter(pl.col("traffic") == "default").get_column("rate").to_list() == [0.3]
    assert f.filter(pl.col("traffic") == "default").get_column("rand_sufficiency").to_list() == [None]
    r = f.filter(pl.col("traffic") == "random").sort("group")
    req = [math.ceil(3 / p * 100 * math.log(40)) for p in (100 / 1000, 50 / 1000)]
    assert r.get_column("rand_required").to_list() == req
    assert r.get_column("rand_sufficiency").to_list() == pytest.approx([1000 / req[0], 1000 / req[1]])


def test_group_counts_check_frame_and_reo_max():
    c = _counts(
        [("default", "all", "g", "a", 60, 3), ("default", "all", "g", "b", 40, 2), ("default", "all", "h", "x", 100, 5)]
    )
    totals = pl.DataFrame({"traffic": ["default"], "arm": ["all"], "n": [100]})
    f = group_counts_check_frame(c, totals)
    assert f.get_column("n_attribute_sum").to_list() == [100, 100, 100]
    assert f.get_column("n_traffic_total").to_list() == [100, 100, 100]
    reo = pl.DataFrame({"K": [2, 5]})
    assert reo_check_frame(reo).get_column("reo_max").to_list() == pytest.approx([1.0, 2.0])


def test_excluded_and_published_days():
    dq = pl.DataFrame(
        {
            "ds": [D0, D0, D0 + dt.timedelta(1)],
            "suite": ["a", "b", "a"],
            "subject": ["f", "t", "f"],
            "success": [True, False, True],
            "failed_critical": ["", "x, y", ""],
        }
    )
    assert published_days(dq) == [D0 + dt.timedelta(1)]
    ex = excluded_days(dq)
    assert ex.to_dicts() == [{"ds": D0, "reasons": "b (t): x, y"}]


# --- GX on frames -------------------------------------------------------------------


@pytest.fixture(scope="module")
def gate(tmp_path_factory):
    return QualityGate(tmp_path_factory.mktemp("gx"))


def _raw(n=6, **over):
    base = {
        "ds": [str(D0)] * n,
        "traffic": ["default", "random"] * (n // 2),
        "arm": ["all"] * n,
        "request_id": [f"r{i}" for i in range(n)],
        "item_id": [f"i{i}" for i in range(n)],
        "s1": [1, 0] * (n // 2),
        "s2": [True, False] * (n // 2),
        "grp": ["a", "b", "a"] * (n // 3),
    }
    base.update(over)
    return pl.DataFrame(base, strict=False)


def _validate_raw(gate, raw):
    """As in production: the gate sees the file's distinct-value profile computed in DuckDB."""
    if raw.width:
        with duckdb.connect() as con:
            raw = profile_rows(
                con, raw.with_row_index("__row"), ["ds", "traffic", "arm", "s1", "s2", "grp"], "fixture.parquet"
            )
    return gate.validate(
        "impressions_raw", raw_check_frame(raw, ["ds", "traffic", "s1", "s2"]), RAW_PARAMS, "fixture.parquet", "t"
    )


def test_clean_raw_frame_passes(gate):
    r = _validate_raw(gate, _raw())
    assert r.success and r.failures == [] and r.n_expectations >= 15


@pytest.mark.parametrize(
    "defect,name",
    [
        (dict(s1=[1, None, 0, 1, 0, 1]), "signal_not_null[s1]"),
        (dict(traffic=["default", "random", "explore", "default", "random", "random"]), "traffic_known"),
        (
            dict(
                request_id=["r0", "r1", "r0", "r3", "r4", "r5"],
                item_id=["i0", "i1", "i0", "i3", "i4", "i5"],
                traffic=["default", "random", "default", "random", "default", "random"],
            ),
            "ids_unique",
        ),
        (dict(s2=["yes", "no", "yes", "no", "yes", "no"]), "signal_is_boolean[s2]"),
        (
            dict(ds=["2026-04-01", "04/01/2026", "2026-04-01", "2026-04-01", "2026-04-01", "2026-04-01"]),
            "ds_is_date,ds_is_a_real_day",
        ),
        # what the input contract refuses, so must the gate: a day not in the calendar, a traffic spelled otherwise
        (
            dict(ds=["2026-04-01", "2026-04-31", "2026-04-01", "2026-04-01", "2026-04-01", "2026-04-01"]),
            "ds_is_a_real_day",
        ),
        (dict(traffic=["default", "random", "Random", "default", "random", "random"]), "traffic_known"),
        (dict(traffic=["default", "random", "default ", "default", "random", "random"]), "traffic_known"),
    ],
)
def test_each_raw_defect_is_caught_by_a_named_expectation(gate, defect, name):
    r = _validate_raw(gate, _raw(**defect))
    assert not r.success
    assert r.failed_critical == name.split(",")


@pytest.mark.parametrize("ds", [D0, dt.datetime(2026, 4, 1, 0, 0), dt.datetime(2026, 4, 1, 13, 30, 5)])
def test_a_day_typed_as_a_date_or_a_timestamp_passes_as_the_contract_reads_it(gate, ds):
    """A Parquet ds of type Date or Datetime (any time of day) is the day the input contract parses
    (parse_date: a timestamp's date); the raw suite passes it, as it passes the text 'YYYY-MM-DD'."""
    from fairmon.transforms.contract_values import parse_date

    raw = _raw(ds=[ds] * 6)
    assert parse_date(raw.get_column("ds"), file="f", column="ds").to_list() == [D0] * 6
    r = _validate_raw(gate, raw)
    assert r.success and r.failures == [], r.failures


@pytest.mark.parametrize(
    "stamps, zone, day",
    [
        # a UTC midnight: its day whichever zone the engine labels the instant with (DuckDB: the machine's)
        ([dt.datetime(2026, 4, 1)] * 6, "UTC", D0),
        ([dt.datetime(2026, 3, 31, 20)] * 6, "America/New_York", D0),  # 2026-04-01 00:00 UTC
        ([dt.datetime(2026, 4, 1, 9)] * 6, "Asia/Tokyo", D0),  # the same instant
        # Tokyo's midnight is 15:00 UTC the day before: no one day, refused at its row
        ([dt.datetime(2026, 4, 1)] * 6, "Asia/Tokyo", None),
        ([dt.datetime(2026, 4, 1)] * 3 + [dt.datetime(2026, 4, 1, 0, 30)] * 3, "UTC", None),
    ],
)
def test_a_timestamp_with_a_time_zone_is_a_day_only_at_midnight_utc(gate, stamps, zone, day):
    """A zoned ds has one day only at a UTC midnight: the contract (parse_date) reads its day there and
    refuses the first other row, naming its UTC instant; the raw suite passes and fails the same rows (the
    engines hand instants over in different zones, so any other rule gave a machine-dependent day)."""
    from fairmon.transforms.contract_values import InputContractError, parse_date

    raw = _raw(ds=stamps).with_columns(pl.col("ds").dt.replace_time_zone(zone))
    if day is not None:
        assert parse_date(raw.get_column("ds"), file="f", column="ds").to_list() == [day] * 6
        assert _validate_raw(gate, raw).failed_critical == []
        return
    first = next(i for i, s in enumerate(stamps, 1) if s != stamps[0]) if zone == "UTC" else 1
    with pytest.raises(InputContractError, match=f"row {first}: .*UTC"):
        parse_date(raw.get_column("ds"), file="f", column="ds")
    r = _validate_raw(gate, raw)
    assert r.failed_critical == ["ds_is_date", "ds_is_a_real_day"], r.failures
    f = r.failures[0]
    assert (f["unexpected_count"], f["rows"][0]) == ((6, 1) if zone != "UTC" else (3, first))
    assert f["sample"][0] == ("2026-03-31 15:00:00 UTC" if zone != "UTC" else "2026-04-01 00:30:00 UTC")


def test_a_zoned_instant_just_after_midnight_is_shown_with_its_fraction():
    """Half a second after a UTC midnight is no day, and is not shown as the midnight it is not."""
    from fairmon.transforms.contract_values import InputContractError, parse_date

    s = pl.Series("ds", [dt.datetime(2026, 4, 1, 0, 0, 0, 500_000)]).dt.replace_time_zone("UTC")
    assert raw_check_frame(s.to_frame(), ["ds"])["ds"].to_list() == ["2026-04-01 00:00:00.500 UTC"]
    with pytest.raises(InputContractError, match=r"row 1: .*\(2026-04-01 00:00:00.500 UTC\)"):
        parse_date(s, file="f", column="ds")


def test_a_zoned_day_does_not_depend_on_the_zone_duckdb_hands_it_over_in():
    """DuckDB hands a Parquet file's instants over in its session's zone (the machine's): the day the gate
    renders and the contract parses is the same whatever that zone, a UTC midnight's day, else no day."""
    from fairmon.transforms.contract_values import parse_date

    stamps = [dt.datetime(2026, 4, 1), dt.datetime(2026, 4, 1, 9)]
    frame = pl.DataFrame({"ds": stamps}).with_columns(pl.col("ds").dt.replace_time_zone("UTC"))
    seen = []
    for zone in ("UTC", "America/Los_Angeles", "Asia/Tokyo"):
        with duckdb.connect() as con:
            con.execute(f"SET TimeZone = '{zone}'")  # as on a machine in that zone (DuckDB's default)
            con.register("stamps", frame)
            got = con.sql("SELECT ds FROM stamps").pl()
        assert got.schema["ds"].time_zone == zone
        seen.append(raw_check_frame(got, ["ds"])["ds"].to_list())
        assert parse_date(got["ds"].head(1), file="f", column="ds").to_list() == [D0]
    assert seen == [["2026-04-01", "2026-04-01 09:00:00 UTC"]] * 3


@pytest.mark.parametrize(
    "s1, failed",
    [
        ([1.0, 0.0, -0.0, 1.0, 0.0, 1.0], []),  # a label pandas wrote as floats
        (["1.0", "0.0", "1", "0", "1.0", "0.0"], []),  # the same as text
        ([1.0, float("nan"), 0.0, 1.0, 0.0, 1.0], ["signal_not_null[s1]"]),  # pandas' NaN: a missing label
        ([1.0, 0.5, 0.0, 1.0, 0.0, 1.0], ["signal_is_boolean[s1]"]),
    ],
)
def test_a_label_written_as_a_float_is_checked_as_the_contract_reads_it(gate, s1, failed):
    """parse_bool reads 1.0 / 0.0 (and "1.0" / "0.0") as booleans and NaN as a missing label; the raw suite
    passes the former, fails a NaN as a null and 0.5 as no boolean, as the contract refuses it."""
    from fairmon.transforms.contract_values import InputContractError, parse_bool

    raw = _raw(s1=s1)
    if not failed:
        expected = [str(v) in ("1", "1.0") for v in s1]
        assert parse_bool(raw.get_column("s1"), file="f", column="s1").to_list() == expected
    elif failed == ["signal_is_boolean[s1]"]:
        with pytest.raises(InputContractError, match="row 2"):
            parse_bool(raw.get_column("s1"), file="f", column="s1")
    assert _validate_raw(gate, raw).failed_critical == failed


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_profile_failures_are_reported_in_file_rows(gate):
    # 40 rows collapse to a handful of profile rows; counts and rows are those of the file
    n = 40
    base = _raw(n=n, grp=["a", "b"] * (n // 2), s1=[1, 0] * (n // 2))
    bad = base.with_columns(
        pl.when(pl.int_range(n) % 10 == 6).then(pl.lit("explore")).otherwise(pl.col("traffic")).alias("traffic")
    )
    (f,) = _validate_raw(gate, bad).failures
    # four bad rows, identical otherwise: one profile row; reported as 4 rows, first at file row 7
    assert f["name"] == "traffic_known" and f["unexpected_count"] == 4 and f["rows"] == [7]
    dup = base.with_columns(
        pl.when(pl.int_range(n) == 12).then(pl.lit("r2")).otherwise(pl.col("request_id")).alias("request_id"),
        pl.when(pl.int_range(n) == 12).then(pl.lit("i2")).otherwise(pl.col("item_id")).alias("item_id"),
    )
    (f,) = _validate_raw(gate, dup).failures  # rows 3 and 13 share (ds, default, r2, i2)
    assert f["name"] == "ids_unique" and f["unexpected_count"] == 2 and f["rows"] == [3] and f["sample"] == [2]


def test_missing_column_and_empty_file(gate):
    r = _validate_raw(gate, _raw().drop("s2"))
    assert r.failed_critical == ["column_exists[s2]"]
    r = _validate_raw(gate, pl.DataFrame())
    assert "has_rows" in r.failed_critical and "column_exists[ds]" in r.failed_critical


def test_null_attribute_is_only_a_warning(gate):
    r = _validate_raw(gate, _raw(grp=["a", None, "b", "a", "b", "a"]))
    assert r.success and r.failed_warning == ["attribute_not_null[grp]"]


def _reo_day() -> pl.DataFrame:
    """Two valid reo rows of one day (arms c and t)."""
    return pl.DataFrame(
        {
            "ds": [D0, D0],
            "arm": ["c", "t"],
            "attribute": ["g", "g"],
            "K": [2, 2],
            "reo": [0.2, 0.1],
            "se": [0.05, 0.05],
            "ci_low": [0.1, 0.0],
            "ci_high": [0.3, 0.2],
        }
    )


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_output_suites_catch_broken_tables(gate):
    good = _reo_day()
    assert gate.validate("reo", reo_check_frame(good), {}, "reo", "t").success
    bad = good.with_columns(pl.Series("reo", [1.5, 0.1]), pl.Series("ci_low", [0.1, 0.15]))
    r = gate.validate("reo", reo_check_frame(bad), {}, "reo", "t")
    assert set(r.failed_critical) == {"reo_at_most_sqrt_K_minus_1", "reo_le_ci_high", "ci_low_le_reo"}
    dup = pl.concat([good, good.head(1)])
    assert gate.validate("reo", reo_check_frame(dup), {}, "reo", "t").failed_critical == ["key_unique"]
    c = _counts([("default", "all", "g", "a", 60, 3), ("default", "all", "g", "b", 30, 2)])
    totals = pl.DataFrame({"traffic": ["default"], "arm": ["all"], "n": [100]})
    r = gate.validate("group_counts", group_counts_check_frame(c, totals), {}, "group_counts", "t")
    assert r.failed_critical == ["groups_add_up_to_traffic_total"]


def test_a_plug_in_above_its_interval_needs_reo_bc_inside(gate):
    """With many groups the plug-in REO's upward bias can put it above an
    honest interval (tests/test_verdicts.py, K = 64): reo_le_ci_high then
    holds reo_bc to the interval instead of quarantining the day."""
    day = _reo_day().with_columns(pl.Series("reo", [0.35, 0.1]), pl.Series("reo_bc", [0.05, 0.08]))
    assert gate.validate("reo", reo_check_frame(day), {}, "reo", "t").success
    bad = day.with_columns(pl.Series("reo_bc", [0.31, 0.08]))  # the bias-corrected point above ci_high 0.3
    r = gate.validate("reo", reo_check_frame(bad), {}, "reo", "t")
    assert r.failed_critical == ["reo_le_ci_high"]


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_an_undefined_ab_difference_needs_its_reason(gate):
    """reo_ab: a NaN difference that says why (delta_paper on clustered rows)
    passes; the same row without its reason fails undefined_diff_has_reason."""
    c = _counts(
        [
            ("default", "control", "g", "a", 6000, 900),
            ("default", "control", "g", "b", 4000, 500),
            ("default", "treatment", "g", "a", 6000, 800),
            ("default", "treatment", "g", "b", 4000, 560),
            ("random", "all", "g", "a", 3000, 300),
            ("random", "all", "g", "b", 2000, 260),
        ]
    )
    ab = reo_ab_table(c, D0, [("control", "treatment")], methods=("delta",))
    assert ab.get_column("se").is_finite().all()
    explained = ab.with_columns(
        pl.lit(float("nan")).alias("se"), pl.lit("delta_paper assumes independent rows").alias("reason")
    )
    unexplained = explained.with_columns(pl.lit(None, pl.String).alias("reason"))
    for frame, failed in [(ab, []), (explained, []), (unexplained, ["undefined_diff_has_reason"])]:
        r = gate.validate("reo_ab", reo_ab_check_frame(frame), {}, "reo_ab", "t")
        assert r.success and r.failed_warning == failed
    (f,) = gate.validate("reo_ab", reo_ab_check_frame(unexplained), {}, "reo_ab", "t").failures
    assert f["unexpected_count"] == ab.height


def _profile(raw):
    with duckdb.connect() as con:
        prof = profile_rows(con, raw.with_row_index("__row"), ["ds", "traffic", "arm", "s1", "s2", "grp"], "f")
    return raw_check_frame(prof, ["ds", "traffic", "s1", "s2"])


def _as_dict(r: DQResult) -> dict:
    """What a dq_results row says of ``r``, its details as the JSON text stored (3 and 3.0 differ there)."""
    return {"subject": r.subject, "n": r.n_expectations, "details": r.row(D0)["details"], "suite": r.suite}


def _counting_runs(monkeypatch) -> list[tuple[str, str, int]]:
    """Record every GX run of the gate as (GX suite, subject, expectations run)."""
    runs = []
    real = QualityGate.run_checkpoint

    def counting(self, suite, entries, frame, fmt, subject, run_name):
        runs.append((suite, subject, len(entries)))
        return real(self, suite, entries, frame, fmt, subject, run_name)

    monkeypatch.setattr(QualityGate, "run_checkpoint", counting)
    return runs


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_validate_many_equals_one_run_per_file(gate, monkeypatch):
    """Stacked profiles give every file exactly the result of its own run: clean
    files pass, a file with a critical defect, one with two, one with only a
    warning, one without a column and an empty one are each reported as
    alone. The files that share the schema cost one GX run between them, on
    the rows that hold each column's values first (the suite checks values
    one column at a time); the three files whose own rows failed there are
    run again, whole, in one more GX run on the expectations any of them
    failed, for GX to count their rows; the file without a column and the
    empty one run the whole suite alone."""
    n = 40
    clean = _raw(n=n, grp=["a", "b"] * (n // 2), s1=[1, 0] * (n // 2))
    bad = clean.with_columns(
        pl.when(pl.int_range(n) % 10 == 6).then(pl.lit("explore")).otherwise(pl.col("traffic")).alias("traffic")
    )
    bad2 = bad.with_columns(pl.when(pl.int_range(n) == 3).then(pl.lit(7)).otherwise(pl.col("s1")).alias("s1"))
    warn_only = clean.with_columns(pl.when(pl.int_range(n) == 5).then(None).otherwise(pl.col("grp")).alias("grp"))
    files = [
        ("clean1.parquet", _profile(clean)),
        ("bad.parquet", _profile(bad)),
        ("clean2.parquet", _profile(clean.with_columns(pl.lit("2026-04-02").alias("ds")))),
        ("warn.parquet", _profile(warn_only)),
        ("nos2.parquet", _profile(clean.drop("s2"))),
        ("empty.parquet", _profile(clean.head(0))),
        ("clean3.parquet", _profile(clean.tail(7))),
        ("bad2.parquet", _profile(bad2)),
    ]
    alone = [_as_dict(gate.validate("impressions_raw", f, RAW_PARAMS, name, "t")) for name, f in files]
    runs = _counting_runs(monkeypatch)
    many = gate.validate_many("impressions_raw", [(f, name, "t") for name, f in files], RAW_PARAMS)
    assert [_as_dict(r) for r in many] == alone
    assert [r.success for r in many] == [True, False, True, True, False, False, True, False]
    assert many[1].failed_critical == ["traffic_known"] and many[1].failures[0]["rows"] == [7]
    assert many[7].failed_critical == ["traffic_known", "signal_is_boolean[s1]"]  # the suite's order
    assert many[7].failures[0]["unexpected_count"] == 4 and many[7].failures[1]["rows"] == [4]
    assert many[3].failed_warning == ["attribute_not_null[grp]"]
    full = many[0].n_expectations
    stacked, *rest = runs
    assert stacked[0] == "impressions_raw" and stacked[1].startswith("6 subjects") and stacked[2] == full
    assert sorted(rest) == [
        ("impressions_raw", "empty.parquet", many[5].n_expectations),
        ("impressions_raw", "nos2.parquet", many[4].n_expectations),
        ("impressions_raw.failed", "3 subjects: bad.parquet t .. bad2.parquet t", 3),
    ]


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_validate_many_stacks_files_whose_columns_come_in_another_order(gate, monkeypatch):
    """A pooled random file lists ``arm`` last: the same columns and types in
    another order still make one GX run with the day's file, and each file's
    result is that of its own run (here the second file's defect is found in
    its own rows)."""
    n = 20
    clean = _profile(_raw(n=n, grp=["a", "b"] * (n // 2), s1=[1, 0] * (n // 2)))
    bad = _raw(n=n, grp=["a", "b"] * (n // 2), s1=[1, 0] * (n // 2))
    bad = _profile(bad.with_columns(pl.when(pl.int_range(n) == 2).then(pl.lit(7)).otherwise(pl.col("s1")).alias("s1")))
    moved = bad.select([c for c in bad.columns if c != "arm"] + ["arm"])
    assert moved.columns != clean.columns and sorted(moved.columns) == sorted(clean.columns)
    items = [(clean, "day.parquet", "t"), (moved, "pool.parquet", "t")]
    alone = [_as_dict(gate.validate("impressions_raw", f, RAW_PARAMS, s, r)) for f, s, r in items]
    runs = _counting_runs(monkeypatch)
    many = gate.validate_many("impressions_raw", items, RAW_PARAMS)
    assert [_as_dict(r) for r in many] == alone
    assert many[1].failed_critical == ["signal_is_boolean[s1]"] and many[1].failures[0]["rows"] == [3]
    assert [(s, subject) for s, subject, _ in runs] == [
        ("impressions_raw", "2 subjects: day.parquet t .. pool.parquet t"),
        ("impressions_raw.failed", "pool.parquet"),
    ]


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_validate_many_days_with_a_missing_traffic_run_alone(gate, monkeypatch):
    """impressions_day's table-level rule (the random traffic is present) is
    decided for each day: the days that have it are checked in one run, a day
    without it alone, and every day's result is the one of its own run."""
    params = {"positive_rate_min": 0.0, "positive_rate_max": 1.0}
    rows = [("default", "c", "g", "a", 600, 30), ("default", "c", "g", "b", 400, 10)]
    rows += [("random", "all", "g", "a", 200_000, 12_000), ("random", "all", "g", "b", 100_000, 3_000)]
    days = [day_check_frame(_counts(rows), 0.1, 0.05) for _ in range(3)]
    days.append(day_check_frame(_counts(rows[:2]), 0.1, 0.05))  # no random traffic
    days.append(day_check_frame(_counts([*rows[:3], ("random", "all", "g", "b", 100_000, 0)]), 0.1, 0.05))
    items = [(f, f"impressions d{i}", f"d{i}") for i, f in enumerate(days)]
    alone = [_as_dict(gate.validate("impressions_day", f, params, s, r)) for f, s, r in items]
    runs = _counting_runs(monkeypatch)
    many = gate.validate_many("impressions_day", items, params)
    assert [_as_dict(r) for r in many] == alone
    assert [r.failed_critical for r in many] == [[], [], [], ["random_traffic_present"], []]
    assert "group_has_positives" in many[4].failed_warning  # a thin cell: its estimates say so, the day publishes
    assert [(s, subject) for s, subject, _ in runs] == [
        ("impressions_day", "4 subjects: impressions d0 d0 .. impressions d4 d4"),
        ("impressions_day", "impressions d3"),
    ]


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_validate_many_reads_each_days_failures_from_the_stacked_run(gate, monkeypatch):
    """A warning failing on some rows of several days (no_small_groups, as
    on every day at K = 4,096) is reported per day from the one stacked GX
    run: day 1 fails on its first row (n_small_groups 3), day 2 on both
    (5 and 7), each counted, placed and sampled as in a run of the day
    alone, with no further GX run. When the stack turns the column's pandas
    type (a null on day 3 makes the stacked integers floats), the failing
    days run alone, so their samples still read 3, not 3.0."""
    day = _reo_day()
    small = [[0, 0], [3, 0], [5, 7]]
    frames = [reo_check_frame(day.with_columns(pl.Series("n_small_groups", v, pl.Int64))) for v in small]
    items = [(f, "reo", f"day{i}") for i, f in enumerate(frames)]
    alone = [_as_dict(gate.validate("reo", f, {}, s, r)) for f, s, r in items]
    runs = _counting_runs(monkeypatch)
    many = gate.validate_many("reo", items, {})
    assert [_as_dict(r) for r in many] == alone
    assert [s for s, *_ in runs] == ["reo"]
    assert [r.failed_warning for r in many] == [[], ["no_small_groups"], ["no_small_groups"]]
    (one,), (two,) = many[1].failures, many[2].failures
    assert (one["unexpected_count"], one["rows"], one["sample"]) == (1, [1], [3])
    assert (two["unexpected_count"], two["rows"], two["sample"]) == (2, [1, 2], [5, 7])
    with_null = reo_check_frame(day.with_columns(pl.Series("n_small_groups", [None, 0], pl.Int64)))
    items.append((with_null, "reo", "day3"))
    alone.append(_as_dict(gate.validate("reo", with_null, {}, "reo", "day3")))
    runs.clear()
    many = gate.validate_many("reo", items, {})
    assert [_as_dict(r) for r in many] == alone
    assert sorted((s, r) for s, r, _ in runs)[1:] == [("reo.failed", "reo"), ("reo.failed", "reo")]
    assert json.loads(many[1].row(D0)["details"])[0]["sample"] == [3]


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_a_warning_failing_in_every_file_costs_one_more_gx_run(gate, monkeypatch):
    """Null attributes in three files of four (a warning real logs often
    raise): the covering run finds them, and the three files are checked
    again whole in one GX run, not one each; each file's count (1, 2 and 3
    null file rows) and first rows (of each distinct offending profile row)
    are those of its own run."""
    n = 30
    clean = _raw(n=n, grp=["a", "b", "c"] * (n // 3), s1=[1, 0] * (n // 2))

    def nulls(rows):
        return clean.with_columns(pl.when(pl.int_range(n).is_in(rows)).then(None).otherwise(pl.col("grp")).alias("grp"))

    files = [
        ("clean.parquet", clean),
        ("n1.parquet", nulls([4])),
        ("n2.parquet", nulls([2, 9])),
        ("n3", nulls([0, 1, 29])),
    ]
    items = [(_profile(f), name, "t") for name, f in files]
    alone = [_as_dict(gate.validate("impressions_raw", f, RAW_PARAMS, s, r)) for f, s, r in items]
    runs = _counting_runs(monkeypatch)
    many = gate.validate_many("impressions_raw", items, RAW_PARAMS)
    assert [_as_dict(r) for r in many] == alone
    assert [(s, subject[:11], k) for s, subject, k in runs] == [
        ("impressions_raw", "4 subjects:", many[0].n_expectations),
        ("impressions_raw.failed", "3 subjects:", 1),
    ]
    got = [(f["name"], f["unexpected_count"], f["rows"]) for r in many[1:] for f in r.failures]
    assert got == [
        ("attribute_not_null[grp]", 1, [5]),
        ("attribute_not_null[grp]", 2, [3, 10]),
        ("attribute_not_null[grp]", 3, [1, 2]),  # rows 2 and 30 share a profile row: its first file row names both
    ]


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_validate_many_reads_failures_past_gxs_200_listed_values(gate, monkeypatch):
    """GX lists at most 200 unexpected values of a run: with 250 failing rows
    on each of two days the second day's values lie past them, and are
    still its own (1001.. on day 1), counted 250 each, as alone, in one GX run."""
    n = 250

    def day(first: int) -> pl.DataFrame:
        rows = _reo_day().head(1).select(pl.all().repeat_by(n).explode())
        arms = pl.Series("arm", [f"a{i}" for i in range(n)])
        return reo_check_frame(rows.with_columns(arms, pl.Series("n_small_groups", range(first, first + n))))

    items = [(day(1), "reo", "day0"), (day(1001), "reo", "day1")]
    alone = [_as_dict(gate.validate("reo", f, {}, s, r)) for f, s, r in items]
    runs = _counting_runs(monkeypatch)
    many = gate.validate_many("reo", items, {})
    assert [_as_dict(r) for r in many] == alone and len(runs) == 1
    (f,) = many[1].failures
    assert (f["unexpected_count"], f["rows"], f["sample"]) == (n, [1, 2, 3, 4, 5], [1001, 1002, 1003, 1004, 1005])


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_validate_many_checks_a_profiles_values_and_counts_its_file_rows(gate, monkeypatch):
    """Stacked profiles are checked on the rows that hold each column's
    values first: 2 files of 30 rows whose profiles hold 6 and 8 distinct
    rows give GX 3 + 5 rows (a group value a, b, c and a traffic value
    default, random, explore, ads, the other columns' values among them).
    A failure is counted in file rows: 5 file rows with an unknown traffic
    value, held by the profile as 2 distinct rows (3 + 2 copies), count 5
    and name their first file rows, as a run of the file alone does."""
    n = 30
    clean = _raw(n=n, grp=["a", "b", "c"] * (n // 3), s1=[1, 0] * (n // 2))
    at = pl.int_range(n)
    bad = clean.with_columns(
        pl.when(at.is_in([4, 10, 16]))
        .then(pl.lit("explore"))
        .when(at.is_in([7, 21]))
        .then(pl.lit("ads"))
        .otherwise(pl.col("traffic"))
        .alias("traffic"),
        pl.when(at.is_in([4, 10, 16, 7, 21])).then(pl.lit("a")).otherwise(pl.col("grp")).alias("grp"),
        pl.when(at.is_in([4, 10, 16, 7, 21])).then(pl.lit(1)).otherwise(pl.col("s1")).alias("s1"),
    )
    items = [(_profile(clean), "clean.parquet", "t"), (_profile(bad), "bad.parquet", "t")]
    alone = [_as_dict(gate.validate("impressions_raw", f, RAW_PARAMS, s, r)) for f, s, r in items]
    heights = []
    real = QualityGate.run_checkpoint

    def seen(self, suite, entries, frame, fmt, subject, run_name):
        heights.append((suite, len(frame)))
        return real(self, suite, entries, frame, fmt, subject, run_name)

    monkeypatch.setattr(QualityGate, "run_checkpoint", seen)
    many = gate.validate_many("impressions_raw", items, RAW_PARAMS)
    assert [_as_dict(r) for r in many] == alone
    assert [f.height for f, *_ in items] == [6, 8]
    assert heights == [("impressions_raw", 3 + 5), ("impressions_raw.failed", 8)]
    (f,) = many[1].failures
    assert f["name"] == "traffic_known" and f["unexpected_count"] == 5 and f["rows"] == [5, 8]
    assert sorted(f["sample"]) == ["ads", "explore"]


def test_validate_many_keeps_uniqueness_per_subject(gate):
    """A key repeated across days is fine; repeated within one day it fails,
    for that day only, as in a run of that day alone."""
    day = _reo_day()
    frames = [reo_check_frame(day), reo_check_frame(pl.concat([day, day.head(1)])), reo_check_frame(day)]
    many = gate.validate_many("reo", [(f, "reo", f"day{i}") for i, f in enumerate(frames)], {})
    assert [r.failed_critical for r in many] == [[], ["key_unique"], []]
    assert _as_dict(many[1]) == _as_dict(gate.validate("reo", frames[1], {}, "reo", "day1"))


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_labels_and_scores_suites(gate):
    labels = pl.DataFrame(
        {
            "ds": [str(D0)] * 4,
            "item_id": ["a", "b", "c", "a"],
            "labeler_id": ["x", "x", "y", "x"],
            "label": ["1", "0", "1", "0"],
            "gold_label": ["1", None, "0", "1"],
            "grp": ["p", "q", "p", "q"],
        }
    )
    params = {"required_columns": ["ds", "item_id", "labeler_id", "label", "gold_label", "grp"], "attributes": ["grp"]}
    r = gate.validate("labels_raw", labels, params, "labels", "t")
    assert r.failed_critical == ["one_label_per_item_and_labeler"]  # (a, x) labelled twice
    assert gate.validate("labels_raw", labels.head(3), params, "labels", "t").success
    scores = pl.DataFrame(
        {
            "ds": [str(D0)] * 3,
            "model": ["m"] * 3,
            "item_id": ["a", "b", "c"],
            "score": ["0.3", "7", "high"],
            "outcome": ["1", "0", None],
            "grp": ["p", "q", "p"],
        }
    )
    params = {"required_columns": ["ds", "model", "item_id", "score", "outcome", "grp"], "attributes": ["grp"]}
    assert gate.validate("scores_raw", scores, params, "scores", "t").failed_critical == ["score_is_number"]


# --- end to end: one defect per day, gated backfill, gated report ----------------

DEFECT_DAYS = {  # day offset -> (what is wrong, the expectation that must name it)
    1: ("null in a signal", "signal_not_null[s1]"),
    2: ("unknown traffic value", "traffic_known"),
    3: ("duplicated rows", "ids_unique"),
    4: ("no random traffic", "random_traffic_present"),
    5: ("no default traffic", "default_traffic_present"),
    7: ("wrong column type", "signal_is_boolean[s2]"),
}
THIN_DAY = 6  # a group without positives in default traffic: a warning, the day publishes
N_DAYS = 9  # offsets 0 and 8 are clean


def _day_file(offset: int, rng) -> pl.DataFrame:
    ds = D0 + dt.timedelta(days=offset)
    n_def, n_rand = 3000, 1500
    traffic = ["default"] * n_def + ["random"] * n_rand
    grp = rng.choice(["a", "b"], n_def + n_rand)
    y = rng.random(n_def + n_rand) < np.where(np.array(traffic) == "default", 0.35, 0.25)
    f = pl.DataFrame(
        {
            "ds": [ds] * len(traffic),
            "traffic": traffic,
            "arm": "all",
            "request_id": [f"{ds}-{i}" for i in range(len(traffic))],
            "item_id": "v",
            "s1": y.astype(int),
            "s2": np.zeros(len(traffic), int),
            "grp": grp,
        }
    )
    if offset == 1:
        f = f.with_columns(pl.when(pl.int_range(pl.len()) == 10).then(None).otherwise(pl.col("s1")).alias("s1"))
    elif offset == 2:
        f = f.with_columns(
            pl.when(pl.int_range(pl.len()) == 7).then(pl.lit("explore")).otherwise(pl.col("traffic")).alias("traffic")
        )
    elif offset == 3:
        f = pl.concat([f, f.head(3)])
    elif offset == 4:
        f = f.filter(pl.col("traffic") == "default")
    elif offset == 5:
        f = f.filter(pl.col("traffic") == "random")
    elif offset == THIN_DAY:
        f = f.with_columns(
            pl.when((pl.col("grp") == "b") & (pl.col("traffic") == "default"))
            .then(0)
            .otherwise(pl.col("s1"))
            .alias("s1")
        )
    elif offset == 7:
        f = f.with_columns(pl.col("s2").cast(pl.String).replace({"0": "no"}))
    return f


@pytest.fixture(scope="module")
def gated_backfill(tmp_path_factory, prefect_harness):
    root = tmp_path_factory.mktemp("gated")
    (root / "in").mkdir()
    rng = np.random.default_rng(21)
    for k in range(N_DAYS):
        _day_file(k, rng).write_parquet(root / "in" / f"{D0 + dt.timedelta(days=k)}.parquet")
    cfg = root / "fairmon.toml"
    cfg.write_text(
        'warehouse = "warehouse"\nduckdb = "f.duckdb"\n[impressions]\nformat = "contract"\n'
        'path = "in/{ds}.parquet"\nsignals = ["s1", "s2"]\nattributes = ["grp"]\n'
        "random_window_days = 1\n"
    )
    end = D0 + dt.timedelta(days=N_DAYS - 1)
    res = CliRunner().invoke(app, ["backfill", "-c", str(cfg), "--start", str(D0), "--end", str(end)])
    rep = CliRunner().invoke(app, ["report", "-c", str(cfg), "--start", str(D0), "--end", str(end)])
    return root, res, rep


def test_gated_backfill_quarantines_each_defect_day(gated_backfill):
    root, res, _ = gated_backfill
    assert res.exit_code == 1  # some days did not publish
    out = res.output
    thin = D0 + dt.timedelta(days=THIN_DAY)
    assert "published" in next(ln for ln in out.splitlines() if ln.startswith(f"│ {thin}"))
    for offset in DEFECT_DAYS:
        line = next(ln for ln in out.splitlines() if ln.startswith(f"│ {D0 + dt.timedelta(days=offset)}"))
        assert "quarantined" in line
    dq = read_table(root / "warehouse", "dq_results")
    for offset, (_what, name) in DEFECT_DAYS.items():
        day = dq.filter(pl.col("ds") == D0 + dt.timedelta(days=offset))
        assert not day.get_column("success").all()
        failed = ", ".join(day.get_column("failed_critical").to_list())
        assert name in failed.split(", "), (offset, failed)
    # the failures name what to act on (issue 41): the duplicated keys, the group and traffic without positives
    notes = {
        offset: {
            f["name"]: f.get("note") for d in dq.filter(pl.col("ds") == ds).get_column("details") for f in json.loads(d)
        }
        for offset in (3, THIN_DAY)
        for ds in [D0 + dt.timedelta(days=offset)]
    }
    day3 = D0 + dt.timedelta(days=3)
    assert notes[3]["ids_unique"].startswith(
        f"key (ds, traffic, request_id, item_id) repeated: ({day3}, default, {day3}-0, v) ×2, "
    )
    assert notes[THIN_DAY]["group_has_positives"].startswith("default traffic, arm all, grp = b: n_pos 0 of n ")
    thin_dq = dq.filter(pl.col("ds") == thin)
    assert thin_dq.get_column("success").all()
    assert "group_has_positives" in ", ".join(thin_dq.get_column("failed_warning").to_list())
    # the estimates that need the cell say why they are undefined; none claims a verdict
    (row,) = read_table(root / "warehouse", "reo").filter(pl.col("ds") == thin).iter_rows(named=True)
    assert math.isnan(row["ci_low"]) and math.isnan(row["ci_high"]) and row["verdict_80pct"] == "undefined"
    assert row["reason"].startswith("Q_k = 0 for group(s) b: delta-method SE undefined")


def test_clean_days_publish_and_record_every_suite(gated_backfill):
    root, res, _ = gated_backfill
    dq = read_table(root / "warehouse", "dq_results")
    reo = read_table(root / "warehouse", "reo")
    for offset in (0, 8):
        ds = D0 + dt.timedelta(days=offset)
        day = dq.filter(pl.col("ds") == ds)
        assert day.get_column("success").all()
        assert set(day.get_column("suite")) == {
            "impressions_raw",
            "impressions_day",
            "group_counts",
            "reo_group",
            "reo",
        }
        # 1,500 random rows are below Thm E.1's volume for ε = 0.1: a warning, not a block
        assert "random_traffic_sufficient" in " ".join(day.get_column("failed_warning").to_list())
        assert reo.filter(pl.col("ds") == ds).height == 1
    # quarantined days were never published; the thin day was
    assert sorted(reo.get_column("ds").to_list()) == [D0, D0 + dt.timedelta(days=THIN_DAY), D0 + dt.timedelta(days=8)]
    docs = root / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html"
    assert docs.is_file()


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.urls, self.text, self.links = [], [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for k, v in attrs:
            if k == "src" and v or (k == "href" and v and tag != "a"):  # links to the data files load nothing
                self.urls.append(v)
            if tag == "a" and k == "href":
                self.links.append(v)

    def handle_data(self, data):
        self.text.append(data)


def test_report_is_offline_gated_and_has_the_plots(gated_backfill):
    root, _, rep = gated_backfill
    assert rep.exit_code == 0, rep.output
    end = D0 + dt.timedelta(days=N_DAYS - 1)  # the console says so too: 3 of the 9 days are published
    assert f"warning: 3 of the {N_DAYS} day(s) {D0}..{end} published; the report's 'Excluded days'" in " ".join(
        rep.stderr.split()
    )
    path = root / f"report_{D0}_{D0 + dt.timedelta(days=N_DAYS - 1)}.html"
    text = path.read_text()
    p = _Collect()
    p.feed(text)
    assert p.urls == []  # nothing to fetch: no scripts, images or stylesheets from anywhere
    # links only to local data files, Data Docs and anchors within the page (the glossary)
    assert all(u.startswith(("file://", "#")) for u in p.links)
    assert any(u.endswith("/warehouse/reo") for u in p.links)
    assert not re.search(r"<(script|link|img|iframe)\b", text)
    assert p.tags.count("svg") == 2  # daily REO (one attribute) and ΔU
    body = " ".join(p.text)
    assert "80% rule: REO = 11.1%" in body and "excluded day" in body
    # the excluded-days table names every bad day with its expectation
    section = text[text.index("<h2>Excluded days</h2>") : text.index("<h2>Data quality</h2>")]
    for offset, (_what, name) in DEFECT_DAYS.items():
        assert str(D0 + dt.timedelta(days=offset)) in section and name in section
    # ...in the run's words, as the command line said them (rows and values), not the checks' names alone
    assert section.count("quarantined at stage") == len(DEFECT_DAYS) and "unexpected, rows" in section
    for offset in (0, THIN_DAY, 8):
        assert str(D0 + dt.timedelta(days=offset)) not in section
    assert re.search(r"<b>3</b>\s*days published", text)


def test_report_renders_in_headless_chromium(gated_backfill, tmp_path, find_chromium):
    """A real browser check: fails without Chromium where a browser is required
    (FAIRMON_REQUIRE_BROWSER, exported by .ci/run, or CI set), skips saying so elsewhere."""
    import subprocess

    chromium = find_chromium()
    root, _, _ = gated_backfill
    path = root / f"report_{D0}_{D0 + dt.timedelta(days=N_DAYS - 1)}.html"
    png = tmp_path / "report.png"
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1100,1400",
            f"--screenshot={png}",
            path.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert png.stat().st_size > 20_000  # a rendered page with plots, not a blank one


def test_a_stored_result_keeps_few_indices_but_the_gate_counts_them_all(gate):
    """A defect on 40 distinct profile rows: the gate weighs every one of
    them (40 file rows, the first five named), while the result GX stores
    for Data Docs keeps only the first STORED_INDICES indices."""
    from fairmon.pipelines.checks.gate import STORED_INDICES

    n = 40
    wide = _raw(n=n, grp=[f"g{i}" for i in range(n)], s1=[1, 0] * (n // 2), traffic=["explore"] * n)
    prof = _profile(wide)
    assert prof.height == n
    (f,) = gate.validate("impressions_raw", prof, RAW_PARAMS, "wide.parquet", "stored").failures
    assert f["name"] == "traffic_known" and f["unexpected_count"] == n and f["rows"] == [1, 2, 3, 4, 5]
    (path,) = [p for p in (gate.root / "gx").rglob("*.json") if "stored_wide.parquet" in str(p)]
    stored = {r["expectation_config"]["meta"]["name"]: r["result"] for r in json.loads(path.read_text())["results"]}
    assert stored["traffic_known"]["unexpected_index_list"] == list(range(STORED_INDICES))
    assert stored["traffic_known"]["unexpected_count"] == n and "unexpected_index_query" not in stored["traffic_known"]


@pytest.mark.slow
def test_a_process_that_never_ends_its_run_collects_its_cycles_at_exit(tmp_path):
    """GX's import-time objects are frozen out of the collector while a run
    is on (preload._preload). A process that loads the gate and never ends a
    run (a test, a notebook) still has its cycles collected at exit: a
    DuckDB relation held in a cycle is freed, not reported by DuckDB's
    bindings as leaked when the interpreter ends, and a cycle's finalizer
    runs. The collector is off once the gate's exit handler has run (the
    interpreter's first walk of every object is skipped; its second, while
    it tears the modules down, collects the cycles): an exit handler
    registered before it, which runs after it, sees it off. The cycle is made
    right after a collection, so that no automatic one (whose timing follows
    the allocations of imports and config parsing) frees it before the
    freeze."""
    (tmp_path / "fairmon.toml").write_text(
        'warehouse = "wh"\nduckdb = "f.duckdb"\n[impressions]\nformat = "tiktok"\npath = "d/{ds}.csv"\n'
        'signals = ["like"]\nattributes = ["g"]\n'
    )
    code = """
import atexit, gc, os, sys, duckdb
from fairmon.pipelines.core.config import load_config
from fairmon.pipelines.checks import preload
atexit.register(lambda: print("collector on at exit:", gc.isenabled(), flush=True))
con = duckdb.connect()
cfg = load_config(sys.argv[1])
class Holder:
    def __del__(self):
        os.write(1, b"cycle collected\\n")
gc.collect()  # the allocation count starts at 0: no collection before the preload pauses the collector
h = Holder(); h.self = h; h.rel = con.sql("select 1")
del h
preload.preload_gate(cfg).join()
print(preload._FREEZE["state"], flush=True)
"""
    env = {"GX_ANALYTICS_ENABLED": "False", "PATH": ""}
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "fairmon.toml")], capture_output=True, text=True, env=env
    )
    lines = out.stdout.splitlines()
    assert out.returncode == 0 and lines == ["frozen", "collector on at exit: False", "cycle collected"], (
        out.stdout,
        out.stderr[-2000:],
    )
    assert "leaked" not in out.stderr, out.stderr[-2000:]


@pytest.mark.slow
def test_gx_fingerprints_only_batches_up_to_its_bound(gate):
    """A checked frame of at most FINGERPRINT_BYTES (as pandas) keeps GX's
    data fingerprint in its stored result; a bigger one (a backfill's stacked
    profiles at many groups) is stored without, as GX stores its own big batches."""
    from fairmon.pipelines.checks.gate import FINGERPRINT_BYTES

    small = reo_check_frame(_reo_day())
    n = FINGERPRINT_BYTES // 60 + 1
    big = pl.concat([small] * (n // 2 + 1))
    assert big.to_pandas().memory_usage().sum() > FINGERPRINT_BYTES > small.to_pandas().memory_usage().sum()
    for frame, subject in ((small, "fp_small"), (big, "fp_big")):
        gate.validate("reo", frame, {}, subject, "fp")
    markers = {}
    for path in (gate.root / "gx").rglob("*.json"):
        for subject in ("fp_small", "fp_big"):
            if f"fp_{subject}" in str(path):
                markers[subject] = json.loads(path.read_text())["meta"]["batch_markers"]
    assert len(markers["fp_small"]["pandas_data_fingerprint"]) == 32
    assert "pandas_data_fingerprint" not in markers["fp_big"]


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
@pytest.mark.parametrize("result_format", ["SUMMARY", "COMPLETE"])
def test_failures_are_detailed_as_a_run_of_the_whole_suite_would(gate, result_format):
    """The gate runs a suite for pass/fail first and only its failures again
    in detail. Each expectation's result must be what GX's own run of the
    whole suite in ``result_format`` gives (GX's Batch.validate in a context
    of its own): the same successes, and for every failure the same result
    (unexpected counts, values, rows). Three of the raw suite's expectations
    fail here (an unknown traffic, a non-boolean signal, a null signal) and a
    warning (a null attribute)."""
    from fairmon.pipelines.checks.gx_import import import_gx

    gx = import_gx()  # as fairmon imports it (PySpark's Spark Connect hidden: its import may sys.exit)

    raw = _raw(
        n=9,
        traffic=["default", "random", "explore"] * 3,
        s2=["yes", "no", "true"] * 3,
        s1=[1, None, 0] * 3,
        grp=["a", None, "b"] * 3,
    )
    frame = raw_check_frame(raw, ["ds", "traffic", "s1", "s2"])
    entries = expand_spec(load_spec("impressions_raw"), RAW_PARAMS, frame.columns, {})
    vr = gate.run_checkpoint("impressions_raw", entries, frame, result_format, "detail.csv", "detail")

    ctx = gx.get_context(mode="ephemeral")
    batch_definition = (
        ctx.data_sources.add_pandas("ref").add_dataframe_asset("a").add_batch_definition_whole_dataframe("w")
    )
    suite = gx.ExpectationSuite(
        name="ref",
        expectations=[
            getattr(gx.expectations, e["type"])(**e["kwargs"], severity=e["severity"], meta={"name": e["name"]})
            for e in entries
        ],
    )
    fmt = {"result_format": result_format, "partial_unexpected_count": 5, "return_unexpected_index_query": False}
    ref = batch_definition.get_batch(batch_parameters={"dataframe": frame.to_pandas()}).validate(
        suite, result_format=fmt
    )

    def by_name(results):
        return {r.expectation_config.meta["name"]: r for r in results}

    got, want = by_name(vr.results), by_name(ref.results)
    assert got.keys() == want.keys() and len(got) == len(entries)
    assert (
        {n for n, r in got.items() if not r.success}
        == {n for n, r in want.items() if not r.success}
        == {
            "traffic_known",
            "signal_is_boolean[s2]",
            "signal_not_null[s1]",
            "attribute_not_null[grp]",
        }
    )
    for name, r in want.items():
        assert got[name].success == r.success
        if not r.success:
            assert got[name].result == r.result, name
    assert got["traffic_known"].result["unexpected_count"] == 3
    assert vr.statistics["unsuccessful_expectations"] == ref.statistics["unsuccessful_expectations"] == 4
