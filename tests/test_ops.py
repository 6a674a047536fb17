"""Operations: schedule, backfill selection, idempotency, late data, crash safety, concurrency, logs."""

import datetime as dt
import json
import os
import re
import subprocess
import sys

import duckdb
import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from fairmon.pipelines.core.config import load_config
from fairmon.pipelines.faces.cli import app
from fairmon.pipelines.orchestration.ops import build_deployment, days_to_run, detect_stale, next_runs
from fairmon.pipelines.simulation.simulated import write_simulation
from fairmon.pipelines.storage.locking import run_lock
from fairmon.pipelines.storage.warehouse import partition_path, read_table
from fairmon.transforms.simulators.impressions import SimulationSpec

D0 = dt.date(2026, 6, 1)


def _cfg_text(window=1):
    return (
        'warehouse = "warehouse"\nduckdb = "f.duckdb"\n[impressions]\nformat = "contract"\n'
        'path = "in/{ds}.parquet"\nsignals = ["s1"]\nattributes = ["grp"]\n'
        f"random_window_days = {window}\n[quality]\nsufficiency_epsilon = 0.5\n"
    )


def _write_day(root, ds, rng, bad=False):
    n_def, n_rand = 600, 400
    f = pl.DataFrame(
        {
            "ds": [ds] * (n_def + n_rand),
            "traffic": ["default"] * n_def + ["random"] * n_rand,
            "arm": "all",
            "s1": (rng.random(n_def + n_rand) < 0.3).astype(int),
            "grp": rng.choice(["a", "b"], n_def + n_rand),
        }
    )
    if bad:
        f = f.with_columns(pl.when(pl.int_range(pl.len()) == 3).then(None).otherwise(pl.col("s1")).alias("s1"))
    f.write_parquet(root / "in" / f"{ds}.parquet")


def _runs(root):
    con = duckdb.connect(str(root / "f.duckdb"), read_only=True)
    try:
        return con.sql("SELECT ds, status, params, inputs, timings FROM runs ORDER BY finished_at").pl()
    finally:
        con.close()


# --- schedule ---------------------------------------------------------------------------


def test_deployment_cron_timezone_and_parameters(tmp_path):
    (tmp_path / "f.toml").write_text(_cfg_text())
    dep = build_deployment(tmp_path / "f.toml", "0 6 * * *", "UTC", 1)
    sched = dep.schedules[0].schedule
    assert (sched.cron, sched.timezone) == ("0 6 * * *", "UTC")
    assert dep.parameters == {"config_path": str((tmp_path / "f.toml").resolve()), "lag_days": 1}
    assert dep.name == "fairmon-daily" and dep.flow_name == "fairmon-scheduled"
    assert dep.tags == ["fairmon", "scheduled"]
    after = dt.datetime(2026, 3, 1, 7, 0, tzinfo=dt.UTC)
    runs = next_runs("0 6 * * *", "UTC", 3, after)
    assert [r.isoformat() for r in runs] == [
        "2026-03-02T06:00:00+00:00",
        "2026-03-03T06:00:00+00:00",
        "2026-03-04T06:00:00+00:00",
    ]
    res = CliRunner().invoke(app, ["schedule", "show", "-c", str(tmp_path / "f.toml"), "-n", "2"])
    assert res.exit_code == 0 and "0 6 * * *" in res.output and "computes" in res.output


@pytest.mark.parametrize("lag", [1, 0])
def test_schedule_show_names_the_utc_day_the_job_computes_east_of_utc(tmp_path, lag):
    """06:00 in Tokyo is 21:00 UTC the day before: the job computes the UTC day lag_days before its UTC date
    (ops.scheduled); the listing named the local date minus the lag, a day later than the job."""
    sched = f'[schedule]\ncron = "0 6 * * *"\ntimezone = "Asia/Tokyo"\nlag_days = {lag}\n'
    (tmp_path / "f.toml").write_text(_cfg_text() + sched)
    res = CliRunner().invoke(app, ["schedule", "show", "-c", str(tmp_path / "f.toml"), "-n", "1"])
    when = next_runs("0 6 * * *", "Asia/Tokyo", 1)[0]
    day = when.astimezone(dt.UTC).date() - dt.timedelta(days=lag)
    assert day == when.date() - dt.timedelta(days=lag + 1)
    out = " ".join(res.output.split())
    assert res.exit_code == 0 and f"→ computes {day}" in out, out
    assert ("not over yet" in out) == (lag == 0)


def test_serve_names_the_option_a_bad_cron_came_from_before_starting_prefect(tmp_path):
    """`serve --cron "61 * * * *"` blamed the config's schedule.cron, after starting Prefect's server."""
    (tmp_path / "f.toml").write_text(_cfg_text())
    res = CliRunner().invoke(app, ["serve", "-c", str(tmp_path / "f.toml"), "--cron", "61 * * * *"])
    out = " ".join(res.output.split())
    assert res.exit_code == 2 and 'error: --cron: Value error, Invalid cron string: "61 * * * *"' in out, out


