"""The command line as scripts use it (issue 18 item 2): documented exit codes,
``--json`` parsed back, ``init`` → ``backfill``, ``FAIRMON_CONFIG``,
``fairmon sql`` while another process holds the project's DuckDB file, and a
demo folder whose privacy ledger does not block the next demo run."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time

import duckdb
import polars as pl
import pytest
from typer.testing import CliRunner

from fairmon.pipelines.faces.cli import (
    EXIT_FAILED,
    EXIT_LOCKED,
    EXIT_PUBLISHED,
    EXIT_QUARANTINED,
    EXIT_USAGE,
    app,
    exit_code,
)
from fairmon.pipelines.faces.templates import FORMATS, config_template
from fairmon.pipelines.simulation.simulated import write_simulation
from fairmon.transforms.simulators.impressions import SimulationSpec

SPEC = SimulationSpec(start=dt.date(2026, 3, 1), days=3, rows_per_day=4000, random_rows_per_day=2000, seed=5)
DAYS = ["--start", "2026-03-01", "--end", "2026-03-02"]
DAYS_RANGE = ["2026-03-01", "2026-03-02"]


def test_exit_code_of_day_summaries():
    assert exit_code([]) == EXIT_PUBLISHED
    assert exit_code([{"status": "published"}, {"status": "quarantined"}]) == EXIT_QUARANTINED
    assert exit_code([{"status": "quarantined"}, {"status": "failed"}, {"status": "published"}]) == EXIT_FAILED
    assert (EXIT_USAGE, EXIT_LOCKED) == (2, 5)


def test_init_templates_are_valid_configs(tmp_path):
    from fairmon.pipelines.core.config import load_config

    for fmt in FORMATS:
        path = tmp_path / fmt / "fairmon.toml"
        res = CliRunner().invoke(app, ["init", "--format", fmt, "-o", str(path)])
        assert res.exit_code == 0, res.output
        assert path.read_text() == config_template(fmt)
        cfg = load_config(path)
        assert cfg.impressions.format == fmt and cfg.impressions.pool_policy == "contained"  # the default
        reserved = {
            r[0]
            for r in duckdb.sql(
                "select keyword_name from duckdb_keywords() where keyword_category = 'reserved'"
            ).fetchall()
        }
        assert not {c.lower() for c in [*cfg.impressions.attributes, *cfg.impressions.signals]} & reserved
    res = CliRunner().invoke(app, ["init", "--format", "tiktok", "-o", str(tmp_path / "tiktok" / "fairmon.toml")])
    assert res.exit_code == EXIT_USAGE and "exists" in res.output
    res = CliRunner().invoke(app, ["init", "--format", "excel", "-o", str(tmp_path / "x.toml")])
    assert res.exit_code == EXIT_USAGE


def test_version_and_python_m():
    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.startswith("fairmon ")
    out = subprocess.run([sys.executable, "-m", "fairmon", "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout == res.output


def test_sample_size_json():
    res = CliRunner().invoke(app, ["sample-size", "--alpha", "0.2", "--json"])
    doc = json.loads(res.stdout)
    assert doc["private"] >= doc["nonprivate"] > 0 and doc["ratio"] <= 6.34


def test_envy_plan_json():
    """Seed 004 Th. 2 at δ = 0.05, λ = γ = 0.2: M̃ = ⌈ln(60)/0.2⌉ = 21, K = ⌈ln(1260)/ln(1.25)⌉ = ⌈31.99⌉ = 32."""
    res = CliRunner().invoke(app, ["envy-plan", "--delta", "0.05", "--lambda", "0.2", "--gamma", "0.2", "--json"])
    assert res.exit_code == 0
    doc = json.loads(res.stdout)
    assert (doc["M_tilde"], doc["K"]) == (21, 32) and doc["delta_per_user"] == pytest.approx(0.05 / 63)
    assert CliRunner().invoke(app, ["envy-plan", "--lambda", "1.5"]).exit_code == 2


@pytest.mark.usefixtures("prefect_harness")
def test_init_backfill_json_exit_codes_and_sql_under_lock(tmp_path, monkeypatch):
    sim = tmp_path / "sim"
    write_simulation(SPEC, sim, "csv")
    (sim / "fairmon.toml").unlink()
    runner = CliRunner()
    assert runner.invoke(app, ["init", "--format", "tiktok", "-o", str(sim / "fairmon.toml")]).exit_code == 0
    toml = sim / "fairmon.toml"  # the simulated pools span the days: a backfill of them reads overlapping pools
    toml.write_text(toml.read_text().replace('pool_policy = "contained"', 'pool_policy = "overlap"'))
    env = {"FAIRMON_CONFIG": str(sim / "fairmon.toml")}

    res = runner.invoke(app, ["backfill", *DAYS, "--json"], env=env)
    doc = json.loads(res.stdout)  # one JSON document on stdout; the progress and summary went to stderr
    assert res.exit_code == EXIT_PUBLISHED == doc["exit_code"]
    assert [d["status"] for d in doc["days"]] == ["published", "published"]
    assert {r["attribute"] for r in doc["days"][0]["reo"]} == {"young_adult"}
    assert "Run summary" in res.stderr

    # one parent flow run; each day its task run fairmon-daily/<ds>, with the day's artifacts
    assert _flow_run_state("fairmon-backfill/2026-03-01..2026-03-02") == ("Completed", "COMPLETED")
    parent_run = _flow_run("fairmon-backfill/2026-03-01..2026-03-02")
    parent = parent_run.id
    # the run names its project and kind in tags, and its config among its parameters (issue 41)
    assert sorted(parent_run.tags) == ["backfill", "fairmon", "project:sim"]
    assert parent_run.parameters["config_path"] == str(toml.resolve())
    for ds in DAYS_RANGE:
        assert _task_run_state(f"fairmon-daily/{ds}", parent) == ("Completed", "COMPLETED")
        _assert_artifacts(ds, _task_run(f"fairmon-daily/{ds}", parent).id)  # recorded meanwhile, in the day's run
    # a backfill day's steps are plain calls, not task runs of their own (each cost the server a run and events)
    assert sorted(_task_run_names(parent)) == [f"fairmon-daily/{ds}" for ds in DAYS_RANGE]

    res = runner.invoke(app, ["sql", 'select ds, "group", n from group_counts order by all', "--json"], env=env)
    rows = json.loads(res.stdout)["rows"]
    assert res.exit_code == 0 and len(rows) == 2 * 2 * 2  # 2 days x default/random x 2 groups
    # every column of a wide table at 80 columns: in parts, each number whole, to 6 significant digits
    res = runner.invoke(app, ["sql", "select * from reo order by all"], env={**env, "COLUMNS": "80"})
    assert res.exit_code == 0 and "…" not in res.stdout and "(continued)" in res.stdout, res.stdout
    doc = json.loads(runner.invoke(app, ["sql", "select * from reo order by all", "--json"], env=env).stdout)
    assert all(f"│ {row['reo']:.6g} " in res.stdout for row in doc["rows"]), res.stdout
    # the column named group unquoted: DuckDB's parser error, and how to write it
    res = runner.invoke(app, ["sql", "select group from group_counts"], env=env)
    assert res.exit_code == EXIT_USAGE and 'a column named group is written "group"' in res.stderr, res.stderr

    # a day alone is the flow run fairmon-daily/<ds>, with the same artifacts
    assert runner.invoke(app, ["run", "--date", "2026-03-01"], env=env).exit_code == EXIT_PUBLISHED
    _assert_prefect_records("2026-03-01")
    day_run = _flow_run("fairmon-daily/2026-03-01")
    assert sorted(day_run.tags) == ["daily", "fairmon", "project:sim"]
    assert day_run.parameters["config_path"] == str(toml.resolve())
    steps = {name.rsplit("-", 1)[0] for name in _task_run_names(day_run.id)}
    assert {"count-groups", "check-day", "estimate-reo", "check-outputs", "publish-day"} <= steps

    # a quarantined day (a value the raw suite refuses): a run of that day alone is refused by the pre-flight
    # value scan before any flow runs (exit 1, in the JSON too); in a backfill with a good day the range runs
    # and the gate quarantines it, its task run's state named
    bad = sim / "default" / "2026-03-02.csv"
    first = pl.col("share").cast(pl.String)
    pl.read_csv(bad).with_columns(
        pl.when(pl.int_range(pl.len()) == 0).then(pl.lit("often")).otherwise(first).alias("share")
    ).write_csv(bad)
    res = runner.invoke(app, ["run", "--date", "2026-03-02", "--json"], env=env)
    assert res.exit_code == EXIT_QUARANTINED == json.loads(res.stdout)["exit_code"]
    assert json.loads(res.stdout)["days"][0]["stage"] == "preflight"
    assert "column 'share', row 1: 'often'" in res.stderr
    assert "accepted: 0, 1, true, false, t, f, 1.0, 0.0" in res.stderr
    assert "DayQuarantined" not in res.stderr  # a named state, not an exception's traceback in the logs
    res = runner.invoke(app, ["backfill", *DAYS, "--json"], env=env)
    assert [d["status"] for d in json.loads(res.stdout)["days"]] == ["published", "quarantined"]
    parent = _flow_run("fairmon-backfill/2026-03-01..2026-03-02").id
    assert _task_run_state("fairmon-daily/2026-03-02", parent) == ("Quarantined", "FAILED")

    # a missing input: the pre-flight check's error, naming the day's own path and the key, before Prefect runs
    (sim / "default" / "2026-03-03.csv").unlink()
    res = runner.invoke(app, ["run", "--date", "2026-03-03"], env=env)
    assert res.exit_code == EXIT_QUARANTINED
    assert "error: no default-traffic file for 2026-03-03: default/2026-03-03.csv does not exist" in res.stderr
    assert "[impressions] path" in res.stderr

    # a crash inside the day: exit 4
    from fairmon.pipelines.executor import batch

    def boom(*args, **kwargs):
        raise RuntimeError("estimator crashed")

    monkeypatch.setattr(batch, "estimate", boom)
    res = runner.invoke(app, ["run", "--date", "2026-03-01"], env=env)
    assert res.exit_code == EXIT_FAILED and "estimator crashed" in res.stderr
    monkeypatch.undo()

    # another process holds the project's DuckDB file: run answers 5, sql still reads the warehouse
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from pathlib import Path\n"
            "from fairmon.pipelines.storage import db\n"
            "from fairmon.pipelines.storage.locking import project_lock\n"
            "p = Path(sys.argv[1])\n"
            "with project_lock(p / 'fairmon.duckdb', p / 'warehouse'), db.connect(p / 'fairmon.duckdb'):\n"
            "    print('held', flush=True); time.sleep(60)\n",
            str(sim),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        t0 = time.perf_counter()
        res = runner.invoke(app, ["run", "--date", "2026-03-01"], env=env)
        assert res.exit_code == EXIT_LOCKED, res.stderr
        res = runner.invoke(app, ["sql", "select count(*) as n from reo"], env=env)
        assert res.exit_code == 0, res.stderr
        assert "run history not read" in res.stderr and "│ 2 " in res.stdout
        assert time.perf_counter() - t0 < 30
    finally:
        holder.kill()
        holder.wait()
    res = runner.invoke(app, ["sql", "create table x as select 1"], env=env)
    assert res.exit_code == EXIT_USAGE and "not a query" in res.stderr


def _prefect(query):
    """Run ``query(client)`` (a coroutine function) with Prefect's async client."""
    import asyncio

    from prefect.client.orchestration import get_client

    async def go():
        async with get_client() as client:
            return await query(client)

    return asyncio.run(go())


