"""Fault injection (issue 13): kill `fairmon backfill` with SIGKILL at random
points, finish with `backfill --only-failed`, and check what the docs'
"Operations" section promises.

Each trial copies a fresh simulated project (3 days, two arms, Parquet),
starts `fairmon backfill` in a new process with its own Prefect home (so the
temporary API server is its own), kills it after a random delay drawn over
the length of a clean run, and then runs `fairmon backfill --only-failed`
to completion. It checks, after the kill and again at the end:

- every partition file is whole and readable, and no table has a duplicate key;
- DuckDB's views and the Parquet files agree (same rows);
- after the kill, no day whose latest run did not publish is in `reo_published`;
- at the end: no `_tmp` leftovers, no Prefect server of the trial alive, and
  every table equal to a clean run's except `run_id`.

    python bench/faults.py --trials 20

Prints one line per trial, then the trial count and, last, the failures.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import polars as pl

from fairmon.pipelines.orchestration.prefect_guard import temporary_servers
from fairmon.pipelines.simulation.simulated import write_simulation
from fairmon.pipelines.storage.warehouse import read_table
from fairmon.transforms.registry import TABLES
from fairmon.transforms.simulators.impressions import SimulationSpec

START = dt.date(2026, 4, 1)
DAYS = 3


def make_project(root: Path) -> Path:
    """A simulated TikTok-layout project; returns its config."""
    spec = SimulationSpec(
        start=START,
        days=DAYS,
        rows_per_day=20_000,
        random_rows_per_day=6_000,
        random_pool_days=3,
        arms={"control": {}, "boost": {1: 2.0}},
        seed=11,
    )
    return write_simulation(spec, root, "parquet")["config"]


def backfill(config: Path, home: Path, *extra: str, kill_after: float | None = None) -> tuple[int, float]:
    """Run `fairmon backfill` in a new process (killed after ``kill_after`` s if given). Returns (code, seconds)."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false", GX_ANALYTICS_ENABLED="False")
    end = START + dt.timedelta(days=DAYS - 1)
    cmd = [
        sys.executable,
        "-m",
        "fairmon",
        "backfill",
        "-c",
        str(config),
        "--start",
        str(START),
        "--end",
        str(end),
        "--prefect",  # through Prefect's temporary server: a kill must leave no server behind either
        *extra,
    ]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if kill_after is not None:
        try:
            proc.wait(timeout=kill_after)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
    return proc.wait(), time.monotonic() - t0


def tables(root: Path) -> dict[str, pl.DataFrame]:
    """Every table as read from its partition files (each file must be readable),
    the trial's own folder in text columns replaced by ``<ROOT>``."""
    wh = root / "warehouse"
    out = {}
    for name in TABLES:
        if (wh / name).is_dir():
            frame = read_table(wh, name)
            text = [c for c, t in frame.schema.items() if t == pl.String]
            out[name] = frame.with_columns(pl.col(text).str.replace_all(str(root), "<ROOT>", literal=True))
    return out


def check_state(root: Path, after_kill: bool) -> list[str]:
    """What must hold at any time: readable, unique keys, DuckDB agrees with
    Parquet, nothing half-published. After a kill, a table's view may still
    read empty when it was made before the table's first partition existed (a
    view binds its files when a run starts or publishes); it never shows rows
    other than the files'."""
    problems = []
    try:
        frames = tables(root)
    except Exception as e:  # an unreadable partition
        return [f"unreadable partition: {e}"]
    for name, frame in frames.items():
        if frame.height and frame.select(list(TABLES[name].key)).is_duplicated().any():
            problems.append(f"{name}: duplicate keys")
    db = root / "fairmon.duckdb"
    if db.exists():
        con = duckdb.connect(str(db), read_only=True)
        try:
            for name, frame in frames.items():
                if not frame.height:
                    continue
                seen = con.sql(f'SELECT count(*) FROM "{name}"').fetchall()[0][0]
                if seen != frame.height and not (after_kill and seen == 0):
                    problems.append(f"{name}: DuckDB shows {seen} rows, Parquet holds {frame.height}")
            if after_kill:
                latest = con.sql("SELECT ds, arg_max(status, started_at) FROM runs GROUP BY ds").fetchall()
                unpublished = {d for d, s in latest if s != "published"}
                shown = {d for (d,) in con.sql("SELECT DISTINCT ds FROM reo_published").fetchall()}
                if unpublished & shown:
                    problems.append(f"days {sorted(unpublished & shown)} published though their latest run was not")
        except duckdb.Error as e:
            problems.append(f"DuckDB: {e}")
        finally:
            con.close()
    return problems


def same_as_clean(root: Path, clean: dict[str, pl.DataFrame]) -> list[str]:
    """Tables equal to the clean run's, except run_id (rows sorted by key)."""
    problems = []
    got = tables(root)
    for name, frame in clean.items():
        key = list(TABLES[name].key)
        a = frame.drop("run_id").sort(key)
        b = got.get(name, pl.DataFrame()).drop("run_id", strict=False)
        if b.is_empty() or not a.equals(b.sort(key).select(a.columns)):
            problems.append(f"{name} differs from a clean run")
    return problems


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="fairmon-faults-"))
    template = work / "template"
    make_project(template)
    clean_root = work / "clean"
    shutil.copytree(template, clean_root)
    code, clean_seconds = backfill(clean_root / "fairmon.toml", work / "home-clean")
    if code != 0:
        raise SystemExit(f"the clean run failed (exit {code})")
    clean = tables(clean_root)
    print(f"clean run: {clean_seconds:.1f}s, tables {sorted(clean)}")
    failures: list[str] = []
    for i in range(args.trials):
        root, home = work / f"t{i}", work / f"home-{i}"
        shutil.copytree(template, root)
        delay = rng.uniform(0.5, clean_seconds)
        code, _ = backfill(root / "fairmon.toml", home, kill_after=delay)
        problems = [f"after kill: {p}" for p in check_state(root, after_kill=True)]
        deadline = time.monotonic() + 20
        while temporary_servers(home) and time.monotonic() < deadline:
            time.sleep(0.2)
        if temporary_servers(home):
            problems.append("a Prefect server outlived the killed run")
        code2, _ = backfill(root / "fairmon.toml", home, "--only-failed")
        if code2 != 0:
            problems.append(f"the --only-failed run exited {code2}")
        problems += [f"at the end: {p}" for p in check_state(root, after_kill=False)]
        problems += same_as_clean(root, clean)
        tmp = root / "warehouse" / "_tmp"
        if tmp.is_dir() and any(tmp.iterdir()):
            problems.append("temporary files left in warehouse/_tmp")
        if temporary_servers(home):
            problems.append("a Prefect server outlived the completing run")
        status = "killed" if code == -signal.SIGKILL else f"finished ({code}) before the kill"
        print(f"trial {i:2d}: kill at {delay:5.1f}s, {status}; {'ok' if not problems else '; '.join(problems)}")
        failures += [f"trial {i}: {p}" for p in problems]
        shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    print(f"{args.trials} trials")
    print(f"failures: {len(failures)}" + "".join(f"\n  {f}" for f in failures))


if __name__ == "__main__":
    main()
