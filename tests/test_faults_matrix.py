"""Fault and bad-input matrix (issue 40): each case a bad input, path, config or
environment, and what fairmon must do with it: record and unpublish a failed
day naming its cause, quarantine repeated rows naming both files, refuse with
an ``error:`` line and the documented exit code, or warn. Most cases are unit
level; the few that need the whole command line run in a subprocess (slow)."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pytest

from fairmon.pipelines.core.config import load_config
from fairmon.pipelines.simulation.simulated import write_simulation
from fairmon.transforms.simulators.impressions import SimulationSpec

SPEC = SimulationSpec(days=2, rows_per_day=1200, random_rows_per_day=600, random_pool_days=2, seed=5)
DAY = SPEC.start + dt.timedelta(days=1)
#: A console wide enough that a message is one line whatever its temporary path (pytest-xdist adds a folder).
WIDE = {"COLUMNS": "1000"}


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


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
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


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
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


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
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


def _pool_with_three_shared_keys(cfg_path: Path) -> tuple[Path, Path]:
    """The sim's pool and a second pool over DAY alone: 3 of the pool's rows
    and 7 new ones (not a copy of the file). Returns (pool, second)."""
    import polars as pl

    (pool,) = (cfg_path.parent / "random").glob("random_*.csv")
    rows = pl.read_csv(pool, infer_schema=False).head(10)
    fresh = pl.int_range(10) >= 3
    rows = rows.with_columns(pl.when(fresh).then(pl.col("request_id") + "-new").otherwise(pl.col("request_id")))
    second = pool.with_name(f"random_{DAY}_{DAY}.csv")
    rows.write_csv(second)
    return pool, second


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_two_pools_sharing_three_keys_quarantine_the_day_naming_both_files_and_the_count(tmp_path):
    from fairmon.pipelines.executor.days import run_day

    cfg_path = _sim(tmp_path / "sim")
    pool, second = _pool_with_three_shared_keys(cfg_path)
    out = run_day(str(cfg_path), DAY)
    assert out["status"] == "quarantined"
    assert "ids_unique_across_files (3 unexpected" in out["error"]
    assert f"files random/{pool.name} and random/{second.name} share 3 id key(s)" in out["error"]
    assert "rows_unique_across_files" not in out["error"]  # not a copy of the file: this check finds it
    assert _published_reo(cfg_path) == []


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_one_pool_counted_for_several_days_is_no_repeat(tmp_path):
    from fairmon.pipelines.executor.days import run_day

    cfg_path = _sim(tmp_path / "sim")  # one pool over both days, each day's default file alongside
    for ds in (SPEC.start, DAY):
        out = run_day(str(cfg_path), ds)
        assert out["status"] == "published", out.get("error")
        assert {r["n_rand"] for r in out["reo"]} == {SPEC.random_rows_per_day * SPEC.random_pool_days}


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_a_pool_copy_declared_over_other_days_is_found_and_two_pools_of_other_rows_are_not(tmp_path):
    import polars as pl

    from fairmon.pipelines.executor.days import run_day

    spec = SimulationSpec(days=4, rows_per_day=1200, random_rows_per_day=600, random_pool_days=2, seed=5)
    cfg_path = Path(write_simulation(spec, tmp_path / "sim", "csv")["config"])
    d3 = spec.start + dt.timedelta(days=2)  # its 2-day window meets both pools (pool_policy = "overlap")
    assert run_day(str(cfg_path), d3)["status"] == "published"  # two pools of other rows: no repeat
    first = cfg_path.parent / "random" / f"random_{spec.start}_{spec.start + dt.timedelta(days=1)}.csv"
    rows = pl.read_csv(first, infer_schema=False).head(10)
    fresh = pl.int_range(10) >= 3
    copy = first.with_name(f"random_{d3}_{d3}.csv")  # declared over a day the original does not cover
    rows.with_columns(pl.when(fresh).then(pl.col("request_id") + "-new").otherwise("request_id")).write_csv(copy)
    out = run_day(str(cfg_path), d3)
    assert out["status"] == "quarantined"
    assert f"files random/{first.name} and random/{copy.name} share 3 id key(s)" in out["error"]


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_shared_keys_lowered_to_a_warning_publish_the_day(tmp_path):
    from fairmon.pipelines.executor.days import run_day

    cfg_path = _sim(tmp_path / "sim")
    with cfg_path.open("a") as f:
        f.write('\n[quality.severity]\nids_unique_across_files = "warning"\n')
    _pool_with_three_shared_keys(cfg_path)
    out = run_day(str(cfg_path), DAY)
    assert out["status"] == "published"
    assert _published_reo(cfg_path) == [DAY]


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_a_day_split_over_two_files_that_share_keys_is_quarantined_naming_both(tmp_path):
    import polars as pl

    from fairmon.pipelines.executor.days import run_day

    ds, n = dt.date(2026, 3, 1), 800
    rows = pl.DataFrame(
        {
            "ds": [str(ds)] * n,
            "traffic": ["default", "random"] * (n // 2),
            "request_id": [f"r{k}" for k in range(n)],
            "item_id": [f"v{k % 37}" for k in range(n)],
            "click": [str(k % 5 == 0).lower() for k in range(n)],
            "grp": ["a", "a", "b", "b"] * (n // 4),
        }
    )
    (tmp_path / str(ds)).mkdir()
    rows.head(500).write_csv(tmp_path / str(ds) / "part-1.csv")
    again = rows.slice(10, 3).with_columns(pl.lit("true").alias("click"))  # other values: not copied rows
    pl.concat([rows.slice(500), again]).write_csv(tmp_path / str(ds) / "part-2.csv")
    cfg_path = tmp_path / "fairmon.toml"
    cfg_path.write_text(
        'warehouse = "wh"\nduckdb = "f.duckdb"\n[impressions]\nformat = "contract"\npath = "{ds}/*.csv"\n'
        'signals = ["click"]\nattributes = ["grp"]\n'
    )
    out = run_day(str(cfg_path), ds)
    assert out["status"] == "quarantined"
    assert f"files {ds}/part-1.csv and {ds}/part-2.csv share 3 id key(s)" in out["error"]
    assert f"({ds}, default, r10, v10), ({ds}, default, r12, v12), ({ds}, random, r11, v11)" in out["error"]
    (tmp_path / str(ds) / "part-2.csv").write_text(rows.slice(500).write_csv())  # a split day without repeats
    assert run_day(str(cfg_path), ds)["status"] == "published"


# ---- item 5: paths with glob metacharacters; a duckdb path that is not DuckDB ----------------------


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_a_project_folder_and_warehouse_with_glob_characters_publish_and_read_back(tmp_path):
    from fairmon.pipelines.executor.days import run_day
    from fairmon.pipelines.storage.warehouse import read_table

    cfg_path = _sim(tmp_path / "proj[x]")
    text = cfg_path.read_text().replace('warehouse = "warehouse"', 'warehouse = "wh[1]*"')
    cfg_path.write_text(text)
    out = run_day(str(cfg_path), DAY)
    assert out["status"] == "published", out.get("error")
    assert _published_reo(cfg_path) == [DAY]
    cfg = load_config(cfg_path)
    assert cfg.warehouse_path.name == "wh[1]*"
    assert read_table(cfg.warehouse_path, "reo").get_column("ds").to_list() == [DAY]
    # the command line too: its pre-flight reads the headers of CSV files under proj[x]
    res = _cli(["run", "-c", cfg_path, "--date", DAY, "--no-prefect"])
    assert res.exit_code == 0, res.output


def _cli(args: list[str]):
    from typer.testing import CliRunner

    from fairmon.pipelines.faces.cli import app

    return CliRunner().invoke(app, [str(a) for a in args], env=WIDE)  # a message on one line, however long its path


def _config_with(cfg_path: Path, name: str, old: str, new: str) -> Path:
    """A copy of config ``cfg_path`` beside it, named ``name``, with ``old`` replaced by ``new``."""
    text = cfg_path.read_text()
    assert old in text
    out = cfg_path.with_name(name)
    out.write_text(text.replace(old, new))
    return out


@pytest.fixture
def project(tmp_path) -> Path:
    return _sim(tmp_path / "sim")


def _bad_config(kind: str, cfg_path: Path) -> Path:
    """The config of one bad-config case of the matrix, made from the good ``cfg_path``."""
    root = cfg_path.parent
    if kind == "duckdb is a CSV":
        return _config_with(cfg_path, "c.toml", 'duckdb = "fairmon.duckdb"', 'duckdb = "truth_reo.csv"')
    if kind == "warehouse is a file":
        return _config_with(cfg_path, "c.toml", 'warehouse = "warehouse"', 'warehouse = "truth_reo.csv"')
    if kind == "warehouse is the duckdb path":
        return _config_with(cfg_path, "c.toml", 'warehouse = "warehouse"', 'warehouse = "fairmon.duckdb"')
    if kind == "config is a folder":
        (root / "folder.toml").mkdir()
        return root / "folder.toml"
    if kind == "config is not UTF-8":
        (root / "latin1.toml").write_bytes(cfg_path.read_bytes().replace(b"warehouse", b"wareh\xe4use", 1))
        return root / "latin1.toml"
    if kind == "unknown severity name":
        bad = cfg_path.with_name("c.toml")
        bad.write_text(cfg_path.read_text() + '\n[quality.severity]\nrandom_trafic_sufficient = "warning"\n')
        return bad
    raise AssertionError(kind)


BAD_CONFIGS = {
    "duckdb is a CSV": "is not a DuckDB database file",
    "warehouse is a file": "is a file, not a folder",
    "warehouse is the duckdb path": "warehouse and duckdb are the same path",
    "config is a folder": "is a folder, not a TOML file",
    "config is not UTF-8": "is not UTF-8",
    "unknown severity name": "unknown expectation name(s) ['random_trafic_sufficient']",
}


@pytest.mark.parametrize("kind", list(BAD_CONFIGS))
def test_a_bad_config_or_path_is_a_config_error_naming_it(project, kind):
    from fairmon.pipelines.core.config import ConfigError

    bad = _bad_config(kind, project)
    with pytest.raises(ConfigError) as e:
        load_config(bad)
    assert BAD_CONFIGS[kind] in str(e.value)
    if kind == "unknown severity name":
        assert "random_traffic_sufficient" in str(e.value)  # the known names are listed
    res = _cli(["run", "-c", bad, "--date", DAY, "--no-prefect"])
    assert res.exit_code == 2 and "error:" in res.output and BAD_CONFIGS[kind] in res.output
    assert not (project.parent / "warehouse").exists()  # nothing was written


# ---- item 7: fairmon sql reads only the warehouse ----------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "select * from read_csv('/etc/passwd')",
        "select * from read_text('/etc/hostname')",
        "select * from glob('/etc/*')",
        "select * from read_parquet('https://example.com/x.parquet')",
    ],
)
def test_fairmon_sql_refuses_files_outside_the_warehouse(project, query):
    res = _cli(["sql", "-c", project, query])
    assert res.exit_code == 2 and "error:" in res.output and "disabled by configuration" in res.output


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_fairmon_sql_still_reads_the_warehouse_and_loads_no_extension(project):
    import duckdb

    from fairmon.pipelines.executor.days import run_day
    from fairmon.pipelines.storage.warehouse import query_warehouse

    assert run_day(str(project), DAY)["status"] == "published"
    cfg = load_config(project)
    settings = (
        "select current_setting('enable_external_access') e, current_setting('autoinstall_known_extensions') i, "
        "current_setting('autoload_known_extensions') l, current_setting('lock_configuration') k"
    )
    frame, _ = query_warehouse(cfg.duckdb_path, cfg.warehouse_path, settings)
    assert frame.row(0) == (False, False, False, True)
    frame, _ = query_warehouse(cfg.duckdb_path, cfg.warehouse_path, "select count(*) from reo_published")
    assert frame.item() == 1
    with pytest.raises(duckdb.Error, match="disabled by configuration"):
        query_warehouse(cfg.duckdb_path, cfg.warehouse_path, "select * from read_csv('/etc/passwd')")


# ---- item 8: tracebacks become error: lines with the documented exit codes ---------------------------


def _deny_writes(monkeypatch, folder: Path) -> None:
    """Make ``folder`` read-only as os.access sees it (the tests may run as root, whom chmod does not stop)."""
    import os

    real = os.access
    target = folder.resolve()

    def access(path, mode, *args, **kwargs):
        if Path(path).resolve() == target and mode & os.W_OK:
            return False
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)


@pytest.mark.parametrize("which", ["warehouse", "duckdb folder"])
def test_a_read_only_warehouse_or_duckdb_folder_is_refused_before_writing(project, monkeypatch, which):
    root = project.parent
    if which == "warehouse":
        (root / "warehouse").mkdir()
        _deny_writes(monkeypatch, root / "warehouse")
    else:
        _deny_writes(monkeypatch, root)
    res = _cli(["run", "-c", project, "--date", DAY, "--no-prefect"])
    assert res.exit_code == 2 and "error:" in res.output and "is read-only" in res.output
    assert not (root / "fairmon.duckdb").exists()


def test_a_full_disk_under_the_duckdb_folder_is_an_error_line_exit_4(project, monkeypatch):
    import errno
    import os

    from fairmon.pipelines.storage import db

    def full(path):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(db, "session", full)
    res = _cli(["run", "-c", project, "--date", DAY, "--no-prefect"])
    assert res.exit_code == 4 and "error:" in res.output and "No space left on device" in res.output
    assert "fairmon.duckdb" in res.output and "Traceback" not in res.output


@pytest.mark.parametrize(
    ("setting", "message"),
    [('cron = "61 * * * *"', "schedule.cron"), ('timezone = "Mars/Olympus_Mons"', "schedule.timezone")],
)
def test_an_invalid_cron_or_timezone_is_a_config_error(project, setting, message):
    bad = project.with_name("c.toml")
    bad.write_text(project.read_text() + f"\n[schedule]\n{setting}\n")
    res = _cli(["schedule", "show", "-c", bad])
    assert res.exit_code == 2 and "error:" in res.output and message in res.output


def test_an_unknown_timezone_is_refused_by_every_command_before_anything_is_written(project):
    """The time zone is checked when the config is read (zoneinfo), so ``run`` refuses it too, with nothing
    written; a known one passes."""
    bad = project.with_name("c.toml")
    bad.write_text(project.read_text() + '\n[schedule]\ntimezone = "Mars/Olympus_Mons"\n')
    res = _cli(["run", "-c", bad, "--date", DAY, "--no-prefect"])
    assert (
        res.exit_code == 2
        and "schedule.timezone" in res.output
        and "unknown time zone 'Mars/Olympus_Mons'" in res.output
    )
    assert not (project.parent / "warehouse").exists()
    bad.write_text(project.read_text() + '\n[schedule]\ntimezone = "Europe/Paris"\n')
    assert _cli(["schedule", "show", "-c", bad]).exit_code == 0


@pytest.mark.parametrize("case", ["parent is a file", "read-only folder", "out is a folder"])
def test_report_out_that_cannot_be_written_is_exit_2(project, monkeypatch, case):
    root = project.parent
    out = {
        "parent is a file": root / "truth_reo.csv" / "r.html",
        "read-only folder": root / "locked" / "r.html",
        "out is a folder": root,
    }[case]
    if case == "read-only folder":
        (root / "locked").mkdir()
        _deny_writes(monkeypatch, root / "locked")
    res = _cli(["report", "-c", project, "--start", SPEC.start, "--end", DAY, "--out", out])
    assert res.exit_code == 2 and "error:" in res.output and "--out" in res.output


@pytest.mark.parametrize("command", ["simulate", "simulate-labels", "simulate-envy"])
def test_simulate_out_onto_a_file_is_exit_2(tmp_path, command):
    target = tmp_path / "taken.txt"
    target.write_text("x")
    res = _cli([command, "--out", target, "--days", 1])
    assert res.exit_code == 2 and "error:" in res.output and "is a file" in res.output
    assert target.read_text() == "x"


@pytest.mark.parametrize("command", ["simulate", "simulate-labels", "simulate-envy"])
def test_simulate_into_a_project_is_exit_2_and_leaves_it(tmp_path, command):
    """A simulation into a folder that holds a project would overwrite its config and day files while its
    warehouse keeps the days published from the old ones: refused, naming the file, nothing written."""
    (tmp_path / "fairmon.toml").write_text("mine")
    res = _cli([command, "--out", tmp_path, "--days", 1])
    assert res.exit_code == 2 and f"holds a project ({tmp_path / 'fairmon.toml'})" in " ".join(res.output.split())
    assert [p.name for p in tmp_path.iterdir()] == ["fairmon.toml"]
    assert (tmp_path / "fairmon.toml").read_text() == "mine"


@pytest.mark.slow
def test_report_while_a_run_holds_the_duckdb_file_exits_5(project):
    """A subprocess holds the DuckDB file (as a run does); ``fairmon report`` says so and exits 5."""
    import subprocess
    import sys

    from fairmon.pipelines.executor.days import run_day

    assert run_day(str(project), DAY)["status"] == "published"
    db_path = load_config(project).duckdb_path
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb, time; c = duckdb.connect({str(db_path)!r}); print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "fairmon",
                "report",
                "-c",
                str(project),
                "--start",
                str(DAY),
                "--end",
                str(DAY),
                "--out",
                str(project.parent / "r.html"),
            ],
            capture_output=True,
            text=True,
        )
    finally:
        holder.kill()
        holder.wait()
    assert out.returncode == 5, out.stderr
    assert out.stderr.startswith("error:") and "is in use" in out.stderr and "Traceback" not in out.stderr


# ---- item 9: silent acceptances become named errors or warnings ------------------------------------


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_a_struct_attribute_column_fails_the_day_naming_column_and_type(tmp_path):
    import polars as pl

    from fairmon.pipelines.executor.days import run_day

    n = 40
    pl.DataFrame(
        {
            "ds": ["2026-03-01"] * n,
            "traffic": ["default"] * (n // 2) + ["random"] * (n // 2),
            "request_id": [f"r{i}" for i in range(n)],
            "item_id": [f"i{i}" for i in range(n)],
            "click": [i % 3 == 0 for i in range(n)],
            "grp": [{"a": "a" if i % 2 else "b", "arm": "control"} for i in range(n)],
        }
    ).write_parquet(tmp_path / "2026-03-01.parquet")
    cfg_path = tmp_path / "fairmon.toml"
    cfg_path.write_text(
        'warehouse = "wh"\nduckdb = "f.duckdb"\n[impressions]\nformat = "contract"\npath = "{ds}.parquet"\n'
        'signals = ["click"]\nattributes = ["grp"]\n'
    )
    out = run_day(str(cfg_path), dt.date(2026, 3, 1))
    assert out["status"] == "failed"
    assert "column 'grp'" in out["error"] and "Struct" in out["error"] and "2026-03-01.parquet" in out["error"]


def test_a_control_arm_missing_from_the_traffic_is_a_logged_warning(project, caplog):
    import logging

    import polars as pl

    from fairmon.pipelines.executor.day_checks import ab_config_check

    cfg = load_config(project).model_copy(update={"ab": load_config(project).ab.model_copy(update={"control": "ctl"})})
    counts = pl.DataFrame({"ds": [DAY, DAY], "traffic": ["default", "default"], "arm": ["control", "treat"]})
    with caplog.at_level(logging.WARNING, logger="fairmon"):
        (result,) = ab_config_check(cfg, counts)
    assert result.failed_warning == ["ab_arm_present"] and result.success
    assert any("[ab] control" in r.getMessage() and "ctl" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("name", ["a\nb", "tab\there", " ", "zero\u200bwidth"])
def test_a_group_name_with_a_control_character_is_refused(name):
    from pydantic import ValidationError

    from fairmon.pipelines.core.config import AuditConfig

    with pytest.raises(ValidationError, match="group name"):
        AuditConfig(groups={"race": ["ok", name]}, score_values=[1, 2])
    with pytest.raises(ValidationError, match="group name"):
        AuditConfig(public_group_sizes={"race": {"ok": 3, name: 4}}, score_values=[1, 2])


def test_intersection_cells_cannot_collide():
    """``1×x`` with ``y`` and ``1`` with ``x×y`` would both read ``1×x×y``: a value holding the separator is refused."""
    import polars as pl

    from fairmon.transforms.contract import InputContractError
    from fairmon.transforms.intersections import add_intersections

    staged = pl.DataFrame(
        {"attr__a": ["1", "1×x"], "attr__b": ["x×y", "y"], "src_file": ["f.csv", "f.csv"], "src_row": [1, 2]}
    )
    with pytest.raises(InputContractError) as e:
        add_intersections(staged, [["a", "b"]])
    assert str(e.value).startswith("f.csv, column 'a', row 2: value '1×x' contains '×'")
    clean = add_intersections(staged.with_columns(pl.lit("1").alias("attr__a")), [["a"]])  # a alone: no cell to merge
    assert clean.get_column("attr__a").to_list() == ["1", "1"]


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_views_that_cannot_be_refreshed_at_the_start_leave_each_day_to_record_its_outcome(project, monkeypatch):
    """The run's first refresh of the views (before any day is recorded) fails: the days still run and are
    recorded; here the publish's own refresh works, so the day publishes."""
    from fairmon.pipelines.executor import days
    from fairmon.pipelines.storage.warehouse import latest_runs

    def unreadable(cfg, ds=None, known=None):
        raise OSError(5, "Input/output error", str(cfg.warehouse_path / "reo"))

    monkeypatch.setattr(days, "refresh_run_views", unreadable)
    assert days.run_day(str(project), DAY)["status"] == "published"
    assert latest_runs(load_config(project).duckdb_path).get_column("status").to_list() == ["published"]