def _flow_run(name: str):
    """The latest flow run called ``name``."""
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName
    from prefect.client.schemas.sorting import FlowRunSort

    runs = _prefect(
        lambda c: c.read_flow_runs(
            flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[name])),
            sort=FlowRunSort.START_TIME_DESC,
            limit=50,
        )
    )
    return runs[0]


def _flow_run_state(name: str) -> tuple[str, str]:
    """(state name, state type) of the latest flow run called ``name``."""
    run = _flow_run(name)
    return run.state.name, run.state.type.value


def _task_run_state(name: str, flow_run_id) -> tuple[str, str]:
    """(state name, state type) of the task run called ``name`` in flow run
    ``flow_run_id``."""
    run = _task_run(name, flow_run_id)
    return (run.state.name, run.state.type.value) if run is not None else ("not recorded", "")


def _task_run(name: str, flow_run_id):
    """The task run called ``name`` in flow run ``flow_run_id`` once its final
    state is recorded (task states arrive as events: waits up to 10 s), or None."""
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId, TaskRunFilter, TaskRunFilterName
    from prefect.client.schemas.sorting import TaskRunSort

    for _ in range(100):
        runs = _prefect(
            lambda c: c.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
                task_run_filter=TaskRunFilter(name=TaskRunFilterName(any_=[name])),
                sort=TaskRunSort.EXPECTED_START_TIME_DESC,
                limit=10,
            )
        )
        if runs and runs[0].state is not None and runs[0].state.is_final():
            return runs[0]
        time.sleep(0.1)
    return None


