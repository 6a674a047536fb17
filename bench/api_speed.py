"""Benchmark: the API's cost against a pandas groupby of the same counts (issue 55 item 3).

On a frame of N rows (traffic 30 % random, one group column of K = 8 values
as text, one boolean label), given as pandas (pandas 3's ``str`` columns) and
as Polars, each round times, in this process and warmed up (imports and first
calls excluded), the CPU seconds (``time.process_time``: user + system of
every thread of the process, DuckDB's and Polars' included) of:

* ``pandas groupby``: ``df.groupby(["traffic", "g"])["y"].agg(["sum", "count"])``
  on the pandas frame and the point REO from those counts (U = Q/P,
  std/mean), by hand: the reference;
* ``polars group_by``: the same on the Polars frame (for information);
* ``fairmon.reo``, ``fairmon.reo_groups`` and ``fairmon.group_counts`` on each frame.

Every round runs the calls in a new seeded random order: a call run right
after another that freed much memory pays that memory's page faults again
(system time), so a fixed order would charge them to one call. It prints each
call's median and rounds, checks that ``fairmon.reo`` gives the groupby's REO
to 1e-9 on both frames, prints the load average and the calibration
(``python -c "import duckdb"`` in a new process), each API call's ratio to the
pandas groupby (medians) per frame type and, last, the judged ratio: the
worst of those (target ≤ 1.5).

    .venv/bin/python bench/api_speed.py [--rows 10000000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time

import numpy as np
import pandas as pd
import polars as pl
from common import calibration

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


def group_by_reo(df: pl.DataFrame) -> float:
    """:func:`groupby_reo` with a Polars group_by."""
    counts = df.group_by("traffic", "g").agg(pl.col("y").sum().alias("a"), pl.len().alias("n"))
    rec, rand = (counts.filter(pl.col("traffic") == t).sort("g") for t in ("default", "random"))
    U = (rec["a"] / rec["n"].sum()) / (rand["a"] / rand["n"].sum())
    return float(U.std(ddof=0) / U.mean())


def cpu(call) -> tuple[float, float, object]:
    """(CPU seconds of this process, every thread, during ``call()``; the user part of them; its result)."""
    t0, u0 = time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_utime
    out = call()
    return time.process_time() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_utime - u0, out


def reo_of(df) -> float:
    """``fairmon.reo``'s point REO of ``df`` (pandas or Polars)."""
    out = fairmon.reo(df, group="g", label="y")
    return float(out["reo"][0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    frames = {"pandas": frame(args.rows)}
    frames["polars"] = pl.from_pandas(frames["pandas"])
    calls = {"pandas groupby": lambda: groupby_reo(frames["pandas"])}
    calls["polars group_by"] = lambda: group_by_reo(frames["polars"])
    for kind, df in frames.items():
        calls[f"fairmon.reo, {kind}"] = lambda df=df: reo_of(df)
        calls[f"fairmon.reo_groups, {kind}"] = lambda df=df: fairmon.reo_groups(df, group="g", label="y")
        calls[f"fairmon.group_counts, {kind}"] = lambda df=df: fairmon.group_counts(df, group="g", label="y")
    for call in calls.values():  # warm up: imports, first DuckDB connection
        call()
    load = os.getloadavg()
    seconds: dict[str, list[float]] = {name: [] for name in calls}
    user: dict[str, list[float]] = {name: [] for name in calls}
    results = {}
    order = np.random.default_rng(0)
    for _ in range(args.rounds):
        for name in order.permutation(list(calls)):
            s, u, results[name] = cpu(calls[name])
            seconds[name].append(s)
            user[name].append(u)
    report(args, seconds, user, results, load)


def report(args, seconds: dict, user: dict, results: dict, load: tuple) -> None:
    """Print the medians, the REO check, load, calibration and, last, the judged ratio."""
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    users = {name: statistics.median(values) for name, values in user.items()}
    print(f"{args.rows:,} rows, K = 8, {args.rounds} rounds (calls in random order), CPU seconds (median; user part):")
    for name, values in seconds.items():
        rounds = ", ".join(f"{v:.3f}" for v in values)
        print(f"  {name:30} {medians[name]:7.3f}  user {users[name]:6.3f}  (rounds: {rounds})")
    for kind in ("pandas", "polars"):
        ours = results[f"fairmon.reo, {kind}"]
        gap = abs(ours - results["pandas groupby"])
        print(f"REO, {kind}: fairmon {ours:.12f}, groupby {results['pandas groupby']:.12f}, |difference| {gap:.1e}")
        if gap > 1e-9:
            raise SystemExit(f"fairmon.reo on the {kind} frame and the groupby disagree beyond 1e-9")
    print(
        f"load average (1, 5, 15 min): {', '.join(f'{x:.2f}' for x in load)} before the rounds, "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} after"
    )
    print(f"calibration: python -c 'import duckdb' {calibration():.3f} CPU-s")
    calls = [f"fairmon.{c}, {kind}" for kind in ("pandas", "polars") for c in ("reo", "reo_groups", "group_counts")]
    ratios = {c: medians[c] / medians["pandas groupby"] for c in calls}
    print(
        "ratio to the pandas groupby, user part only (information): "
        + "; ".join(f"{c} {users[c] / users['pandas groupby']:.2f}" for c in calls)
    )
    print("ratio to the pandas groupby (medians): " + "; ".join(f"{k} {v:.2f}" for k, v in ratios.items()))
    worst = max(ratios, key=ratios.get)
    print(
        f"judged ratio (worst API call, pandas and Polars frames, / pandas groupby, CPU medians): "
        f"{ratios[worst]:.2f} ({worst}; target <= 1.5)"
    )


if __name__ == "__main__":
    main()