# ---- the edges: each case one clear line and its exit code, nothing wrong published ------------------


@pytest.mark.parametrize("wait", ["nan", "inf", "-1"])
def test_a_wait_that_is_not_a_finite_number_of_seconds_is_exit_2(project, wait):
    res = _cli(["run", "-c", project, "--date", DAY, "--no-prefect", "--wait", wait])
    assert res.exit_code == 2 and "give a finite number of seconds" in res.output


@pytest.mark.parametrize("nest", ["[" * 5000 + "]" * 5000, "{a=" * 5000 + "1" + "}" * 5000])
def test_a_config_nested_thousands_deep_is_a_config_error(tmp_path, nest):
    cfg = tmp_path / "deep.toml"
    cfg.write_text(f"x = {nest}\n")
    res = _cli(["run", "-c", cfg, "--date", DAY, "--no-prefect"])
    assert res.exit_code == 2 and "nests arrays or tables too deeply" in res.output


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [("0001-01-01", "9999-12-31", "a backfill runs at most 36,525"), ("0001-01-01", "0001-01-03", "too early")],
)
def test_an_absurd_date_range_is_exit_2(project, start, end, message):
    res = _cli(["backfill", "-c", project, "--start", start, "--end", end, "--no-prefect"])
    assert res.exit_code == 2 and message in res.output and "Traceback" not in res.output