def _task_run_names(flow_run_id) -> list[str]:
    """Names of every task run recorded in flow run ``flow_run_id``."""
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.client.schemas.sorting import TaskRunSort

    runs = _prefect(
        lambda c: c.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
            sort=TaskRunSort.NAME_ASC,
            limit=200,
        )
    )
    return [r.name for r in runs]


def _assert_prefect_records(ds: str) -> None:
    """The day's flow run is named fairmon-daily/<ds> and left its two artifacts."""
    assert _flow_run_state(f"fairmon-daily/{ds}") == ("Completed", "COMPLETED")
    _assert_artifacts(ds)


def _assert_artifacts(ds: str, task_run_id=None) -> None:
    """The day left its two artifacts (fairmon-<project>-reo-<ds>, fairmon-<project>-outputs-<ds>; the
    project is the config's folder, ``sim``), attached to the day's task run ``task_run_id`` when given."""
    keys = [f"fairmon-sim-reo-{ds}", f"fairmon-sim-outputs-{ds}"]

    async def latest(client):  # the REST call itself: this client's filter objects send fields the server rejects
        r = await client._client.post("/artifacts/latest/filter", json={"artifacts": {"key": {"any_": keys}}})
        return r.json()

    by_key = {a["key"]: a for a in _prefect(latest)}
    assert set(by_key) == set(keys)
    assert by_key[keys[0]]["type"] == "table" and "young_adult" in by_key[keys[0]]["data"]
    assert "file://" in by_key[keys[1]]["data"]
    if task_run_id is not None:
        assert {a["task_run_id"] for a in by_key.values()} == {str(task_run_id)}