def test_schedule_config_is_validated(tmp_path):
    (tmp_path / "f.toml").write_text(_cfg_text() + '[schedule]\ncron = "30 5 * * *"\nlag_days = 2\n')
    cfg = load_config(tmp_path / "f.toml")
    assert (cfg.schedule.cron, cfg.schedule.lag_days, cfg.schedule.timezone) == ("30 5 * * *", 2, "UTC")


# --- a 30-day backfill with two bad days; --only-failed; idempotency --------------------


@pytest.fixture(scope="module")
def month(tmp_path_factory, prefect_harness):
    root = tmp_path_factory.mktemp("month")
    (root / "in").mkdir()
    rng = np.random.default_rng(5)
    bad = {D0 + dt.timedelta(days=7), D0 + dt.timedelta(days=20)}
    days = [D0 + dt.timedelta(days=i) for i in range(30)]
    for d in days:
        _write_day(root, d, rng, bad=d in bad)
    (root / "f.toml").write_text(_cfg_text())
    res = CliRunner().invoke(
        app,
        ["backfill", "-c", str(root / "f.toml"), "--start", str(days[0]), "--end", str(days[-1]), "--concurrency", "2"],
    )
    return root, days, bad, res


def test_30_day_backfill_publishes_28_and_quarantines_2(month):
    root, days, bad, res = month
    assert res.exit_code == 1
    lines = [ln for ln in res.output.splitlines() if ln.startswith("│ 2026")]
    assert sum("published" in ln for ln in lines) == 28
    quarantined = [ln for ln in lines if "quarantined" in ln]
    assert len(quarantined) == 2
    summary = res.output[res.output.index("Run summary") : res.output.index("alert ")]
    assert summary.count("signal_not_null[s1]") == 2
    alerts = [ln for ln in res.output.splitlines() if ln.startswith("alert ")]  # one per day: not consecutive
    assert [ln.split(":")[0] for ln in alerts] == [f"alert {d} quarantined at stage impressions" for d in sorted(bad)]
    assert {dt.date.fromisoformat(ln[2:12]) for ln in quarantined} == bad
    assert sorted(read_table(root / "warehouse", "reo").get_column("ds").to_list()) == sorted(set(days) - bad)
    assert "profiled 30 impressions file(s) in one scan, staged 28, counted 30 day(s)" in res.output


def test_only_failed_touches_only_the_failed_days(month):
    root, days, bad, _ = month
    cfg = load_config(root / "f.toml")
    assert days_to_run(cfg, days[0], days[-1], only_failed=True) == sorted(bad)
    before = _runs(root).height
    res = CliRunner().invoke(
        app, ["backfill", "-c", str(root / "f.toml"), "--start", str(days[0]), "--end", str(days[-1]), "--only-failed"]
    )
    runs = _runs(root)
    new = runs.tail(runs.height - before)
    assert sorted(new.get_column("ds").to_list()) == sorted(bad)  # exactly the two days, nothing else
    assert set(new.get_column("status")) == {"quarantined"} and res.exit_code == 1
    # fix the files: --only-failed now publishes them, and then has nothing left to do
    rng = np.random.default_rng(9)
    for d in bad:
        _write_day(root, d, rng)
    res = CliRunner().invoke(
        app, ["backfill", "-c", str(root / "f.toml"), "--start", str(days[0]), "--end", str(days[-1]), "--only-failed"]
    )
    assert res.exit_code == 0
    assert sum("published" in ln for ln in res.output.splitlines() if ln.startswith("│ 2026")) == 2
    assert days_to_run(cfg, days[0], days[-1], only_failed=True) == []


def test_runs_record_inputs_and_parameters_and_reruns_are_identical(month):
    root, days, bad, _ = month
    d = days[3]
    first = pl.read_parquet(partition_path(root / "warehouse", "reo", d)).drop("run_id")
    res = CliRunner().invoke(app, ["run", "-c", str(root / "f.toml"), "--date", str(d), "--force-ingest"])
    assert res.exit_code == 0
    second = pl.read_parquet(partition_path(root / "warehouse", "reo", d)).drop("run_id")
    assert second.equals(first)
    assert read_table(root / "warehouse", "reo").filter(pl.col("ds") == d).height == 1  # no duplicate row
    last = _runs(root).filter(pl.col("ds") == d).tail(1).row(0, named=True)
    inputs = json.loads(last["inputs"])
    assert inputs[0]["file"].endswith(f"{d}.parquet") and inputs[0]["rows"] == 1000 and inputs[0]["size"] > 0
    assert json.loads(last["params"])["estimation"]["ci_method"] == "delta"
    timings = json.loads(last["timings"])  # wall seconds per stage (pipelines/core/timing.py)
    assert set(timings) == {"ingest", "checks", "counts", "estimators", "writes"}
    assert all(v >= 0 for v in timings.values()) and timings["ingest"] > 0 and timings["checks"] > 0