def test_a_day_that_has_not_begun_anywhere_is_exit_2_and_recorded_nowhere(project):
    import datetime as dt

    import fairmon
    from fairmon.pipelines.ingest.windows import not_begun

    today = dt.datetime.now(dt.UTC).date()
    later = str(today + dt.timedelta(days=2))  # a mistyped year or month: no alert that stays open until that day
    for args in (["run", "--date", later], ["ingest", "--date", later], ["backfill", "--start", DAY, "--end", later]):
        res = _cli([*args, "-c", project, "--no-prefect"])
        assert res.exit_code == 2 and f"{later} has not begun in any time zone yet" in " ".join(res.output.split())
    with pytest.raises(ValueError, match="has not begun"):
        fairmon.run_day(project, later)
    assert not (project.parent / "fairmon.duckdb").exists() and not (project.parent / "warehouse").exists()
    # tomorrow (UTC) has begun east of UTC (up to UTC+14): a run may take it
    assert not_begun(dt.date(2026, 12, 3), today=dt.date(2026, 12, 2)) is None
    assert not_begun(dt.date(2026, 12, 4), today=dt.date(2026, 12, 2)) == (
        "2026-12-04 has not begun in any time zone yet (today is 2026-12-02, UTC): no log of it can be complete"
    )


def test_a_coat_config_asked_for_another_day_is_exit_2_recorded_nowhere(tmp_path):
    """It was a failed day (exit 4) with a failed alert, for a mistyped date."""
    cfg = tmp_path / "fairmon.toml"
    cfg.write_text(
        'warehouse = "wh"\nduckdb = "c.duckdb"\n[impressions]\nformat = "coat"\npath = "coat"\nds = 2016-06-19\n'
        'signals = ["like"]\nattributes = ["gender"]\n'
    )
    for args in (["run", "--date", "2016-06-20"], ["backfill", "--start", "2016-06-18", "--end", "2016-06-19"]):
        res = _cli([*args, "-c", cfg, "--no-prefect"])
        assert res.exit_code == 2 and "the Coat data set is the single day 2016-06-19 ([impressions] ds)" in res.output
    assert not (tmp_path / "c.duckdb").exists()