def test_ab_view_reads_the_interval_not_the_point():
    from rich.console import Console

    from fairmon.pipelines.faces.views import ab_view

    base = {"attribute": "a", "control": "c", "metric": "reo", "method": "delta", "p_value": 0.01, "q_value": 0.02}
    rows = [
        {**base, "treatment": "up", "diff": 0.05, "ci_low": 0.01, "ci_high": 0.09},
        {**base, "treatment": "down", "diff": -0.05, "ci_low": -0.09, "ci_high": -0.01, "p_value": 2.4e-54},
        {**base, "treatment": "flat", "diff": 0.08, "ci_low": -0.01, "ci_high": 0.17},
        {**base, "treatment": "nan", "diff": 0.1, "ci_low": float("nan"), "ci_high": float("nan"), "reason": "Q_k = 0"},
        {**base, "treatment": "other", "method": "bootstrap", "diff": 0.05, "ci_low": 0.01, "ci_high": 0.09},
    ]
    console = Console(width=200, record=True)
    console.print(ab_view(rows, "A/B"))
    text = console.export_text()
    lines = {ln.split("│")[3].strip(): ln for ln in text.splitlines() if ln.count("│") > 5}
    assert "REO higher in treatment" in lines["up"] and "REO lower in treatment" in lines["down"]
    assert "no detectable change" in lines["flat"] and "undefined [1]" in lines["nan"]
    assert text.count("Q_k = 0") == 1 and "[1] Q_k = 0" in text  # the reason as a footnote, said once
    assert "other" not in lines  # one method per table: the configured headline
    # p and q as the report writes them: two digits, "< 0.001" below (it printed 0.000 beside the REO table's 2.4e-54)
    assert " 0.01 " in lines["up"] and " 0.02 " in lines["up"]
    assert " < 0.001 " in lines["down"] and "0.000" not in lines["down"]


