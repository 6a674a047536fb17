"""Benchmark: are fairmon's intervals and verdicts honest in every regime? (issue 14)

Simulates count tables with a known truth and runs the estimators fairmon
publishes, printing per regime: coverage of the published interval ± its
Monte-Carlo SE, mean width, relative bias of the reported estimates, and the
share of replications answered NaN or ``inconclusive`` with a reason.

Regimes (DESIGN §4.1–4.3, §5):
1. REO, one arm: K ∈ {2, 4, 8, 16}, true REO ∈ {0, 0.02, 0.1, 0.33},
   expected positives per group ∈ {10, 30, 100, 1000}; a 2 % group (K = 16,
   10^4 random rows). ΔU coverage is printed beside REO's.
2. A/B (joint delta, delta_paper, paired partition, bootstrap B = 1000),
   judged on D_REO alone (issue 38): flips (with and without a change in
   REO), reduce, increase, near-parity arms, 100 to 2,000 random positives a
   group, K = 2…16; coverage, false-change rate at D_REO = 0, and how often
   the p-value disagrees with the interval; D_k coverage beside.
3. Prevalence at the threshold and SDT (``bench/coverage_decisions.py``).

A regime passes when coverage is within [0.93, 0.97]; or ≥ 0.93 where the
method is conservative by design: the REO interval at and near parity (true
REO within 2 delta-method SEs of 0, or signal energy K·REO² below 4× the
noise energy tr Var(ΔÛ), column ``near 0``), whose lower bound is
0 whenever parity is not rejected and whose upper bound never collapses, so
that it holds uniformly over the boundary; or when most replications
(≥ 50 %) are answered NaN/inconclusive with a reason and the published rest
cover ≥ 0.90. A/B rows answered near parity (the projection interval with a
reason, transforms/reo/ab_reo.py) in most replications are conservative by
design. Then how many regimes pass; last, the worst D_REO coverage and the
worst false-change rate at D_REO = 0 over all methods but ``delta_paper``.

    python bench/ci_coverage.py [--reps 2000] [--quick] [--ab-only] [--ab-reps 1000]
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fairmon.transforms.reo.ab import ab_estimates
from fairmon.transforms.reo.estimate import delta_u_covariance, estimate_reo, reo_of_utilities

N_DEFAULT = 100_000


def utilities_with_reo(K: int, reo: float) -> np.ndarray:
    """U (K,) with mean 1 and REO exactly ``reo``: a fixed zero-mean pattern scaled."""
    z = np.linspace(-1.0, 1.0, K)
    if K == 2:
        z = np.array([-1.0, 1.0])
    U = 1.0 + reo * np.sqrt(K) * z / np.linalg.norm(z)
    assert abs(reo_of_utilities(U) - reo) < 1e-12
    return U


def draw(shares: np.ndarray, n: int, rng: np.random.Generator, size: int) -> np.ndarray:
    """(size, K) positives per group of n rows with cell probabilities ``shares``."""
    return rng.multinomial(n, np.append(shares, 1.0 - shares.sum()), size=size)[:, :-1]


def reo_regime(args: tuple) -> dict:
    """One single-arm REO regime: K groups, truth ``reo``, expected positives per group."""
    K, reo, expected, reps, seed, small_share = args
    rng = np.random.default_rng(seed)
    U = utilities_with_reo(K, reo)
    n = N_DEFAULT
    if small_share:  # one group holds `small_share` of the positives, the rest share equally
        n = 10_000
        base = 0.3 * np.append(small_share, np.full(K - 1, (1 - small_share) / (K - 1)))
        P = base
    else:
        P = np.full(K, expected / n)
    Q = P * U / np.sum(P * U) * np.sum(P)
    a, b = draw(Q, n, rng, reps), draw(P, n, rng, reps)
    groups = [str(k) for k in range(K)]
    at_truth = estimate_reo(groups, n * Q, n, n * P, n)  # delta quantities at the truth (SE NaN at REO = 0)
    se_true = at_truth.se
    # noncentrality of ‖ΔÛ‖²: signal energy K·REO² over noise energy tr Σ (the norm's bias)
    v = 1 / (n * Q) + 1 / (n * P)
    signal_to_noise = K * reo**2 / float(np.trace(delta_u_covariance(U, v)))
    dU_true = U / U.mean() - 1
    cover, width, est, bc, answered, cover_du, pub_cover = [], [], [], [], 0, [], []
    for i in range(reps):
        e = estimate_reo(groups, a[i], n, b[i], n)
        est.append(e.reo)
        bc.append(e.reo_bc)
        flagged = e.verdict in ("inconclusive", "undefined") and any(e.small_group) or not np.isfinite(e.ci_low)
        answered += bool(flagged)
        if np.isfinite(e.ci_low):
            c = e.ci_low <= reo <= e.ci_high
            cover.append(c)
            width.append(e.ci_high - e.ci_low)
            if not flagged:
                pub_cover.append(c)
        ok = np.isfinite(e.ci_low_delta_U)
        if ok.all():
            cover_du.append(np.mean((e.ci_low_delta_U <= dU_true) & (dU_true <= e.ci_high_delta_U)))
    cov = float(np.mean(cover)) if cover else float("nan")
    est, bc = np.array(est, float), np.array(bc, float)

    def rel(x):
        return float(np.nanmean(x) / reo - 1) if reo > 0 else float(np.nanmean(x))

    return {
        "family": "reo",
        "regime": f"K={K} REO={reo:g} " + ("2% group n=1e4" if small_share else f"E+={expected}"),
        "reo": reo,
        "coverage": cov,
        "mc_se": float(np.sqrt(cov * (1 - cov) / max(len(cover), 1))),
        "mean_width": float(np.mean(width)) if width else float("nan"),
        "bias": rel(est),
        "bias_bc": rel(bc),
        "answered": answered / reps,
        "published_coverage": float(np.mean(pub_cover)) if pub_cover else float("nan"),
        "du_coverage": float(np.mean(cover_du)) if cover_du else float("nan"),
        "se_true": se_true,
        "signal_to_noise": signal_to_noise,
        # near the boundary: within 2 true SEs of parity, or noise energy above a quarter of the signal's
        "conservative": not (reo >= 2 * se_true and signal_to_noise >= 4),
    }


AB_SCENARIOS = {
    # name: (K, REO control, REO treatment, treatment's pattern reversed, random positives per group);
    # truth D_REO = REO_T − REO_C. The first six are issue 38's table; "mirror" flips keep REO (D_REO = 0).
    "K=2 flip (1000)": (2, 0.10, 0.156, True, 1000),
    "K=4 flip + change (500)": (4, 0.20, 0.128, True, 500),
    "K=2 flip (250)": (2, 0.10, 0.156, True, 250),
    "K=2 flip (100)": (2, 0.10, 0.156, True, 100),
    "K=2 mirror flip (100)": (2, 0.15, 0.15, True, 100),
    "K=4 near-parity control (500)": (4, 0.02, 0.204, False, 500),
    "K=2 reduce (2000)": (2, 0.20, 0.10, False, 2000),
    "K=4 increase (2000)": (4, 0.10, 0.20, False, 2000),
    "K=4 mirror flip (2000)": (4, 0.15, 0.15, True, 2000),
    "K=8 flip (2000)": (8, 0.10, 0.15, True, 2000),
    "K=8 near parity, mirror (100)": (8, 0.05, 0.05, True, 100),
    "K=16 flip (500)": (16, 0.10, 0.15, True, 500),
    "K=16 both at parity (500)": (16, 0.0, 0.0, False, 500),
    # unequal groups: random-traffic shares 30 % down to 3 % (geometric), 600 down to 60 random positives
    "K=8 unequal 30-3 %, flip (600-60)": (8, 0.15, 0.25, True, 2000, "unequal"),
}
#: Group shares of the "unequal" scenarios: geometric from 30 % to 3 %, summing to 1.
UNEQUAL = np.geomspace(0.30, 0.03, 8) / np.geomspace(0.30, 0.03, 8).sum()
AB_METHODS = ("delta", "delta_paper", "partition", "bootstrap")


def ab_regime(args: tuple) -> list[dict]:
    """One A/B scenario with every method, judged on D_REO alone (issue 38): coverage,
    false-change rate when D_REO = 0, share of rows answered with a near-parity or
    NaN reason, p-value/interval disagreement; D_k coverage printed beside."""
    name, reps, seed = args
    K, r_C, r_T, flip, e, *shape = AB_SCENARIOS[name]
    rng = np.random.default_rng(seed)
    U_C, U_T = utilities_with_reo(K, r_C), utilities_with_reo(K, r_T)
    U_T = U_T[::-1].copy() if flip else U_T
    n_arm, n_rand = 150_000, 43_000
    P = np.full(K, e / n_rand) if not shape else e * UNEQUAL / n_rand  # unequal: e random positives in all
    Q_C = P * U_C / np.sum(P * U_C) * 0.3
    Q_T = P * U_T / np.sum(P * U_T) * 0.3
    aC, aT, b = draw(Q_C, n_arm, rng, reps), draw(Q_T, n_arm, rng, reps), draw(P, n_rand, rng, reps)

    def metrics(U):
        return np.append(reo_of_utilities(U), U / U.mean() - 1)

    truth = metrics(U_T) - metrics(U_C)
    rec = {m: {"hit": [], "width": [], "false": [], "flag": 0, "nan": 0, "disagree": [], "dk": []} for m in AB_METHODS}
    groups = [str(k) for k in range(K)]
    for i in range(reps):
        for est in ab_estimates(
            groups, aT[i], n_arm, aC[i], n_arm, b[i], n_rand, methods=AB_METHODS, n_boot=1000, rng=rng
        ):
            r = rec[est.method]
            j = 0 if est.metric == "reo" else 1 + groups.index(est.metric.split(":", 1)[1])
            if not np.isfinite(est.ci_low):
                r["nan"] += j == 0 and est.reason is not None
                continue
            hit = est.ci_low <= truth[j] <= est.ci_high
            if j:
                r["dk"].append(hit)
                continue
            excl = est.ci_low > 0 or est.ci_high < 0
            r["hit"].append(hit)
            r["width"].append(est.ci_high - est.ci_low)
            r["flag"] += est.reason is not None and "near parity" in est.reason
            r["disagree"].append((est.p_value < 0.05) != excl)
            if abs(truth[0]) < 1e-12:
                r["false"].append(excl)
    out = []
    for m, r in rec.items():
        cov = float(np.mean(r["hit"])) if r["hit"] else float("nan")
        out.append(
            {
                "family": "ab",
                "regime": f"{name} {m}",
                "coverage": cov,
                "mc_se": float(np.sqrt(cov * (1 - cov) / max(len(r["hit"]), 1))),
                "mean_width": float(np.mean(r["width"])) if r["width"] else float("nan"),
                "answered": r["nan"] / reps,
                "published_coverage": cov,
                "false_change": float(np.mean(r["false"])) if r["false"] else float("nan"),
                "disagree": float(np.mean(r["disagree"])) if r["disagree"] else float("nan"),
                "du_coverage": float(np.mean(r["dk"])) if r["dk"] else float("nan"),
                # most rows near parity: the projection interval, conservative by design, with a reason
                "conservative": r["flag"] >= 0.5 * max(len(r["hit"]), 1),
                "documented": m == "delta_paper",
            }
        )
    return out


def judge(r: dict) -> bool:
    """Whether a regime passes (module docstring)."""
    if "ok" in r:  # bench/coverage_decisions.py judges its own regimes by the same rule
        # the conventional threshold interval is the non-default comparison method (documented to
        # under-cover where the local line is biased), like delta_paper for A/B
        return bool(r["ok"]) or "conventional" in r["regime"]
    cov = r["coverage"]
    if r.get("documented"):  # delta_paper is reported for comparison; its behaviour is documented, not promised
        return True
    if r["answered"] >= 0.5:
        pub = r.get("published_coverage", cov)
        return not np.isfinite(pub) or pub >= 0.90
    if not np.isfinite(cov):
        return False
    if r.get("conservative"):
        return cov >= 0.93
    return 0.93 <= cov <= 0.97


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000, help="replications per regime (A/B uses a quarter)")
    ap.add_argument("--quick", action="store_true", help="200 replications, for a smoke run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ab-reps", type=int, default=0, help="replications per A/B regime (default 1000)")
    ap.add_argument("--ab-only", action="store_true", help="only the A/B regimes (D_REO)")
    ap.add_argument("--ab-match", default="", help="only the A/B scenarios whose name contains this text")
    args = ap.parse_args()
    reps = 200 if args.quick else args.reps
    t0 = time.perf_counter()
    jobs = [
        (K, reo, e, reps, args.seed + 1000 * K + int(reo * 100) + e, None)
        for K in (2, 4, 8, 16)
        for reo in (0.0, 0.02, 0.1, 0.33)
        for e in (10, 30, 100, 1000)
    ]
    jobs += [(16, reo, 0, reps, args.seed + 7 + int(reo * 100), 0.02) for reo in (0.0, 0.1, 0.33)]
    ab_reps = args.ab_reps or (100 if args.quick else 1000)
    ab_jobs = [(name, ab_reps, args.seed + 31 * i) for i, name in enumerate(AB_SCENARIOS) if args.ab_match in name]
    with ProcessPoolExecutor(max_workers=2) as pool:
        rows = [] if args.ab_only else list(pool.map(reo_regime, jobs, chunksize=2))
        for r in pool.map(ab_regime, ab_jobs):
            rows += r
    try:
        import coverage_decisions

        rows += [] if args.ab_only else coverage_decisions.run(reps=reps, seed=args.seed)
    except ImportError:
        print("(bench/coverage_decisions.py not present: threshold and SDT regimes skipped)")
    print(
        f"{'family':7} {'regime':32} {'coverage':>16} {'width':>8} {'bias':>8} {'bias_bc':>8} "
        f"{'answered':>8} {'ΔU cov':>7} {'near 0':>6} {'pass':>5}"
    )
    passed = 0
    for r in rows:
        ok = judge(r)
        passed += ok
        print(
            f"{r['family']:7} {r['regime']:32} {r['coverage']:8.3f} ± {r['mc_se']:.3f} {r['mean_width']:8.4f} "
            f"{r.get('bias', float('nan')):+8.3f} {r.get('bias_bc', float('nan')):+8.3f} "
            f"{r.get('answered', r.get('nan_share', float('nan'))):8.2f} "
            f"{r.get('du_coverage', float('nan')):7.3f} {'yes' if r.get('conservative') else '':>6} "
            f"{'yes' if ok else 'NO':>5}"
            + (f"  false change={r['false_change']:.3f}" if np.isfinite(r.get("false_change", np.nan)) else "")
            + (f"  p/CI disagree={r['disagree']:.3f}" if "disagree" in r else "")
            + (f"  {r['note']}" if r.get("note") else "")
        )
    print(f"({time.perf_counter() - t0:.0f} s, {reps} replications per REO regime)")
    print(f"regimes passing: {passed}/{len(rows)}")
    ab = [r for r in rows if r["family"] == "ab" and not r.get("documented")]
    if ab:
        worst = min(ab, key=lambda r: r["coverage"] if np.isfinite(r["coverage"]) else 2.0)
        fc = [r for r in ab if np.isfinite(r.get("false_change", np.nan))]
        worst_fc = max(fc, key=lambda r: r["false_change"]) if fc else None
        print(f"worst D_REO coverage (all methods but delta_paper): {worst['coverage']:.3f} ({worst['regime']})")
        if worst_fc:
            print(
                f"worst false-change rate at D_REO = 0 (all methods but delta_paper): "
                f"{worst_fc['false_change']:.3f} ({worst_fc['regime']})"
            )


if __name__ == "__main__":
    main()
