"""The executor in process (DESIGN §1 "One executor"): days run with no Prefect API and no server, and publish
the partitions the Prefect path publishes."""

import datetime as dt
from pathlib import Path

import polars as pl
import pytest

from fairmon.pipelines.core.config import load_config
from fairmon.pipelines.simulation.simulated import write_simulation
from fairmon.transforms.simulators.impressions import SimulationSpec

SPEC = SimulationSpec(days=3, rows_per_day=3000, random_rows_per_day=1500, random_pool_days=3, seed=11)
DAYS = [SPEC.start + dt.timedelta(days=i) for i in range(3)]


def _no_prefect(monkeypatch) -> list[str]:
    """Make every way into Prefect's runtime fail loudly and record it: its
    temporary server (fairmon's launcher and Prefect's own), a flow or task run."""
    import prefect.flow_engine
    import prefect.server.api.server
    import prefect.task_engine

    from fairmon.pipelines.orchestration import prefect_guard

    used: list[str] = []

    def refuse(what):
        def call(*args, **kwargs):
            used.append(what)
            raise AssertionError(f"{what} used by an in-process run")

        return call

    monkeypatch.setattr(prefect_guard, "launch_temporary_server", refuse("launch_temporary_server"))
    monkeypatch.setattr(prefect.server.api.server.SubprocessASGIServer, "start", refuse("server"))
    monkeypatch.setattr(prefect.task_engine, "run_task", refuse("task run"))
    monkeypatch.setattr(prefect.flow_engine, "run_flow", refuse("flow run"))
    return used


def _partitions(warehouse: Path) -> dict[str, pl.DataFrame]:
    """{table/ds=...: its rows without run_id} of every published partition."""
    return {
        str(p.parent.relative_to(warehouse)): pl.read_parquet(p).drop("run_id")
        for p in sorted(warehouse.glob("*/ds=*/part-0.parquet"))
    }


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_run_day_runs_in_process_without_prefect(tmp_path, monkeypatch):
    from fairmon.pipelines.executor.days import run_day, run_days

    used = _no_prefect(monkeypatch)
    cfg_path = write_simulation(SPEC, tmp_path / "sim", "csv")["config"]
    day = run_day(str(cfg_path), DAYS[0])  # a day alone: its files staged by the executor itself
    assert day["status"] == "published" and day["ds"] == DAYS[0]
    assert [(r["arm"], r["attribute"], r["K"]) for r in day["reo"]] == [("all", "young_adult", 2)]
    assert all(0.0 <= r["reo"] <= 1.0 for r in day["reo"])
    rest = run_days(load_config(cfg_path), DAYS[1:], config_path=str(cfg_path))  # a batch of two
    assert [r["status"] for r in rest] == ["published", "published"]
    assert used == []
    parts = _partitions(tmp_path / "sim" / "warehouse")
    assert {k.split("/")[0] for k in parts} == {"dq_results", "group_counts", "reo", "reo_group"}
    assert sorted({k.split("/")[1] for k in parts}) == [f"ds={d}" for d in DAYS]


@pytest.mark.usefixtures("prefect_harness")
def test_in_process_and_prefect_publish_the_same_partitions(tmp_path, monkeypatch):
    from fairmon.pipelines.orchestration.runner import run_days

    paths = {name: write_simulation(SPEC, tmp_path / name, "csv")["config"] for name in ("prefect", "alone")}
    with_prefect = run_days(load_config(paths["prefect"]), DAYS, config_path=str(paths["prefect"]))
    with_prefect += run_days(
        load_config(paths["prefect"]), DAYS[:1], config_path=str(paths["prefect"]), force_ingest=True
    )
    used = _no_prefect(monkeypatch)
    cfg = load_config(paths["alone"])
    alone = run_days(cfg, DAYS, config_path=str(paths["alone"]), prefect=False)
    alone += run_days(cfg, DAYS[:1], config_path=str(paths["alone"]), prefect=False, force_ingest=True)
    assert used == []
    assert [r["status"] for r in with_prefect] == [r["status"] for r in alone] == ["published"] * 4
    assert [r["reo"] for r in with_prefect] == [r["reo"] for r in alone]
    a, b = _partitions(tmp_path / "prefect" / "warehouse"), _partitions(tmp_path / "alone" / "warehouse")
    assert len(a) == 3 * 4 and list(a) == list(b)
    for key, frame in a.items():
        other = b[key]
        if key.startswith("dq_results"):  # subjects name the file: the two copies live in two folders
            frame, other = (
                f.with_columns(pl.col("subject").str.replace(r".*/(alone|prefect)/", "")) for f in (frame, other)
            )
        assert frame.equals(other, null_equal=True), key