def test_prune_gx_deletes_only_old_validation_files(tmp_path):
    import os

    from fairmon.pipelines.checks.gate import prune_gx
    from fairmon.pipelines.core.config import load_config

    base = tmp_path / "gx" / "uncommitted"
    old = base / "validations" / "reo" / "run1" / "a.json"
    new = base / "data_docs" / "local_site" / "validations" / "reo" / "run2" / "b.html"
    keep = base / "data_docs" / "local_site" / "index.html"
    for f in (old, new, keep):
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("x")
    now = time.time()
    os.utime(old, (now - 40 * 86400, now - 40 * 86400))
    os.utime(keep, (now - 40 * 86400, now - 40 * 86400))
    assert prune_gx(tmp_path, keep_days=30, now=now) == 1
    assert not old.exists() and not old.parent.exists() and new.exists() and keep.exists()
    (tmp_path / "c.toml").write_text(config_template("tiktok") + "\n[gx]\nkeep_days = 7\n")
    assert load_config(tmp_path / "c.toml").gx.keep_days == 7


@pytest.mark.slow
@pytest.mark.parametrize("wait", [8, 0])  # 0: while Prefect's temporary API is still starting
def test_serve_stops_cleanly_on_sigterm(tmp_path, wait):
    import signal

    sim = tmp_path / "sim"
    write_simulation(SPEC, sim, "csv")
    env = {**__import__("os").environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "fairmon", "serve", "-c", str(sim / "fairmon.toml")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert "serving deployment fairmon-daily" in proc.stdout.readline()
        time.sleep(wait)  # 8: the runner polls its schedule
        proc.send_signal(signal.SIGTERM)
        out, errs = proc.communicate(timeout=90)
    finally:
        proc.kill()
    assert proc.returncode == 0, errs[-2000:]
    assert "fairmon serve stopped" in out and "never awaited" not in errs and "Traceback" not in errs


class _SlowStartingRunner:
    """Prefect's Runner as serve_until_stopped uses it: ``start`` spends
    ``setup`` seconds (client, API checks) before it is ``started``, then
    polls until cancelled; ``astop`` refuses a runner not started yet, as
    prefect.runner.Runner.astop does."""

    setup = 0.5
    made: list = []

    def __init__(self, pause_on_shutdown: bool):
        self.started = self.stopped = False
        _SlowStartingRunner.made.append(self)

    async def aadd_deployment(self, deployment) -> None:
        return None

    async def start(self) -> None:
        import asyncio

        await asyncio.sleep(self.setup)
        self.started = True
        try:
            await asyncio.Event().wait()
        finally:
            self.started = False

    async def astop(self) -> None:
        if not self.started:
            raise RuntimeError("Runner has not yet started. Please start the runner by calling .start()")
        self.stopped = True


@pytest.mark.parametrize("stop_after", [0.1, 0.8])  # while the runner starts; once it polls
@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_a_stop_while_the_runner_starts_waits_for_it_then_stops_it(monkeypatch, stop_after):
    """``fairmon serve`` got SIGTERM 8 s in, before Prefect's runner had
    finished starting on a loaded machine: Runner.astop raised "Runner has
    not yet started" and serve exited 1 (CI, session 34). A stop now lets the
    runner finish starting, then stops it with its own shutdown."""
    import asyncio
    import os
    import signal

    import prefect.runner

    from fairmon.pipelines.orchestration.ops import serve_until_stopped

    monkeypatch.setattr(prefect.runner, "Runner", _SlowStartingRunner)
    _SlowStartingRunner.made.clear()

    async def main() -> float:
        asyncio.get_running_loop().call_later(stop_after, os.kill, os.getpid(), signal.SIGTERM)
        t0 = time.perf_counter()
        await serve_until_stopped(object())
        return time.perf_counter() - t0

    took = asyncio.run(main())
    (runner,) = _SlowStartingRunner.made
    assert runner.stopped and not runner.started  # stopped by astop, its start unwound
    assert max(stop_after, _SlowStartingRunner.setup) <= took < 5


_EXIT_SCRIPT = """
import atexit, sys, threading, time
atexit.register(lambda: print("exit handler ran", file=sys.stderr))
# where Prefect drains its queued events and logs: run before the atexit handlers
threading._register_atexit(lambda: print("threading exit callback ran", file=sys.stderr))
sys.stdout.write("buffered, no newline")
if sys.argv[1] == "thread":
    threading.Thread(target=time.sleep, args=(0.3,)).start()  # a non-daemon thread: the normal exit
from fairmon.pipelines.faces.cli import main
sys.argv = ["fairmon", *sys.argv[2:]]
main()
"""


@pytest.mark.parametrize("thread", ["none", "thread"])
@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_the_script_exits_with_the_commands_code_after_every_exit_handler(tmp_path, thread):
    """``main`` ends the process without the interpreter's teardown (its last
    garbage collections took ~1.2 s), but with the command's exit code, after
    threading's exit callbacks and then every exit handler (the interpreter's
    order), with the standard streams flushed; with a non-daemon thread still
    running it exits normally."""
    script = tmp_path / "cli.py"
    script.write_text(_EXIT_SCRIPT)
    for args, code in ((["run", "-c", str(tmp_path / "nope.toml"), "--date", "2026-01-01"], 2), (["--help"], 0)):
        res = subprocess.run([sys.executable, str(script), thread, *args], capture_output=True, text=True, timeout=120)
        assert res.returncode == code, res.stderr
        assert res.stdout.startswith("buffered, no newline")
        assert res.stderr.rstrip().endswith("threading exit callback ran\nexit handler ran")
        if code:
            assert "config file not found" in res.stderr


def _same_but_run(doc: dict, root) -> dict:
    """A ``--json`` document without run ids, stage seconds and alert ids and times (an alert id hashes the
    project's name, here its folder's), ``root`` written <ROOT>."""

    def clean(x):
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items() if k not in ("run_id", "timings", "alert_id", "first_seen_at")}
        if isinstance(x, list):
            return [clean(v) for v in x]
        return x.replace(str(root), "<ROOT>") if isinstance(x, str) else x

    return clean(doc)


