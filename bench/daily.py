"""A TikTok-size day and a 14-day backfill, end to end through the flows.

Data: simulated TikTok-format logs (pipelines/simulated.py), two arms of
150,000 default rows each per day and 43,000 random rows per day (pooled
over 7 days, as in the published data set), Parquet.

Measured in this process after the Prefect API is up (the API's start-up is
shown first): one day on a fresh warehouse (first run of the process, so it
pays for Great Expectations' import and context), the same day again
(warm), and a 14-day backfill through the CLI's own code path on a fresh
warehouse. Each run's wall seconds are split into the stages the flow
records (pipelines/core/timing.py: ingest, checks, counts, estimators, writes);
the rest is Prefect's orchestration. Last, the same backfill as a user runs
it, ``fairmon backfill`` in a new process (Prefect start-up included).

    .venv/bin/python bench/daily.py [--days 14]

Figures judged (last line; issue 21): the cold ``fairmon backfill`` of
the range in a new process (target for 14 days: <= 10 s; for 365 days: <= 120 s)
and the per-day cost of the in-process backfill outside counts, estimators
and writes, i.e. (wall - counts - estimators - writes) / days, with the
range's ingest and checks included (target <= 0.15 s). ``--skip-single``
leaves out the two single-day runs (for long ranges).
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import subprocess
import sys
from pathlib import Path

from common import DEFAULT_DATA, ROOT, Stopwatch, quiet_prefect
from prefect import flow

from fairmon.pipelines.core.timing import STAGES

BATCHED = ("ingest", "checks", "counts", "estimators")  # stages a backfill runs once a batch of days


@flow(name="bench-warmup")
def warmup() -> int:
    """An empty flow: its first run starts Prefect's local API."""
    return 1


def make_data(folder: Path, days: int) -> Path:
    """Write (or reuse) the simulation; returns its config."""
    from fairmon.pipelines.simulation.simulated import write_simulation
    from fairmon.transforms.simulators.impressions import SimulationSpec

    cfg = folder / "fairmon.toml"
    if not cfg.is_file() or len(list((folder / "default").glob("*.parquet"))) != days:
        spec = SimulationSpec(
            days=days, rows_per_day=150_000, random_rows_per_day=43_000, arms={"control": {}, "treatment": {0: 1.25}}
        )
        write_simulation(spec, folder, fmt="parquet")
    return cfg


def fresh(folder: Path) -> None:
    """Remove every output of earlier runs (warehouse, DuckDB file, GX project)."""
    for name in ("warehouse", "gx"):
        shutil.rmtree(folder / name, ignore_errors=True)
    for f in folder.glob("fairmon.duckdb*"):
        f.unlink()


def split(wall: float, timings: list[dict], extra: dict | None = None) -> str:
    """One line: wall, each stage and the orchestration rest."""
    total = {k: sum(t.get(k, 0.0) for t in timings) for k in STAGES}
    for k, v in (extra or {}).items():
        total[k] += v
    rest = wall - sum(total.values())
    parts = ", ".join(f"{k} {v:.2f}" for k, v in total.items())
    return f"{wall:6.2f} s = {parts}, Prefect/orchestration {rest:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", type=int, default=14)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA / "daily")
    ap.add_argument("--skip-single", action="store_true", help="no single-day runs, only the two backfills")
    args = ap.parse_args()
    quiet_prefect()
    from fairmon.pipelines.core.config import load_config
    from fairmon.pipelines.orchestration.flows import daily
    from fairmon.pipelines.orchestration.runner import run_days
    from fairmon.transforms.simulators.impressions import SimulationSpec

    with Stopwatch() as w:
        config = make_data(args.data, args.days)
    start = SimulationSpec().start
    days = [start + dt.timedelta(days=i) for i in range(args.days)]
    print(f"data: {args.data} ({w.seconds:.1f}s); 300,000 default + 43,000 random rows per day")

    with Stopwatch() as w:
        warmup()
    print(f"Prefect API start-up (first flow run of the process): {w.seconds:.2f} s")

    if not args.skip_single:
        fresh(args.data)
        with Stopwatch() as w:
            first = daily(str(config), days[0])
        print(f"one day, first in process:  {split(w.seconds, [first['timings']])}")
        with Stopwatch() as w:
            again = daily(str(config), days[0])
        print(f"one day, again (warm):      {split(w.seconds, [again['timings']])}")

    fresh(args.data)
    stats: dict = {}

    def add(pre: dict) -> None:  # a long range runs in batches: their figures add up
        for k, v in pre.items():
            stats[k] = stats.get(k, 0) + v

    with Stopwatch() as w:
        results = run_days(load_config(config), days, config_path=str(config), on_batch=add)
    bad = [r for r in results if r["status"] != "published"]
    if bad:
        raise SystemExit(f"backfill failed: {bad[0]}")
    pre = stats
    print(
        f"{args.days}-day backfill:          "
        f"{split(w.seconds, [r['timings'] for r in results], {k: pre.get(k, 0.0) for k in BATCHED})}"
    )
    inside = sum(r["timings"].get(k, 0.0) for r in results for k in ("counts", "estimators", "writes"))
    per_day = (w.seconds - inside - pre.get("counts", 0.0) - pre.get("estimators", 0.0)) / args.days

    fresh(args.data)
    cmd = [
        sys.executable,
        "-m",
        "fairmon",
        "backfill",
        "-c",
        str(config),
        "--start",
        str(days[0]),
        "--end",
        str(days[-1]),
    ]
    with Stopwatch() as w:
        res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if res.returncode:
        raise SystemExit(f"fairmon backfill failed:\n{res.stdout}\n{res.stderr}")
    print(f"`fairmon backfill` in a new process (Prefect start-up included): {w.seconds:.2f} s")

    print(
        f"{args.days}-day `fairmon backfill` cold: {w.seconds:.2f} s; per-day cost outside counts, estimators "
        f"and writes: {per_day:.3f} s"
    )


if __name__ == "__main__":
    main()