# --- late data --------------------------------------------------------------------------


@pytest.mark.usefixtures("prefect_harness")
def test_late_data_marks_dependent_days_stale_and_only_stale_recomputes_them(tmp_path):
    spec = SimulationSpec(start=D0, days=5, rows_per_day=3000, random_rows_per_day=1500, random_pool_days=2, seed=1)
    paths = write_simulation(spec, tmp_path / "sim", "csv")  # pools [1,2], [3,4], [5]; window 2 days
    cfg_path = paths["config"]
    days = [D0 + dt.timedelta(days=i) for i in range(5)]
    r = CliRunner().invoke(app, ["backfill", "-c", str(cfg_path), "--start", str(days[0]), "--end", str(days[-1])])
    assert r.exit_code == 0, r.output
    cfg = load_config(cfg_path)
    assert detect_stale(cfg).height == 0
    # late default traffic for day 2 only affects day 2
    f = tmp_path / "sim" / "default" / f"{days[1]}.csv"
    pl.read_csv(f).head(2000).write_csv(f)
    assert sorted(set(detect_stale(cfg).get_column("ds").to_list())) == [days[1]]
    # a late change to the pool of days 3-4 affects every day whose 2-day window reaches it: 3, 4 and 5
    pool = tmp_path / "sim" / "random" / f"random_{days[2]}_{days[3]}.csv"
    pl.read_csv(pool).head(2500).write_csv(pool)
    detect_stale(cfg)
    assert days_to_run(cfg, days[0], days[-1], only_stale=True) == [days[1], days[2], days[3], days[4]]
    runs_before = _count_runs(tmp_path / "sim" / "fairmon.duckdb")
    r = CliRunner().invoke(
        app, ["backfill", "-c", str(cfg_path), "--start", str(days[0]), "--end", str(days[-1]), "--only-stale"]
    )
    assert r.exit_code == 0, r.output
    after = _count_runs(tmp_path / "sim" / "fairmon.duckdb")
    assert {d: after[d] - runs_before.get(d, 0) for d in after} == {
        days[0]: 0,
        days[1]: 1,
        days[2]: 1,
        days[3]: 1,
        days[4]: 1,
    }
    assert days_to_run(cfg, days[0], days[-1], only_stale=True) == []  # published days are no longer stale
    reo = read_table(tmp_path / "sim" / "warehouse", "reo")
    assert reo.filter(pl.col("ds") == days[1]).get_column("n_rec").item() == 2000


def _count_runs(db_path):
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        return dict(con.sql("SELECT ds, count(*) FROM runs GROUP BY ds").fetchall())
    finally:
        con.close()


# --- crash safety (real subprocesses, SIGKILL) and concurrency ------------------------------


def _cli(args, env_extra=None, timeout=300):
    from prefect.settings import PREFECT_API_URL

    env = {
        **os.environ,
        "PREFECT_API_URL": PREFECT_API_URL.value() or "",
        "PREFECT_LOGGING_LEVEL": "INFO",
        **(env_extra or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "fairmon", *args], capture_output=True, text=True, env=env, timeout=timeout
    )