@pytest.mark.usefixtures("prefect_harness")
def test_in_process_and_through_prefect_give_the_same_json_and_exit_codes(tmp_path):
    """``--no-prefect`` (the default without an API) and through Prefect (an
    API configured: the harness) print the same ``--json`` documents and
    exit with the same codes, run ids and stage seconds apart (issue 37)."""
    docs = {}
    for name, flag in (("prefect", "--prefect"), ("alone", "--no-prefect")):
        write_simulation(SPEC, tmp_path / name, "csv")
        (tmp_path / name / "default" / "2026-03-02.csv").write_text("")  # a quarantined day too
        cfg = str(tmp_path / name / "fairmon.toml")
        ran = CliRunner().invoke(app, ["backfill", "-c", cfg, *DAYS, "--json", flag])
        one = CliRunner().invoke(app, ["run", "-c", cfg, "--date", "2026-03-01", "--json", flag])
        assert (ran.exit_code, one.exit_code) == (EXIT_QUARANTINED, EXIT_PUBLISHED), ran.output
        docs[name] = [_same_but_run(json.loads(r.stdout), tmp_path / name) for r in (ran, one)]
    assert docs["alone"] == docs["prefect"]


def test_tables_prints_the_data_dictionary():
    """fairmon tables: the registry's dictionary (it ships with the wheel, docs/ does not)."""
    from pathlib import Path

    from fairmon.transforms.registry import table

    res = CliRunner().invoke(app, ["tables", "reo"])
    assert res.exit_code == 0, res.output
    for c in table("reo").stored_columns:
        assert c.name in res.stdout
    assert "user-item pairs" in res.stdout and "degrees of freedom" in res.stdout  # units
    assert "reo_group" not in res.stdout.replace("reo_published", "")  # one table only
    assert "gate: generated checks and expectations/reo.json" in " ".join(res.stdout.split())  # as --help says

    res = CliRunner().invoke(app, ["tables", "no_such_table"])
    assert res.exit_code == EXIT_USAGE and "reo_group" in res.stderr

    docs = (Path(__file__).resolve().parents[1] / "docs" / "tables.md").read_text()
    section = docs[docs.index("## `reo`\n") : docs.index("## `reo_stage`\n")]
    assert CliRunner().invoke(app, ["tables", "reo", "--markdown"]).stdout == section
    assert CliRunner().invoke(app, ["tables", "--markdown"]).stdout == docs