_FREEZE = """
import gc, sys
import fairmon
from fairmon.pipelines.executor import days
seen = []
thaw = days.thaw
def recording():
    seen.append(gc.get_freeze_count())
    thaw()
days.thaw = recording
first = fairmon.run_day(sys.argv[1], sys.argv[2])["status"]
after_first = gc.get_freeze_count()
second = fairmon.run_day(sys.argv[1], sys.argv[3])["status"]
print(first, second, seen[0] > 100_000, seen[1:], after_first, gc.get_freeze_count())
"""


@pytest.mark.slow
def test_gx_objects_are_frozen_out_of_the_collector_for_the_first_run_only(tmp_path):
    """In a fresh process, the objects alive when GX has loaded (its modules'
    ~300,000 and more) are out of the collector's walks until that run ends,
    then back in (nothing stays frozen for the caller); a second run in the
    process freezes nothing."""
    import os
    import subprocess
    import sys

    cfg_path = write_simulation(SPEC, tmp_path / "sim", "csv")["config"]
    env = {**os.environ, "GX_ANALYTICS_ENABLED": "False"}
    env.pop("PREFECT_API_URL", None)
    out = subprocess.run(
        [sys.executable, "-c", _FREEZE, str(cfg_path), str(DAYS[0]), str(DAYS[1])],
        capture_output=True,
        text=True,
        env=env,
    )
    assert out.stdout.split("\n")[-2] == "published published True [0] 0 0", out.stdout + out.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the GX preload thread's exit
def test_a_librarys_sys_exit_inside_a_run_fails_it_with_its_cause(tmp_path, monkeypatch):
    """A library that calls ``sys.exit(0)`` inside a run (as PySpark's Spark Connect import did under
    ``python -c``) made the process end with exit code 0 and nothing published. The run now raises
    LibraryExitError naming the caller of ``sys.exit``, publishes nothing, and the next run publishes."""
    import sys

    from fairmon.pipelines.checks import gate
    from fairmon.pipelines.executor.days import LibraryExitError, run_day

    cfg_path = write_simulation(SPEC, tmp_path / "sim", "csv")["config"]
    real = gate.import_gx

    def exits(spark: bool = False):
        sys.exit(0)

    monkeypatch.setattr(gate, "import_gx", exits)
    with pytest.raises(LibraryExitError, match=r"sys\.exit\(0\) called by .*test_executor\.py:\d+ inside the run"):
        run_day(str(cfg_path), DAYS[0])
    assert _partitions(tmp_path / "sim" / "warehouse") == {}
    monkeypatch.setattr(gate, "import_gx", real)
    assert run_day(str(cfg_path), DAYS[0])["status"] == "published"


def test_a_day_cut_short_by_ctrl_c_is_recorded_failed_saying_so(tmp_path):
    """A backfill stopped by Ctrl-C recorded its current day failed with a blank reason (the report then said
    "its latest run failed: " and nothing more)."""
    from fairmon.pipelines.executor.batch import Batch, Day, finish_day
    from fairmon.pipelines.executor.publishing import start_record
    from fairmon.pipelines.storage.warehouse import latest_runs

    cfg = load_config(write_simulation(SimulationSpec(days=1, rows_per_day=500), tmp_path / "sim", "csv")["config"])
    ds = SimulationSpec().start
    recorded, _ = start_record(cfg, "", "r-int", ds, {"ds": ds})
    with pytest.raises(KeyboardInterrupt):
        finish_day(Batch(cfg), Day(ds, run_id="r-int", recorded=recorded, error=KeyboardInterrupt()))
    (run,) = latest_runs(cfg.duckdb_path).iter_rows(named=True)
    assert (run["status"], run["detail"]) == (
        "failed",
        "interrupted (KeyboardInterrupt): not published; run the day again (backfill --only-failed)",
    )
