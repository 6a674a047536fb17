"""Benchmark: cost and calibration of the CI methods (issue: A/B fairness tests).

1. One TikTok-size day (150,000 default rows per arm, two arms, 43,000 random
   rows): wall time of each A/B method on the day's count tables (what the
   pipeline's estimator stage does after the SQL counts), and of the
   single-arm CI methods.
2. Over DAYS simulated days (default 300) at engagement rates of 20-40 %:
   coverage and mean width of the 95 % CIs of REO (single arm) and of D_REO
   (control vs each treatment).

Last line: the ratio it is judged by, bootstrap(B=100) / delta wall time.

    python bench/ci_methods.py [--days 300]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from fairmon.transforms.reo.ab import ab_estimates
from fairmon.transforms.reo.estimate import estimate_reo, reo_of_utilities
from fairmon.transforms.simulators.impressions import SimulationSpec

SPEC = SimulationSpec(arms={"control": {}, "deboost_1.25": {0: 1.25}, "deboost_2": {0: 2.0}, "boost_2": {1: 2.0}})
N_ARM, N_RAND = 150_000, 43_000
AB = ("delta", "delta_paper", "partition", "bootstrap")
SINGLE = ("delta", "delta_paper", "bootstrap_percentile", "bootstrap_normal", "bootstrap_bca")


def draw(Q, n, rng, size):
    return rng.multinomial(n, np.append(Q, 1 - Q.sum()), size=size)[:, :-1]


def timing(repeats: int = 20) -> dict[str, float]:
    rng = np.random.default_rng(0)
    QC, P = SPEC.true_QP("control")
    QT, _ = SPEC.true_QP("deboost_1.25")
    aC, aT, b = draw(QC, N_ARM, rng, 1)[0], draw(QT, N_ARM, rng, 1)[0], draw(P, N_RAND, rng, 1)[0]
    out = {}
    for m in AB:
        t0 = time.perf_counter()
        for _ in range(repeats):
            ab_estimates(["0", "1"], aT, N_ARM, aC, N_ARM, b, N_RAND, methods=(m,), folds=10, n_boot=100, rng=rng)
        out[f"ab:{m}"] = (time.perf_counter() - t0) / repeats
    for m in SINGLE:
        t0 = time.perf_counter()
        for _ in range(repeats):
            estimate_reo(["0", "1"], aC, N_ARM, b, N_RAND, ci_method=m, n_boot=1000, rng=rng)
        out[f"single:{m}"] = (time.perf_counter() - t0) / repeats
    # Reference only: the same bootstrap done by resampling rows instead of count tables.
    codes = [np.repeat(np.arange(3), np.append(x, n - x.sum())) for x, n in ((aT, N_ARM), (aC, N_ARM), (b, N_RAND))]
    t0 = time.perf_counter()
    for _ in range(100):
        for c in codes:
            np.bincount(c[rng.integers(0, c.size, c.size)], minlength=3)
    out["reference: row-level bootstrap B=100 (resampling only)"] = time.perf_counter() - t0
    return out


def coverage(days: int) -> tuple[dict, dict]:
    rng = np.random.default_rng(2024)
    QC, P = SPEC.true_QP("control")
    reo_c = reo_of_utilities(QC / P)
    aC, b = draw(QC, N_ARM, rng, days), draw(P, N_RAND, rng, days)
    single: dict[str, list] = {m: [] for m in SINGLE}
    for i in range(days):
        for m in SINGLE:
            e = estimate_reo(["0", "1"], aC[i], N_ARM, b[i], N_RAND, ci_method=m, n_boot=1000, rng=rng)
            single[m].append((e.ci_low <= reo_c <= e.ci_high, e.ci_high - e.ci_low))
    ab: dict[tuple[str, str], list] = {}
    for treatment in ("deboost_1.25", "deboost_2", "boost_2"):
        QT, _ = SPEC.true_QP(treatment)
        truth = reo_of_utilities(QT / P) - reo_c
        aT = draw(QT, N_ARM, rng, days)
        for i in range(days):
            for e in ab_estimates(
                ["0", "1"], aT[i], N_ARM, aC[i], N_ARM, b[i], N_RAND, methods=AB, n_boot=200, rng=rng
            ):
                if e.metric == "reo":
                    ab.setdefault((treatment, e.method), []).append(
                        (e.ci_low <= truth <= e.ci_high, e.ci_high - e.ci_low)
                    )
    return single, ab


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=300)
    args = ap.parse_args()

    t = timing()
    print("one TikTok-size day (count tables -> estimates), mean wall time per call:")
    for k, v in t.items():
        print(f"  {k:<54} {v * 1e3:9.3f} ms")

    single, ab = coverage(args.days)
    true_reo = reo_of_utilities(np.divide(*SPEC.true_QP("control")))
    print(f"\nsingle-arm REO, control arm, {args.days} days (true REO {true_reo:.4f}):")
    print(f"  {'method':<22} {'coverage':>9} {'mean width':>11}")
    for m, v in single.items():
        hit, w = np.mean([x[0] for x in v]), np.mean([x[1] for x in v])
        print(f"  {m:<22} {hit:9.3f} {w:11.4f}")
    print(f"\nD_REO = REO(treatment) - REO(control), {args.days} days:")
    print(f"  {'treatment':<14} {'method':<12} {'coverage':>9} {'mean width':>11}")
    for (treatment, m), v in ab.items():
        hit, w = np.mean([x[0] for x in v]), np.mean([x[1] for x in v])
        print(f"  {treatment:<14} {m:<12} {hit:9.3f} {w:11.4f}")
    ratio = t["ab:bootstrap"] / t["ab:delta"]
    print(f"\nratio bootstrap(B=100) / delta wall time (A/B, one TikTok-size day): {ratio:.1f}")


if __name__ == "__main__":
    main()