def test_fairmon_sql_cannot_read_a_runs_half_written_files(project):
    tmp = project.parent / "warehouse" / ".tmp"
    tmp.mkdir(parents=True)
    (tmp / "x.csv").write_text("a\n1\n")
    res = _cli(["sql", "-c", project, f"select * from read_csv('{tmp / 'x.csv'}')"])
    assert res.exit_code == 2 and "disabled by configuration" in " ".join(res.output.split())


def test_a_csv_header_naming_a_column_twice_is_refused_naming_it(project):
    day = project.parent / "default" / f"{DAY}.csv"
    lines = day.read_text().splitlines()
    day.write_text("\n".join([lines[0] + ",share", *(x + ",0" for x in lines[1:])]) + "\n")
    res = _cli(["run", "-c", project, "--date", DAY, "--no-prefect"])
    assert res.exit_code == 1 and "column 'share': the header names this column more than once" in res.output


def test_a_nan_attribute_value_is_a_missing_group_not_a_group_nan():
    import polars as pl

    from fairmon.transforms.contract_values import attribute_text

    got = attribute_text(pl.Series("a", [1.0, float("nan"), -0.0, None]), file="f", column="a").to_list()
    assert got == ["1.0", None, "0.0", None]


def test_a_message_quoting_a_megabyte_value_is_cut():
    from fairmon.pipelines.checks.suites import DQResult
    from fairmon.pipelines.faces.cli_common import MESSAGE_CHARS, clip

    failure = {"name": "group_known", "severity": "critical", "unexpected_count": 1, "sample": ["g" * 10**6]}
    summary = DQResult("impressions", "impressions_raw", "day.csv", 3, [failure]).summary()
    assert len(summary) < 1_200 and "(1,000,002 characters)" in summary
    assert len(clip("x" * 10**6)) < MESSAGE_CHARS + 40 and clip("short") == "short"


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_a_symlink_loop_among_the_inputs_fails_the_day_and_unpublishes_it(project):
    from fairmon.pipelines.executor.days import run_day

    assert run_day(str(project), DAY)["status"] == "published"
    random = project.parent / "random"
    loop = random / f"random_{DAY}_{DAY}.csv"
    loop.symlink_to(random / "a.csv")
    (random / "a.csv").symlink_to(loop)
    res = _cli(["run", "-c", project, "--date", DAY, "--no-prefect"])
    assert res.exit_code == 4 and "its symbolic links form a loop" in res.output and "Traceback" not in res.output
    assert _published_reo(project) == []  # the old numbers left the published view


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_a_replaced_attribute_stages_the_files_anew_and_publishes(project):
    import polars as pl

    from fairmon.pipelines.executor.days import run_day
    from fairmon.pipelines.storage.warehouse import read_table

    assert run_day(str(project), DAY)["status"] == "published"
    for f in [*(project.parent / "default").glob("*.csv"), *(project.parent / "random").glob("*.csv")]:
        lines = f.read_text().splitlines()
        f.write_text(
            "\n".join([lines[0] + ",region", *(x + (",n" if i % 2 else ",s") for i, x in enumerate(lines[1:]))])
        )
    text = project.read_text()
    project.write_text(text.replace('attributes = ["young_adult"]', 'attributes = ["region"]'))
    out = run_day(str(project), DAY)
    assert out["status"] == "published", out.get("error")
    counts = read_table(load_config(project).warehouse_path, "group_counts").filter(pl.col("ds") == DAY)
    assert set(counts.get_column("attribute")) == {"region"} and set(counts.get_column("group")) == {"n", "s"}


