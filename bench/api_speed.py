"""Benchmark: the API's cost against a pandas groupby of the same counts (issue 55 item 3).

On a pandas frame of N rows (traffic 30 % random, one group column of K = 8
values, one boolean label), each round times, in this process and warmed up
(imports and first calls excluded), the CPU seconds (``time.process_time``:
every thread of the process, DuckDB's included) of:

* ``groupby``: pandas ``df.groupby(["traffic", "g"])["y"].agg(["sum", "count"])``
  and the point REO from those counts (U = Q/P, std/mean), by hand;
* ``fairmon.reo``, ``fairmon.reo_groups`` and ``fairmon.group_counts`` on the
  same frame.

The rounds interleave the calls; it prints each call's median, checks that
``fairmon.reo`` gives the groupby's REO to 1e-9, prints the calibration
(``python -c "import duckdb"`` in a new process) and, last, the ratio of
``fairmon.reo``'s median to the groupby's (target ≤ 1.5).

    .venv/bin/python bench/api_speed.py [--rows 10000000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time

import numpy as np
import pandas as pd

import fairmon


def frame(rows: int, seed: int = 0) -> pd.DataFrame:
    """The bench's rows: traffic, g (8 groups, as text), y (boolean)."""
    rng = np.random.default_rng(seed)
    group = rng.integers(0, 8, rows)
    return pd.DataFrame(
        {
            "traffic": np.where(rng.random(rows) < 0.3, "random", "default"),
            "g": group.astype(str),
            "y": rng.random(rows) < 0.1 + 0.02 * group,
        }
    )


def groupby_reo(df: pd.DataFrame) -> float:
    """Point REO from a pandas groupby of the counts: U_k = (a_k/n_rec)/(b_k/n_rand), std/mean."""
    counts = df.groupby(["traffic", "g"])["y"].agg(["sum", "count"])
    rec, rand = counts.loc["default"], counts.loc["random"]
    U = (rec["sum"] / rec["count"].sum()) / (rand["sum"] / rand["count"].sum())
    return float(U.std(ddof=0) / U.mean())


def cpu(call) -> tuple[float, object]:
    """(CPU seconds of this process, every thread, during ``call()``, its result)."""
    t0 = time.process_time()
    out = call()
    return time.process_time() - t0, out


def calibration() -> float:
    """CPU seconds of ``python -c "import duckdb"`` in a new process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", "import duckdb"], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    df = frame(args.rows)
    calls = {
        "groupby": lambda: groupby_reo(df),
        "fairmon.reo": lambda: float(fairmon.reo(df, group="g", label="y")["reo"].iloc[0]),
        "fairmon.reo_groups": lambda: fairmon.reo_groups(df, group="g", label="y"),
        "fairmon.group_counts": lambda: fairmon.group_counts(df, group="g", label="y"),
    }
    for call in calls.values():  # warm up: imports, first DuckDB connection
        call()
    seconds: dict[str, list[float]] = {name: [] for name in calls}
    results = {}
    for _ in range(args.rounds):
        for name, call in calls.items():
            s, results[name] = cpu(call)
            seconds[name].append(s)
    print(f"{args.rows:,} rows, K = 8, {args.rounds} interleaved rounds, CPU seconds of this process (median):")
    for name, values in seconds.items():
        print(f"  {name:22} {statistics.median(values):7.3f}  (rounds: {', '.join(f'{v:.3f}' for v in values)})")
    gap = abs(results["fairmon.reo"] - results["groupby"])
    print(f"REO: fairmon {results['fairmon.reo']:.12f}, groupby {results['groupby']:.12f}, |difference| {gap:.1e}")
    if gap > 1e-9:
        raise SystemExit("fairmon.reo and the groupby disagree beyond 1e-9")
    print(f"calibration: python -c 'import duckdb' {calibration():.3f} CPU-s")
    ratio = statistics.median(seconds["fairmon.reo"]) / statistics.median(seconds["groupby"])
    print(f"fairmon.reo / pandas groupby (CPU, medians): {ratio:.2f}")


if __name__ == "__main__":
    main()
