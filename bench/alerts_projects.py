"""Issue 50's check as a user runs it: simulated 30-day projects through the real command line.

Each project is ``fairmon simulate`` (20,000 default rows and 3,000 random rows a day, random traffic pooled
a week at a time, every day's window reading the same pools) and ``fairmon backfill`` of its days; then the
project's ``alerts`` table and ``reo`` verdicts are read back. At the line (rec-rate 0.32/0.40, true REO
1/9, seeds 1–20 by default) it counts the projects with an ``exceeds`` alert and, beside them, those where
some day's daily verdict was ``exceeds`` (the naive rule the alerts replace); for REO 0.25 (rec-rate
0.30/0.50, seed 99) it prints the day of the first ``exceeds`` alert. Why the CLI and not a count-level
simulation (bench/alerts.py): it checks the whole path, windows, clustering and state machine included.

    python bench/alerts_projects.py [--seeds 1-20] [--days 30] [--work /tmp/fairmon-alerts]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from common import calibration

START = dt.date(2026, 1, 1)
AT_LINE = ("0.32,0.40", "line")
REO_025 = ("0.30,0.50", "REO 0.25")


def _fairmon(*args: str) -> str:
    exe = Path(sys.executable).with_name("fairmon")
    done = subprocess.run([str(exe), *args], capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):  # 1: a day quarantined, still a run
        raise RuntimeError(f"fairmon {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


def project(work: Path, seed: int, rec_rate: str, days: int) -> dict:
    """Simulate and backfill one project; its alerts and daily verdicts."""
    out = work / f"seed{seed:03d}-{rec_rate.replace(',', '_')}"
    shutil.rmtree(out, ignore_errors=True)
    _fairmon(
        "simulate", "--out", str(out), "--days", str(days), "--rows-per-day", "20000", "--random-rows-per-day",
        "3000", "--rec-share", "0.5,0.5", "--rec-rate", rec_rate, "--rand-share", "0.5,0.5", "--rand-rate",
        "0.25,0.25", "--seed", str(seed), "--format", "parquet",
    )  # fmt: skip
    cfg = str(out / "fairmon.toml")
    end = START + dt.timedelta(days=days - 1)
    _fairmon("backfill", "-c", cfg, "--start", str(START), "--end", str(end))
    alerts = json.loads(_fairmon("alerts", "-c", cfg, "--since", str(START), "--json"))["alerts"]
    verdicts = json.loads(_fairmon("sql", "-c", cfg, "--json", "select ds, verdict_80pct from reo_published"))
    first = min((a["ds"] for a in alerts if a["kind"] == "exceeds"), default=None)
    naive = min((r["ds"] for r in verdicts["rows"] if r["verdict_80pct"] == "exceeds"), default=None)
    return {"seed": seed, "first_alert": first, "first_daily_exceeds": naive, "alerts": len(alerts)}


def _day_number(ds: str | None) -> int | None:
    return None if ds is None else (dt.date.fromisoformat(ds) - START).days + 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1-20", help="seeds of the projects at the line, a-b")
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--work", type=Path, default=Path("/tmp/fairmon-alerts"))
    args = ap.parse_args(argv)
    a, b = (int(x) for x in args.seeds.split("-"))
    args.work.mkdir(parents=True, exist_ok=True)
    t0, c0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    line = []
    for seed in range(a, b + 1):
        r = project(args.work, seed, AT_LINE[0], args.days)
        line.append(r)
        print(
            f"line seed {seed:3d}: first exceeds alert on day {_day_number(r['first_alert'])}, "
            f"first daily exceeds verdict on day {_day_number(r['first_daily_exceeds'])}",
            flush=True,
        )
    strong = project(args.work, 99, REO_025[0], args.days)
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    calib = calibration()
    print(f"REO 0.25 (seed 99): first exceeds alert on day {_day_number(strong['first_alert'])}")
    cpu = c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime
    wall = time.perf_counter() - t0
    print(
        f"CPU {cpu:.1f} s in the fairmon processes ({wall:.0f} s wall); `python -c 'import duckdb'`: {calib:.2f} CPU-s"
    )
    naive = sum(r["first_daily_exceeds"] is not None for r in line)
    print(f"naive rule (first daily exceeds): {naive} of {len(line)} projects at the line")
    alerted = sum(r["first_alert"] is not None for r in line)
    print(f"projects at the line with an exceeds alert within {args.days} days: {alerted} of {len(line)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