def test_audit_export_before_any_score_is_staged_is_exit_2(tmp_path):
    from conftest import REPO

    csv = REPO / "data" / "compas" / "compas_two_year.csv"
    cfg_path = tmp_path / "c.toml"
    cfg_path.write_text(
        f'warehouse = "wh"\nduckdb = "c.duckdb"\n[scores]\nformat = "compas"\npath = "{csv}"\n'
        'attributes = ["sex"]\nwindow_days = 730\n[[scores.thresholds]]\nmodel = "compas"\n'
        "t = 5\nd = 3\n[audit]\ntotal_epsilon = 1.0\nscore_values = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n"
        'groups = { sex = ["Female", "Male"] }\n'
    )
    args = ["audit-export", "-c", cfg_path, "--date", "2014-12-31", "--attribute", "sex", "--epsilon", "0.1"]
    res = _cli(args)
    assert res.exit_code == 2 and "no scores are staged yet" in res.output and "Traceback" not in res.output


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_an_empty_cluster_id_is_refused_at_pre_flight_naming_file_row_and_column(project):
    """A blank request_id (clustered by request, cluster_by = auto): the pre-flight value scan names it, exit 1;
    the staging itself raises the same error (a run_day, which has no pre-flight, quarantines the day on it)."""
    from fairmon.pipelines.core.config import load_config
    from fairmon.pipelines.ingest import adapters
    from fairmon.pipelines.ingest.profiles import NullClusterId
    from fairmon.pipelines.ingest.sources import ImpressionsInput

    day = project.parent / "default" / f"{DAY}.csv"
    lines = day.read_text().splitlines()
    col = lines[0].split(",").index("request_id")
    cells = lines[3].split(",")
    cells[col] = " "
    day.write_text("\n".join([*lines[:3], ",".join(cells), *lines[4:]]) + "\n")
    res = _cli(["run", "-c", project, "--date", DAY, "--no-prefect"])
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert f"{day.name}: column 'request_id', row 3: the cluster id is empty" in res.output.replace("\n", " ")
    assert _published_reo(project) == []
    cfg = load_config(project)
    (unit,) = [u for u in ImpressionsInput(cfg).units(DAY) if u.file == day]
    with pytest.raises(NullClusterId, match=r"2026-01-02\.csv, column 'request_id', row 3: the cluster id is empty"):
        adapters.read_unit(cfg, unit)


