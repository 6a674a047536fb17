"""Benchmark: do the intervals stay honest when rows share a request? (issue 20)

Simulated days (transforms/simulators/impressions.py) with requests of 8 rows that share a
request_id, at intra-class correlation 0, 0.1 and 0.3 of the positives
within a request, first with a group per row (an item attribute: at ICC 0
the rows are independent), then with one group per request (the requesting
user's attribute: group membership itself clusters, so even ICC 0 has a
design effect above 1); the truth (REO of the spec's Q/P) is known and the same at
every ICC. Each replication draws one day of default traffic and one day of
random traffic, hashes request ids into buckets as the count stage does for a
day of more than ``[estimation] cluster_exact_max`` clusters (``--buckets``,
``cluster_buckets``), and computes REO's 95 % interval twice:
multinomial (independent rows) and cluster-robust (transforms/reo/cluster.py).
Prints per ICC: coverage ± Monte-Carlo SE of both, the mean design effect,
and mean widths; last line: the worst robust coverage (target: each within
[0.93, 0.97]).

    python bench/cluster_coverage.py [--reps 1000] [--buckets 128]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import polars as pl

from fairmon.api.counting import cluster_bucket
from fairmon.transforms.reo.cluster import sums_from_rows
from fairmon.transforms.reo.estimate import estimate_reo, reo_of_utilities
from fairmon.transforms.simulators.impressions import SimulationSpec, simulate_day, simulate_random_pool

ATTR = "young_adult"


def day_sums(frame: pl.DataFrame, buckets: int, K: int):
    """(positives per group (K,), rows, BucketSums) of one simulated frame."""
    y = frame.select(pl.max_horizontal(pl.exclude("request_id", "item_id", ATTR, "arm")) > 0).to_series().to_numpy()
    g = frame.get_column(ATTR).to_numpy().astype(np.int64)
    b = cluster_bucket(frame.get_column("request_id"), buckets, exact=0).to_numpy()
    pos = np.bincount(g[y], minlength=K)
    return pos, frame.height, sums_from_rows(b, g, y, K)


def replicate(spec: SimulationSpec, seed: int, buckets: int) -> dict:
    spec = SimulationSpec(**{**spec.__dict__, "seed": seed})
    Q, P = spec.true_QP("all")
    truth = reo_of_utilities(Q / P)
    a, n_rec, c_rec = day_sums(simulate_day(spec, 0), buckets, spec.K)
    b, n_rand, c_rand = day_sums(simulate_random_pool(spec, spec.start, spec.start), buckets, spec.K)
    m = estimate_reo(["0", "1"], a, n_rec, b, n_rand)
    r = estimate_reo(["0", "1"], a, n_rec, b, n_rand, clusters_rec=c_rec, clusters_rand=c_rand)
    return {
        "m_cover": m.ci_low <= truth <= m.ci_high,
        "r_cover": r.ci_low <= truth <= r.ci_high,
        "m_width": m.ci_high - m.ci_low,
        "r_width": r.ci_high - r.ci_low,
        "deff": r.design_effect,
    }


def mc_se(p: float, reps: int) -> float:
    """Monte-Carlo SE of a coverage p over ``reps`` replications."""
    return float(np.sqrt(p * (1 - p) / reps))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--buckets", type=int, default=128)
    ap.add_argument("--rows", type=int, default=16_000, help="default and random rows per replication")
    args = ap.parse_args()
    t0 = time.perf_counter()
    print(
        f"requests of 8 rows, {args.rows} default + {args.rows} random rows, "
        f"{args.buckets} buckets, {args.reps} replications per ICC"
    )
    print(f"{'ICC':>5} {'multinomial':>18} {'robust':>18} {'design eff.':>12} {'width m/r':>16}")
    worst = 1.0
    for per_request, icc in [(False, 0.0), (False, 0.1), (False, 0.3), (True, 0.0), (True, 0.1), (True, 0.3)]:
        if icc == 0.0:
            print("group per request (user attribute):" if per_request else "group per row (item attribute):")
        spec = SimulationSpec(
            rows_per_day=args.rows,
            random_rows_per_day=args.rows,
            request_size=8,
            icc=icc,
            group_per_request=per_request,
        )
        res = [replicate(spec, s, args.buckets) for s in range(args.reps)]
        m = np.mean([x["m_cover"] for x in res])
        r = np.mean([x["r_cover"] for x in res])
        deff = np.mean([x["deff"] for x in res])
        mw, rw = np.mean([x["m_width"] for x in res]), np.mean([x["r_width"] for x in res])
        cov = f"{m:10.3f} ± {mc_se(m, len(res)):.3f} {r:10.3f} ± {mc_se(r, len(res)):.3f}"
        print(f"{icc:5.2f} {cov} {deff:12.2f} {mw:7.3f}/{rw:.3f}")
        worst = min(worst, r)
    print(f"{time.perf_counter() - t0:.0f} s")
    print(f"worst robust coverage: {worst:.3f} (target: within [0.93, 0.97] in every row)")


if __name__ == "__main__":
    main()
