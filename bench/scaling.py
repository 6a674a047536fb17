"""How a backfill's cost grows with days, rows and groups (issue 21 target 3).

Every point is a cold ``fairmon backfill`` in a new process on a fresh
project (warehouse, DuckDB file and GX project removed), as a user runs it,
over simulated TikTok-format logs (pipelines/simulated.py: two arms of
``rows`` default rows each per day, ``rows``·43/300 random rows a day
pooled over 7 days, one attribute). Beside each point, the raw group-by
itself: one hand-written DuckDB query over the same files counting rows and
positives per (traffic, arm, group) (best of 3, in this process).

Three series:
- days: 1, 7, 30, 90 and 365 days at TikTok size (150,000 rows an arm a day);
- rows: 7 days at 0.25, 1 and 4 times that;
- groups: 7 days at TikTok size, one attribute of K = 2, 16, 256 and 4096
  groups (equal shares, rates spread over 0.28-0.36 and 0.25-0.28);
- contract groups: data unlike the simulator's (:func:`make_contract_data`):
  contract-format Parquet, 2.4 M rows over 7 days, 30 % random traffic, one
  arm, requests of 10 rows (clustered by request_id, the default), group
  shares geometric (the largest 10 times the smallest), random traffic
  pooled over 7 days, K = 2 and 4096.

Fitted by least squares over the days and rows series:
seconds = fixed + per_day · days + per_row · rows; printed with each point's
residual. For the groups series, each run's seconds against K = 2's, beside
the group-by's.

    .venv/bin/python bench/scaling.py [--days 1,7,30,90,365] [--scales 0.25,1,4] [--groups 2,16,256,4096]
                                      [--repeat 2]
    .venv/bin/python bench/scaling.py --against ../before [--days 7,30] [--rounds 3]

``--against CHECKOUT`` compares this checkout with another one (its own
``.venv``) instead: for each range of days, cold backfills of both over the
same data, interleaved (A B, then B A, ... so that a machine busy with other
work slows both alike), timed in CPU seconds of the backfill process and its
children (user + system: what a shared machine's load changes least); wall
seconds beside. Last line: the median CPU seconds of this checkout over the
other's, per range and over all.

Ranges of up to 30 days take the best of ``--repeat`` runs (about 17 minutes
in all on 2 cores).

Then the figures of the days and rows series: the fitted per-day and per-row
costs, the largest relative residual of the linear fit (linear in days and
rows: small) and the growth from K = 2 to the largest K of the backfill ÷
that of the group-by (no worse than the group-by: <= 1, allowing for noise);
the calibration (``python -c "import duckdb"``, CPU-s, median of 3) and the
load average; last, the ratio judged (issue 55 item 5): the CPU seconds of
the largest K's backfill over the smallest's, per data set (target <= 2).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
from common import DEFAULT_DATA, ROOT, Stopwatch, calibration, children_cpu
from daily import fresh

from fairmon.transforms.simulators.impressions import TIKTOK_ATTRIBUTE, TIKTOK_SIGNALS, SimulationSpec

ROWS = 150_000  # default rows per arm and day (TikTok size)
RANDOM_ROWS = 43_000


@dataclass
class Point:
    series: str
    days: int
    rows: int  # impression rows read (default + random rows of the days)
    K: int
    seconds: float
    raw: float
    cpu: float = float("nan")  # CPU seconds of the backfill's process tree (the best run's)
    peak: float = float("nan")  # its peak resident GB


def make_data(folder: Path, days: int, scale: float = 1.0, K: int = 2) -> Path:
    """Write (or reuse) ``days`` days of simulated logs with ``scale`` times
    TikTok size and ``K`` groups under ``folder``; returns its config."""
    from fairmon.pipelines.simulation.simulated import write_simulation

    cfg = folder / "fairmon.toml"
    if cfg.is_file() and len(list((folder / "default").glob("*.parquet"))) == days:
        return cfg
    spread = {}
    if K != 2:
        share = (1 / K,) * K
        spread = dict(
            rec_share=share,
            rec_rate=tuple(np.linspace(0.28, 0.36, K)),
            rand_share=share,
            rand_rate=tuple(np.linspace(0.25, 0.28, K)),
        )
    spec = SimulationSpec(
        days=days,
        rows_per_day=int(ROWS * scale),
        random_rows_per_day=int(RANDOM_ROWS * scale),
        arms={"control": {}, "treatment": {0: 1.25}},
        **spread,
    )
    print(f"  writing {folder} ({days} days, {scale}x, K = {K})", flush=True)
    write_simulation(spec, folder, fmt="parquet")
    return cfg


def make_contract_data(folder: Path, K: int, days: int = 7, rows: int = 2_400_000, seed: int = 3) -> Path:
    """Write (or reuse) contract-format logs unlike the simulator's under
    ``folder`` (module docstring: ``rows`` over ``days`` days, 30 % random
    traffic pooled over 7 days, requests of 10 rows, K groups of geometric
    shares, positive rates 0.20-0.40 in default and 0.20-0.30 in random
    traffic); returns its config."""
    import polars as pl

    cfg = folder / "fairmon.toml"
    if cfg.is_file() and len(list((folder / "logs").glob("*.parquet"))) == days:
        return cfg
    print(f"  writing {folder} (contract, {days} days, {rows:,} rows, K = {K})", flush=True)
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    share = np.geomspace(1.0, 0.1, K)
    share /= share.sum()
    rate_rec, rate_rand = np.linspace(0.20, 0.40, K), np.linspace(0.20, 0.30, K)
    start, per_day = SimulationSpec().start, rows // days
    for d in range(days):
        g = rng.choice(K, size=per_day, p=share)
        random = rng.random(per_day) < 0.3
        like = rng.random(per_day) < np.where(random, rate_rand[g], rate_rec[g])
        pl.DataFrame(
            {
                "ds": start + dt.timedelta(days=d),
                "traffic": np.where(random, "random", "default"),
                "request_id": (np.arange(per_day) // 10 + d * per_day).astype(str),
                "like": like.astype(np.int8),
                "creator_group": pl.Series(g).cast(pl.String),
            }
        ).write_parquet(folder / "logs" / f"{start + dt.timedelta(days=d)}.parquet")
    cfg.write_text(
        'warehouse = "warehouse"\nduckdb = "fairmon.duckdb"\n[impressions]\nformat = "contract"\n'
        'path = "logs/{ds}.parquet"\nsignals = ["like"]\nattributes = ["creator_group"]\nrandom_window_days = 7\n'
    )
    return cfg


def day_files(folder: Path, days: int) -> tuple[list[Path], list[Path]]:
    """The first ``days`` default files and the random pools they use."""
    default = sorted((folder / "default").glob("*.parquet"))[:days]
    last = default[-1].stem
    random = [p for p in sorted((folder / "random").glob("*.parquet")) if p.stem.split("_")[1] <= last]
    return default, random


def raw_groupby(default: list[Path], random: list[Path]) -> tuple[float, int]:
    """The group-by itself: rows and positives (any signal) per (traffic, arm,
    group) over the files, in DuckDB. Returns (best of 3 seconds, rows read)."""
    y = " OR ".join(f"{s} = 1" for s in TIKTOK_SIGNALS)
    q = f"""
        SELECT 'default' AS traffic, arm, {TIKTOK_ATTRIBUTE} AS g, count(*) AS n, count_if({y}) AS pos
        FROM read_parquet($d) GROUP BY ALL
        UNION ALL
        SELECT 'random', 'all', {TIKTOK_ATTRIBUTE}, count(*), count_if({y}) FROM read_parquet($r) GROUP BY ALL
    """
    con = duckdb.connect()
    params = {"d": [str(p) for p in default], "r": [str(p) for p in random]}
    best, rows = float("inf"), 0
    for _ in range(3):
        with Stopwatch() as w:
            out = con.execute(q, params).fetchall()
        best, rows = min(best, w.seconds), sum(r[3] for r in out)
    con.close()
    return best, rows


def backfill(folder: Path, days: int, checkout: Path = ROOT) -> float:
    """A cold ``fairmon backfill`` of the first ``days`` days by ``checkout``
    (this one by default, with the running interpreter); its wall seconds."""
    return timed_backfill(folder, days, checkout)[0]


def timed_backfill(folder: Path, days: int, checkout: Path = ROOT) -> tuple[float, float]:
    """:func:`backfill`; (wall seconds, CPU seconds of the process and its children)."""
    wall, cpu, _ = measured_backfill(folder, days, checkout)
    return wall, cpu


def measured_backfill(folder: Path, days: int, checkout: Path = ROOT) -> tuple[float, float, float]:
    """:func:`backfill` under ``/usr/bin/time``; (wall seconds, CPU seconds of
    the process and its children, peak resident GB of the largest of them)."""
    fresh(folder)
    start = SimulationSpec().start
    end = start + dt.timedelta(days=days - 1)
    python = sys.executable if checkout == ROOT else str(checkout / ".venv" / "bin" / "python")
    cmd = ["/usr/bin/time", "-f", "%M", python, "-m", "fairmon", "backfill", "-c", str(folder / "fairmon.toml")]
    cmd += ["--start", str(start), "--end", str(end)]
    before = children_cpu()
    with Stopwatch() as w:
        res = subprocess.run(cmd, cwd=checkout, capture_output=True, text=True)
    cpu = children_cpu() - before
    if res.returncode:
        tail = f"{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
        raise SystemExit(f"fairmon backfill failed ({checkout}, {folder}, {days} days):\n{tail}")
    peak = int(res.stderr.strip().splitlines()[-1]) / 1024**2  # KiB
    return w.seconds, cpu, peak


def compare(other: Path, data: Path, day_counts: list[int], rounds: int) -> None:
    """This checkout against ``other`` over the same data (:func:`make_data`
    for the longest range), interleaved; prints each run and the ratios."""
    other = other.resolve()
    folder = data / f"days{max(day_counts)}"
    make_data(folder, max(day_counts))
    ratios: list[float] = []
    for n in day_counts:
        cpu: dict[str, list[float]] = {"this": [], "other": []}
        for r in range(rounds):
            order = [("this", ROOT), ("other", other)]
            for name, checkout in order if r % 2 == 0 else order[::-1]:
                wall, c = timed_backfill(folder, n, checkout)
                cpu[name].append(c)
                print(f"  days {n:4}  round {r + 1}  {name:5}  cpu {c:7.2f} s  wall {wall:7.2f} s", flush=True)
        ratio = statistics.median(cpu["this"]) / statistics.median(cpu["other"])
        ratios.append(ratio)
        print(
            f"days {n}: median cpu this {statistics.median(cpu['this']):.2f} s, "
            f"other {statistics.median(cpu['other']):.2f} s, this/other {ratio:.3f}",
            flush=True,
        )
    per = ", ".join(f"{n} days {x:.3f}" for n, x in zip(day_counts, ratios, strict=True))
    print(f"CPU seconds this/other ({ROOT} vs {other}): {per}; geometric mean {statistics.geometric_mean(ratios):.3f}")


def measure(series: str, folder: Path, days: int, K: int, repeat: int) -> Point:
    """One point: the best of ``repeat`` cold backfills (by CPU seconds) for
    ranges of up to 30 days (single runs vary by +-30 % here), one run for
    longer ranges."""
    raw, rows = raw_groupby(*day_files(folder, days))
    runs = [measured_backfill(folder, days) for _ in range(repeat if days <= 30 else 1)]
    wall, cpu, peak = min(runs, key=lambda r: r[1])
    p = Point(series, days, rows, K, wall, raw, cpu, peak)
    print(
        f"  {series:6} days {days:4}  rows {rows:>11,}  K {K:5}  backfill {p.cpu:7.2f} CPU-s ({p.seconds:7.2f} s wall, "
        f"peak {peak:.2f} GB)  group-by {raw:6.3f} s",
        flush=True,
    )
    return p


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", type=ints, default=[1, 7, 30, 90, 365], help="days of the days series")
    ap.add_argument("--scales", type=lambda t: [float(x) for x in t.split(",")], default=[0.25, 1.0, 4.0])
    ap.add_argument("--groups", type=ints, default=[2, 16, 256, 4096], help="K of the groups series")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA / "scaling")
    ap.add_argument("--repeat", type=int, default=2, help="best of this many runs for ranges of up to 30 days")
    ap.add_argument("--against", type=Path, help="compare with this checkout (its .venv) instead, in CPU seconds")
    ap.add_argument("--rounds", type=int, default=3, help="with --against: interleaved runs of each checkout")
    ap.add_argument("--contract-groups", type=ints, default=[2, 4096], help="K of the contract groups series")
    args = ap.parse_args()
    if args.against is not None:
        compare(args.against, args.data, args.days, args.rounds)
        return

    points: list[Point] = []
    longest = max(args.days, default=0)  # --days "": the groups series alone
    print(f"days series (TikTok size), data {args.data}")
    base = args.data / f"days{longest}"
    if longest:
        make_data(base, longest)
    points += [measure("days", base, n, 2, args.repeat) for n in args.days]
    print("rows series (7 days)")
    for s in args.scales if args.days else []:
        folder = base if s == 1.0 and longest >= 7 else args.data / f"scale{s:g}"
        make_data(folder, 7 if folder != base else longest, s)
        points.append(measure("rows", folder, 7, 2, args.repeat))
    print("groups series (7 days, TikTok size)")
    for K in args.groups:
        folder = base if K == 2 and longest >= 7 else args.data / f"K{K}"
        make_data(folder, 7 if folder != base else longest, 1.0, K)
        points.append(measure("groups", folder, 7, K, args.repeat))

    contract = []
    print("contract groups series (7 days, 2.4 M rows, 30 % random traffic)")
    for K in args.contract_groups:
        folder = args.data / f"contract_K{K}"
        make_contract_data(folder, K)
        runs = [measured_backfill(folder, 7) for _ in range(args.repeat)]
        wall, cpu, peak = min(runs, key=lambda r: r[1])
        contract.append(Point("contract", 7, 2_400_000, K, wall, float("nan"), cpu, peak))
        print(f"  contract  K {K:5}  backfill {cpu:7.2f} CPU-s ({wall:7.2f} s wall, peak {peak:.2f} GB)", flush=True)

    fit = [p for p in points if p.series in ("days", "rows")]
    fixed = per_day = per_row = worst = float("nan")
    if fit:
        X = np.array([[1.0, p.days, p.rows] for p in fit])
        t = np.array([p.seconds for p in fit])
        (fixed, per_day, per_row), *_ = np.linalg.lstsq(X, t, rcond=None)
        fitted = f"{fixed:.2f} + {per_day:.3f} x days + {per_row * 1e9:.0f} ns x rows"
        print(f"\nfit over {len(fit)} runs: seconds = {fitted}")
        worst = 0.0
        for p, pred in zip(fit, X @ np.array([fixed, per_day, per_row])):
            worst = max(worst, abs(p.seconds - pred) / p.seconds)
            print(f"  {p.series:5} days {p.days:4} rows {p.rows:>11,}: {p.seconds:7.2f} s, fitted {pred:7.2f} s")
    groups = sorted((p for p in points if p.series == "groups"), key=lambda p: p.K)
    growth = 1.0
    if groups:
        g0 = groups[0]
        print(f"groups: CPU seconds against K = {g0.K} (backfill | group-by wall), peak memory")
        for p in groups:
            print(f"  K {p.K:5}: {p.cpu / g0.cpu:5.2f}x | {p.raw / g0.raw:5.2f}x, peak {p.peak:.2f} GB")
        growth = (groups[-1].seconds / g0.seconds) / (groups[-1].raw / g0.raw)
        g1 = groups[-1]
        many = f"K = {g1.K}: CPU {g1.cpu:.2f} s = {g1.cpu / g0.cpu:.2f}x K = {g0.K} (target <= 2)"
        many += f", peak {g1.peak:.2f} GB"
    print(
        f"per-day cost {per_day:.3f} s, per-row cost {per_row * 1e9:.0f} ns, fixed {fixed:.1f} s; "
        f"largest residual of the linear fit {worst:.0%}; growth K = {groups[0].K if groups else '-'} -> "
        f"{groups[-1].K if groups else '-'} of the backfill / of the group-by = {growth:.2f}"
    )
    if groups:
        print(many + " (target <= 1.5 GB)")
    ratios = [f"{name} {c[-1].cpu / c[0].cpu:.2f}" for name, c in (("simulated", groups), ("contract", contract)) if c]
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"calibration: python -c 'import duckdb' {calibration():.2f} CPU-s (median of 3); load average {load}")
    print(f"K = largest over K = smallest, CPU seconds of the backfill (target <= 2): {', '.join(ratios)}")


if __name__ == "__main__":
    main()