@pytest.mark.parametrize("width", ["80", "200"])
def test_tables_shows_every_meaning_whole_at_any_width(width):
    """At 80 columns the dictionary lists each column with its meaning below (a table there left the
    meaning one cut word a line); at 200 it is a table. Either way every meaning is there whole, once
    the output's line breaks and frame are taken out."""
    import re

    from fairmon.transforms.registry import table

    res = CliRunner().invoke(app, ["tables", "reo"], env={"COLUMNS": width})
    assert res.exit_code == 0, res.output
    assert "…" not in res.stdout
    assert all(len(line) <= int(width) for line in res.stdout.splitlines())
    if width == "80":
        flat = " ".join(res.stdout.split())
        for c in table("reo").stored_columns:
            assert " ".join(c.meaning.split()) in flat, c.name
    else:
        cells = [re.split(r"\s*│\s*", line.strip("│ ")) for line in res.stdout.splitlines() if line.startswith("│")]
        starts = {row[0]: row[-1] for row in cells if len(row) == 5 and row[0]}
        for c in table("reo").stored_columns:  # a cell's first line: the meaning's start (it wraps, uncut)
            assert c.meaning.startswith(starts[c.name]) and len(starts[c.name]) >= min(40, len(c.meaning)), c.name


def test_an_out_file_can_be_written_again(tmp_path):
    """``report --out FILE`` names a file: an existing one is replaced on the next run (not refused as "a
    file, not a folder"); a folder where a file is asked for, or a read-only folder, still are."""
    import typer

    from fairmon.pipelines.faces.cli_common import out_or_exit

    target = tmp_path / "r.html"
    assert out_or_exit(target, folder=False) == target
    target.write_text("an earlier report")
    assert out_or_exit(target, folder=False) == target
    with pytest.raises(typer.Exit):
        out_or_exit(tmp_path, folder=False)


@pytest.mark.slow
def test_a_crash_no_command_handles_exits_4_not_1(tmp_path):
    """A crash that escapes every command (here a library's ``sys.exit(0)`` inside a run, raised as
    LibraryExitError) ends ``fairmon`` with the documented code of a crash, 4 (EXIT_FAILED), and its
    traceback; Python's own code for an uncaught exception, 1, is fairmon's "quarantined"."""
    sim = tmp_path / "sim"
    write_simulation(SPEC, sim, "csv")
    code = (
        "import sys\n"
        "from fairmon.pipelines.checks import gate\n"
        "from fairmon.pipelines.faces import cli\n"
        "def exits(spark=False):\n"
        "    sys.exit(0)\n"
        "gate.import_gx = exits\n"
        f"sys.argv = ['fairmon', 'run', '--date', '2026-03-01', '-c', {str(sim / 'fairmon.toml')!r}, '--no-prefect']\n"
        "cli.main()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == EXIT_FAILED == 4, out.stderr[-2000:]
    assert "LibraryExitError: sys.exit(0) called by <string>:5 inside the run" in out.stderr
    assert not list((sim / "warehouse").glob("reo/ds=*"))


def test_plan_with_a_zero_rate_says_why_without_numpy_warnings():
    """`plan --P` with a zero rate: U_k = Q_k/P_k is not finite for that group, so the volumes that need
    it are '-' (null in --json); the command says which group and why, and prints no NumPy warning
    (six 'RuntimeWarning: divide by zero' lines with fairmon's source paths came before the table)."""
    import warnings

    argv = ["plan", "--P", "0.0,0.05", "--Q", "0.1,0.25", "--n-rec", "1000", "--rand-per-day", "100"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        res = CliRunner().invoke(app, argv, env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "P_k or Q_k is 0 for group(s) 1: U_k = Q_k/P_k is not finite there" in res.stdout