@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize("point", ["parquet_write", "parquet_swap", "publish_record"])
def test_sigkill_leaves_previous_partition_intact_and_next_run_completes(tmp_path, point):
    (tmp_path / "in").mkdir()
    _write_day(tmp_path, D0, np.random.default_rng(1))
    cfg = str(tmp_path / "f.toml")
    (tmp_path / "f.toml").write_text(_cfg_text())
    first = _cli(["run", "-c", cfg, "--date", str(D0)])
    assert first.returncode == 0, first.stderr
    part = partition_path(tmp_path / "warehouse", "reo", D0)
    before = pl.read_parquet(part)
    # new data for the day, then a run killed at the fault point
    _write_day(tmp_path, D0, np.random.default_rng(2))
    killed = _cli(["run", "-c", cfg, "--date", str(D0)], {"FAIRMON_FAULT": point})
    assert killed.returncode == -9
    # every published partition is whole and readable; the DuckDB file opens and holds the old rows
    for table in ("reo", "reo_group", "group_counts", "dq_results"):
        pl.read_parquet(partition_path(tmp_path / "warehouse", table, D0))
    if point in ("parquet_write", "parquet_swap"):  # group_counts is swapped first, reo after it
        assert pl.read_parquet(part).equals(before)
    if point == "parquet_swap":  # a day with mixed run_ids is not reported as published
        from fairmon.pipelines.report.report_data import report_data

        wh = tmp_path / "warehouse"
        gc = read_table(wh, "group_counts")
        assert set(gc.get_column("run_id")) != set(read_table(wh, "dq_results").get_column("run_id"))
        d = report_data(read_table(wh, "reo"), read_table(wh, "reo_group"), read_table(wh, "dq_results"), D0, D0)
        assert d.reo.height == 1  # reo and dq_results still agree (both from the first run)
        assert report_data(
            gc.rename({"n": "n2"}), read_table(wh, "reo_group"), read_table(wh, "dq_results"), D0, D0
        ).reo.is_empty()
    con = duckdb.connect(str(tmp_path / "f.duckdb"), read_only=True)
    try:  # DuckDB reads the Parquet files themselves: the two cannot disagree
        old = con.sql("SELECT reo, run_id FROM reo WHERE ds = $d", params={"d": D0}).fetchall()
        published = con.sql("SELECT * FROM reo_published WHERE ds = $d", params={"d": D0}).fetchall()
    finally:
        con.close()
    assert old == [tuple(pl.read_parquet(part).select("reo", "run_id").row(0))]
    if point != "publish_record":
        assert old == [(before.get_column("reo").item(), before.get_column("run_id").item())]
    # the interrupted run is the day's latest: the day is not published, and --only-failed picks it up
    assert published == []
    assert days_to_run(load_config(cfg), D0, D0, only_failed=True) == [D0]
    # the next run completes the day (and logs each stage with rows and seconds)
    again = _cli(["run", "-c", cfg, "--date", str(D0), "-v"])
    assert again.returncode == 0, again.stderr
    after = pl.read_parquet(part)
    assert after.get_column("reo").item() != before.get_column("reo").item()
    dq = pl.read_parquet(partition_path(tmp_path / "warehouse", "dq_results", D0))
    assert set(dq.get_column("run_id")) == set(after.get_column("run_id"))  # consistent day again
    logs = again.stdout + again.stderr
    for stage in ("ingest", "counts", "estimators", "publish"):
        assert re.search(rf"{stage} .*rows.*\d+\.\d+s", logs), stage


@pytest.mark.usefixtures("prefect_harness")
def test_second_run_on_the_same_duckdb_file_fails_clearly(tmp_path):
    (tmp_path / "in").mkdir()
    _write_day(tmp_path, D0, np.random.default_rng(1))
    (tmp_path / "f.toml").write_text(_cfg_text())
    with run_lock(tmp_path / "f.duckdb"):  # this process is "the first run"
        res = _cli(["run", "-c", str(tmp_path / "f.toml"), "--date", str(D0)])
    assert res.returncode == 5  # lock busy (docs "Exit codes")
    assert "another fairmon run holds" in res.stderr and "--wait" in res.stderr
    assert not (tmp_path / "warehouse" / "reo").exists()  # nothing written by the refused run


def test_prefect_names_carry_the_project(tmp_path):
    """Issue 41: two projects on one Prefect server keep their artifacts and deployments apart; the
    project is ``[project] name`` or the config's folder, made a key Prefect accepts (a-z, 0-9, -)."""
    from fairmon.pipelines.orchestration.flows import artifact_keys, prefect_slug, run_tags
    from fairmon.pipelines.orchestration.ops import deployment_name

    assert prefect_slug("Shorts Ranking_v2 (EU)") == "shorts-ranking-v2-eu"
    assert prefect_slug("--") == "project" and prefect_slug("fr.é.ch") == "fr-ch"
    (tmp_path / "Shorts EU").mkdir()
    folder = tmp_path / "Shorts EU" / "f.toml"
    folder.write_text(_cfg_text())
    cfg = load_config(folder)
    assert cfg.project_name == "Shorts EU"
    assert artifact_keys(cfg, dt.date(2026, 3, 1)) == (
        "fairmon-shorts-eu-reo-2026-03-01",
        "fairmon-shorts-eu-outputs-2026-03-01",
    )
    assert run_tags(cfg, "backfill") == ["fairmon", "project:shorts-eu", "backfill"]
    assert deployment_name(cfg) == "fairmon-daily-shorts-eu"
    named = tmp_path / "n.toml"
    named.write_text(_cfg_text() + '\n[project]\nname = "ads"\n[schedule]\nname = "nightly"\n')
    cfg = load_config(named)
    assert artifact_keys(cfg, dt.date(2026, 3, 1))[0] == "fairmon-ads-reo-2026-03-01"
    assert deployment_name(cfg) == "nightly"  # a name the config sets is kept as it is
    dep = build_deployment(named, "0 6 * * *", "UTC", 1, deployment_name(cfg), cfg.project_name)
    assert (dep.name, dep.tags) == ("nightly", ["fairmon", "project:ads", "scheduled"])
