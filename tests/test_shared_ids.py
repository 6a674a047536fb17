"""Id keys repeated across two of a day's files (issue 40 item 2;
pipelines/ingest/shared_ids.py): hand-written files whose shared keys are
known by construction."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest

from fairmon.pipelines.core.config import load_config
from fairmon.pipelines.ingest.identity import IngestUnit
from fairmon.pipelines.ingest.shared_ids import shared_ids
from fairmon.pipelines.simulation.simulated import write_simulation
from fairmon.transforms.simulators.impressions import SimulationSpec

D1, D2 = dt.date(2026, 1, 1), dt.date(2026, 1, 2)


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    spec = SimulationSpec(days=1, rows_per_day=50, random_rows_per_day=20, random_pool_days=1, seed=1)
    return load_config(write_simulation(spec, tmp_path_factory.mktemp("sim"), "csv")["config"])


def _write(path: Path, rows: list[tuple], fmt: str = "csv") -> Path:
    cols = ["ds", "traffic", "request_id", "item_id", "like"][: len(rows[0])]
    frame = pl.DataFrame(rows, schema=cols, orient="row")
    frame.write_csv(path) if fmt == "csv" else frame.write_parquet(path)
    return path


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_two_files_sharing_three_keys_give_exactly_those_three(cfg, tmp_path, fmt):
    a = _write(
        tmp_path / f"a.{fmt}",
        [
            ("2026-01-01", "default", "r1", "i1", "1"),
            ("2026-01-01", "default", "r1", "i2", "0"),
            ("2026-01-01", "default", "r2", "i1", "0"),
            ("2026-01-01", "random", "r3", "i3", "1"),
            ("2026-01-01", "default", "r9", "i9", "1"),
        ],
        fmt,
    )
    b = _write(
        tmp_path / f"b.{fmt}",
        [
            ("2026-01-01", "default", "r1", "i1", "0"),  # shared (other signal values: not a copied row)
            ("2026-01-01", "default", "r2", "i1", "1"),  # shared
            ("2026-01-01", "random", "r3", "i3", "1"),  # shared
            ("2026-01-02", "default", "r1", "i2", "0"),  # another day: a key of its own
            ("2026-01-01", "random", "r9", "i9", "1"),  # another traffic: a key of its own
            ("2026-01-01", "default", "r7", "i7", "1"),
        ],
        fmt,
    )
    out = shared_ids(cfg, IngestUnit(a, D1, D1, "all"), IngestUnit(b, D1, D1, "all"))
    assert out.get_column("n_shared").to_list() == [3, 3, 3]
    keys = out.select("ds", "traffic", "request_id", "item_id").rows()
    assert keys == [
        ("2026-01-01", "default", "r1", "i1"),
        ("2026-01-01", "default", "r2", "i1"),
        ("2026-01-01", "random", "r3", "i3"),
    ]


@pytest.mark.parametrize(
    "ds",
    [
        dt.datetime(2026, 1, 1),  # a naive timestamp: its day
        dt.datetime(2026, 1, 1, 13, 30),
        "utc",  # a UTC midnight with a time zone, however DuckDB's session labels it
        " 2026-01-01 ",  # text the contract trims
    ],
)
def test_a_day_typed_otherwise_in_one_file_still_shares_its_keys(cfg, tmp_path, ds):
    """Two Parquet files of one day, one with ds as a DATE and one with the same day typed otherwise: their
    shared keys are found (compared as the day the contract reads, not as the column's text, where
    '2026-01-01 00:00:00+00' never equalled '2026-01-01' and the day published its rows twice)."""
    keys = [("default", "r1", "i1", 1), ("default", "r2", "i1", 0), ("random", "r3", "i3", 1)]
    a = pl.DataFrame([(D1, *k) for k in keys], schema=["ds", "traffic", "request_id", "item_id", "like"], orient="row")
    a.write_parquet(tmp_path / "a.parquet")
    zoned = pl.col("ds").cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
    b = a.with_columns(zoned if ds == "utc" else pl.lit(ds).alias("ds"))
    b.write_parquet(tmp_path / "b.parquet")
    out = shared_ids(
        cfg, IngestUnit(tmp_path / "a.parquet", D1, D1, "all"), IngestUnit(tmp_path / "b.parquet", D1, D1, "all")
    )
    assert out.get_column("n_shared").to_list() == [3, 3, 3]
    assert out.get_column("ds").to_list() == ["2026-01-01"] * 3


def test_a_pool_without_dates_shares_keys_with_any_day_and_traffic_comes_from_the_unit(cfg, tmp_path):
    pool = tmp_path / "pool.csv"
    pl.DataFrame({"request_id": ["p1", "p2", "p3"], "item_id": ["a", "b", "c"]}).write_csv(pool)
    day = tmp_path / "day.csv"
    pl.DataFrame({"request_id": ["p2", "p3", "p4"], "item_id": ["b", "x", "d"]}).write_csv(day)
    as_pool = IngestUnit(pool, D1, D2, "random", traffic="random")
    out = shared_ids(cfg, as_pool, IngestUnit(day, D2, D2, "all", traffic="random"))
    assert out.select("ds", "request_id", "item_id").rows() == [("2026-01-02", "p2", "b")]
    # the same ids as default traffic of the day: another key (DESIGN §2), nothing shared
    assert shared_ids(cfg, as_pool, IngestUnit(day, D2, D2, "nonrandom", traffic="default")).height == 0


def test_files_without_id_columns_are_not_compared(cfg, tmp_path):
    a = _write(tmp_path / "a.csv", [("2026-01-01", "default")])
    b = _write(tmp_path / "b.csv", [("2026-01-01", "default")])
    assert shared_ids(cfg, IngestUnit(a, D1, D1, "all"), IngestUnit(b, D1, D1, "all")).height == 0


@pytest.mark.parametrize("unit", ["ms", "us", "ns"])
def test_a_zoned_days_text_is_its_utc_day_whatever_duckdbs_session_zone(tmp_path, unit):
    """DuckDB reads a zoned Parquet timestamp as TIMESTAMPTZ (TIMESTAMPTZ_NS in ns) and formats it in its
    session's zone, the machine's: day_text takes its day in UTC, so a UTC midnight is that day in Los
    Angeles too (there 17:00 the day before)."""
    import duckdb

    from fairmon.pipelines.ingest.engines import DuckEngine

    zoned = pl.col("ds").cast(pl.Datetime(unit)).dt.replace_time_zone("UTC")
    pl.DataFrame({"ds": [dt.datetime(2026, 1, 1)], "x": [1]}).with_columns(zoned).write_parquet(tmp_path / "z.parquet")
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'America/Los_Angeles'")
        rows = con.read_parquet(str(tmp_path / "z.parquet"))
        assert DuckEngine.day_text(rows, "ds").fetchall() == [(1, "2026-01-01")]
