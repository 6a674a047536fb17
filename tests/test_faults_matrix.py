"""Fault and bad-input matrix (issue 40): each case a bad input, path, config or
environment, and what fairmon must do with it: record and unpublish a failed
day naming its cause, quarantine repeated rows naming both files, refuse with
an ``error:`` line and the README's exit code, or warn. Most cases are unit
level; the few that need the whole command line run in a subprocess (slow)."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

from fairmon.pipelines.core.config import load_config
from fairmon.pipelines.faces.simulated import write_simulation
from fairmon.transforms.simulators.impressions import SimulationSpec

SPEC = SimulationSpec(days=2, rows_per_day=1200, random_rows_per_day=600, random_pool_days=2, seed=5)
DAY = SPEC.start + dt.timedelta(days=1)


def _sim(root: Path) -> Path:
    """A small simulated TikTok project under ``root``; its config path."""
    return Path(write_simulation(SPEC, root, "csv")["config"])


def _published_reo(cfg_path: Path) -> list[dt.date]:
    """The days ``reo_published`` shows (read as ``fairmon sql`` reads it)."""
    from fairmon.pipelines.storage.warehouse import query_warehouse

    cfg = load_config(cfg_path)
    frame, _ = query_warehouse(cfg.duckdb_path, cfg.warehouse_path, "select distinct ds from reo_published")
    return sorted(frame.get_column("ds").to_list())


# ---- item 1: every attempt is recorded before it can fail -------------------------------------------


def test_bad_pool_file_name_fails_the_day_naming_the_file_and_unpublishes_it(tmp_path):
    from fairmon.pipelines.executor.days import run_day
    from fairmon.pipelines.storage.warehouse import latest_runs

    cfg_path = _sim(tmp_path / "sim")
    assert run_day(str(cfg_path), DAY)["status"] == "published"
    assert _published_reo(cfg_path) == [DAY]
    (pool,) = (cfg_path.parent / "random").glob("random_*.csv")
    bad = pool.with_name("random_2026-02-30_2026-03-01.csv")
    shutil.copy(pool, bad)
    out = run_day(str(cfg_path), DAY)
    assert out["status"] == "failed"
    assert str(bad) in out["error"] and "not a pair of dates" in out["error"]
    latest = latest_runs(load_config(cfg_path).duckdb_path).row(0, named=True)
    assert (latest["ds"], latest["status"]) == (DAY, "failed") and str(bad) in latest["detail"]
    assert _published_reo(cfg_path) == []  # the old numbers left the published view


def test_a_day_whose_inputs_cannot_be_listed_is_recorded_failed(tmp_path, monkeypatch):
    from fairmon.pipelines.executor import publishing
    from fairmon.pipelines.executor.days import run_day
    from fairmon.pipelines.storage.warehouse import latest_runs
    from fairmon.transforms.contract import InputContractError

    cfg_path = _sim(tmp_path / "sim")
    assert run_day(str(cfg_path), DAY)["status"] == "published"

    def broken(cfg, ds):
        raise InputContractError("cannot list", file="x.csv")

    monkeypatch.setattr(publishing, "current_inputs", broken)
    out = run_day(str(cfg_path), DAY)
    assert out["status"] == "failed" and "x.csv: cannot list" in out["error"]
    runs = latest_runs(load_config(cfg_path).duckdb_path)
    assert runs.row(0, named=True)["status"] == "failed"
    assert _published_reo(cfg_path) == []


# ---- item 2: the same rows in two of a day's files --------------------------------------------------


def test_a_pool_copied_under_a_second_name_quarantines_the_day_naming_both_files(tmp_path):
    from fairmon.pipelines.executor.days import run_day

    cfg_path = _sim(tmp_path / "sim")
    (pool,) = (cfg_path.parent / "random").glob("random_*.csv")
    copy = pool.with_name(f"random_{DAY}_{DAY}.csv")  # same rows, another declared range inside the window
    shutil.copy(pool, copy)
    out = run_day(str(cfg_path), DAY)
    assert out["status"] == "quarantined"
    assert "rows_unique_across_files" in out["error"]
    assert f"random/{pool.name}" in out["error"] and f"random/{copy.name}" in out["error"]
    assert _published_reo(cfg_path) == []
    copy.unlink()  # without the copy the day publishes its n of random traffic once
    out = run_day(str(cfg_path), DAY)
    assert out["status"] == "published"
    assert {r["n_rand"] for r in out["reo"]} == {SPEC.random_rows_per_day * SPEC.random_pool_days}