def test_an_empty_cluster_id_is_a_value_error_in_the_api():
    import polars as pl

    import fairmon

    rows = pl.DataFrame(
        {"traffic": ["default", "random"] * 2, "g": ["a", "b"] * 2, "y": [True] * 4, "u": ["1", "2", None, "3"]}
    )
    with pytest.raises(ValueError, match=r"rows, column 'u', row 3: the cluster id is empty"):
        fairmon.reo(rows, group="g", label="y", cluster="u")


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_repeated_ids_are_refused_at_pre_flight_naming_the_key_its_copies_and_the_first_repeat(project):
    """An item served twice in one request: the pre-flight names the file, the key columns, the repeated key with
    its copies and the first row that repeats it (not the profile's internal count column), exit 1."""
    day = project.parent / "default" / f"{DAY}.csv"
    lines = day.read_text().splitlines()
    header = lines[0].split(",")
    rows = lines[1:]
    day.write_text("\n".join([lines[0], *rows, rows[4]]) + "\n")  # the fifth row again, as the last row
    res = _cli(["run", "-c", project, "--date", DAY, "--no-prefect"])
    out = res.output.replace("\n", " ")
    assert res.exit_code == 1 and "Traceback" not in out and "id_copies" not in out, out
    keys = [c for c in ("ds", "traffic", "request_id", "item_id") if c in header]
    values = dict(zip(header, rows[4].split(","), strict=True))
    shown = ", ".join(values[k] for k in keys)
    assert f"key ({', '.join(keys)}) repeated: ({shown}) ×2; first repeat at row {len(rows) + 1}" in out, out
    assert "(2 row(s) fail ids_unique)" in out
    assert _published_reo(project) == []


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_labels_written_yes_no_are_refused_at_pre_flight_naming_row_column_and_accepted_values(project):
    """A signal column of "Yes"/"No" fails signal_is_boolean: the pre-flight value scan names the file, the first
    row, the column, the values as the file spells them (the check folds case: "Yes" is searched for, not "yes")
    and the accepted set (exit 1, recorded quarantined), before GX is imported."""
    import subprocess
    import sys

    from fairmon.pipelines.core.config import load_config

    day = project.parent / "default" / f"{DAY}.csv"
    lines = day.read_text().splitlines()
    header = lines[0].split(",")
    signal = load_config(project).impressions.signals[0]
    col = header.index(signal)
    rows = [x.split(",") for x in lines[1:]]
    for r in rows:
        r[col] = {"1": "Yes", "0": "No"}.get(r[col], r[col])
    day.write_text("\n".join([lines[0], *(",".join(r) for r in rows)]) + "\n")
    res = _cli(["run", "-c", project, "--date", DAY, "--no-prefect"])
    out = res.output.replace("\n", " ")
    assert res.exit_code == 1 and "Traceback" not in out, out
    first = rows[0][col]
    assert f"column {signal!r}, row 1: {first!r}" in out and "fail signal_is_boolean[" in out, out
    assert "accepted: 0, 1, true, false, t, f, 1.0, 0.0" in out and "checked from file headers and values" in out
    assert f"({len(rows):,} row(s) fail signal_is_boolean[{signal}])" in out
    assert _published_reo(project) == []
    # in a process of its own, the refusal comes before Great Expectations is imported
    probe = (
        "import sys\nfrom fairmon.pipelines.faces.cli import app\n"
        f'try:\n    app(["run", "-c", {str(project)!r}, "--date", "{DAY}", "--no-prefect"])\n'
        "except SystemExit as e:\n    print('exit', e.code, 'gx' if 'great_expectations' in sys.modules else 'no gx')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert done.stdout.strip().splitlines()[-1] == "exit 1 no gx", done.stdout + done.stderr


def test_a_suite_file_cut_short_by_a_full_disk_is_dropped(tmp_path):
    """A full disk leaves GX's stored suite empty (tmpfs reproduction, bench/README.md); every later run then
    failed reading it ("ExpectationSuite() argument after ** must be a mapping"). The gate drops it first."""
    from fairmon.pipelines.checks.gate import drop_unreadable_suites

    store = tmp_path / "gx" / "expectations"
    store.mkdir(parents=True)
    (store / "alerts.json").write_text("")
    (store / "reo.json").write_text('{"name": "reo", "expectations": []')  # cut mid-object
    (store / "dq_results.json").write_text('{"name": "dq_results", "expectations": []}')
    assert sorted(p.name for p in drop_unreadable_suites(tmp_path)) == ["alerts.json", "reo.json"]
    assert [p.name for p in store.iterdir()] == ["dq_results.json"]


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_a_run_after_a_full_disk_left_an_empty_suite_publishes_without_a_gx_error(project):
    """In a process of its own (this one keeps its gate and suites): a day not run yet, so the gate runs."""
    import subprocess
    import sys

    from fairmon.pipelines.executor.days import run_day

    assert run_day(str(project), DAY)["status"] == "published"
    suite = project.parent / "gx" / "expectations" / "reo.json"
    assert suite.is_file()
    suite.write_text("")
    args = ["run", "-c", str(project), "--date", str(SPEC.start), "--no-prefect"]
    res = subprocess.run([sys.executable, "-m", "fairmon", *args], capture_output=True, text=True, check=False)
    assert res.returncode == 0 and "TypeError" not in res.stdout + res.stderr, res.stdout + res.stderr
    assert suite.stat().st_size > 0  # stored again from expectations/reo.json


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_a_run_killed_before_its_views_refresh_leaves_no_view_behind_its_parquet(project):
    """The project's first run killed (SIGKILL) right after it swapped in its first partition, before any
    refresh of the views could follow: a tool reading the DuckDB file directly sees that partition's rows
    at once (the views read their files when queried), and the day is not published."""
    import os
    import subprocess
    import sys

    import duckdb
    import polars as pl

    from fairmon.pipelines.storage.warehouse import partition_path

    cfg = load_config(project)
    args = ["run", "-c", str(project), "--date", str(DAY), "--no-prefect"]
    env = {**os.environ, "FAIRMON_FAULT": "parquet_swap"}
    res = subprocess.run([sys.executable, "-m", "fairmon", *args], capture_output=True, text=True, env=env, check=False)
    assert res.returncode == -9, res.stdout + res.stderr
    swapped = list(cfg.warehouse_path.glob("*/ds=*/part-0.parquet"))
    assert len(swapped) == 1  # the first table's partition, and no other
    table = swapped[0].parent.parent.name
    assert swapped[0] == partition_path(cfg.warehouse_path, table, DAY)
    with duckdb.connect(str(cfg.duckdb_path), read_only=True) as con:
        seen = con.execute(f'SELECT count(*) FROM "{table}" WHERE ds = ?', [DAY]).fetchone()[0]
        published = con.execute(f'SELECT count(*) FROM "{table}_published"').fetchone()[0]
    assert seen == pl.read_parquet(swapped[0]).height > 0 and published == 0
