"""Bench: which bootstrap interval for D_REO covers in every A/B regime?

The percentile interval of D_REO* (seed 001 Algorithm 4) misses one side in
an unequal-groups regime (K = 8, random-traffic shares 30 % down to 3 %,
REO 0.15 -> 0.25 with a flip; bench/README.md). This bench compares, on the same draws
and with what fairmon publishes near parity (the projection row, which
replaces every method's interval there):

* ``pct``: the plain percentile interval of D*;
* ``bca``: BCa (Efron & Tibshirani 1993 §14.3, eqs. 14.9-14.15), the
  acceleration from the jackknife grouped by cell (defined below);
* ``shift``: the percentile interval moved by −2·(mean(D*) − D̂);
* ``shift1``: moved by −(mean(D*) − D̂) (centred on the bias-corrected D̂);
* ``student``: the bootstrap-t interval, D̂ − t*·SE with t* = (D* − D̂)/SE*
  and SE the delta-method SE of D_REO on the data or the replicate (Efron &
  Tibshirani 1993 §12.5): what fairmon publishes.

    python bench/ab_bootstrap_variants.py [--reps 1500] [--seed 4]

Prints each variant's coverage per scenario and, last, the worst coverage of
each variant over the scenarios (judged: ≥ 0.94 in every scenario).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy import special

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ci_coverage import AB_SCENARIOS, UNEQUAL, draw, utilities_with_reo

from fairmon.transforms.reo.ab import ab_estimates
from fairmon.transforms.reo.ab_bootstrap import d_reo_se_rows, replicate_utilities
from fairmon.transforms.reo.ab_reo import percentile_bounds
from fairmon.transforms.reo.bootstrap import (
    bca_acceleration,
    bca_levels,
    grouped_jackknife,
    reo_rows,
    resample_counts,
    utilities,
)
from fairmon.transforms.reo.cluster import BucketSums
from fairmon.transforms.reo.estimate import reo_of_utilities

_NAN3 = (float("nan"),) * 3


def bca_bounds(theta_hat: float, reps: np.ndarray, a_hat: float, level: float) -> tuple[float, float, float]:
    """(lower, upper, p-value) of the BCa interval from B replicates ``reps``
    (B,) around the estimate ``theta_hat``, acceleration ``a_hat``, at
    ``level``: the j-th smallest replicate, j = ⌈B·α₁⌉, and the j-th largest,
    j = ⌈B·(1 − α₂)⌉, at the BCa levels α₁, α₂ (Efron & Tibshirani eqs.
    14.9–14.10); the p-value is the smallest α whose interval excludes 0
    (module docstring). NaNs when a replicate is not finite or every
    replicate lies on one side of the estimate (ẑ₀ infinite). Raises nothing."""
    reps = np.asarray(reps, float)
    if not np.isfinite(theta_hat) or not np.isfinite(reps).all():
        return _NAN3
    a1, a2 = bca_levels(theta_hat, reps, a_hat, level)
    if not (np.isfinite(a1) and np.isfinite(a2)):
        return _NAN3
    B = reps.size
    ordered = np.sort(reps)
    lo = ordered[max(int(np.ceil(B * a1 - 1e-9)) - 1, 0)]
    hi = ordered[B - 1 - max(int(np.ceil(B * (1 - a2) - 1e-9)) - 1, 0)]
    pct = (np.count_nonzero(reps < theta_hat) + np.count_nonzero(reps <= theta_hat)) / (2 * B)
    z0 = float(special.ndtri(pct))
    below, above = np.count_nonzero(reps <= 0) / B, np.count_nonzero(reps >= 0) / B
    return float(lo), float(hi), min(1.0, _excluding(below, z0, a_hat), _excluding(above, -z0, -a_hat))


def _excluding(share: float, z0: float, a_hat: float) -> float:
    """The level α above which the BCa bound on one side passes 0: the
    lower bound exceeds 0 when fewer than B·α₁(α) replicates are ≤ 0, and
    α₁(α) = Φ(z0 + w/(1 − â·w)), w = z0 + Φ⁻¹(α/2), so α = 2Φ(t/(1 + â·t) − z0)
    with t = Φ⁻¹(share) − z0. The upper side is the same map with ẑ₀ and â
    negated. 0 when no replicate is on that side, or when the map never
    reaches ``share`` (1 + â·t ≤ 0: every level excludes 0)."""
    if share <= 0:
        return 0.0
    if share >= 1:
        return 1.0
    t = float(special.ndtri(share)) - z0
    if 1 + a_hat * t <= 0:
        return 0.0
    return float(min(1.0, 2 * special.ndtr(t / (1 + a_hat * t) - z0)))


def d_reo(treatment, control, random) -> float:
    """D_REO = REO(U_T) − REO(U_C) of (positives (K,), rows) per sample."""
    (aT, nT), (aC, nC), (b, nR) = treatment, control, random
    return float(_d_reo_rows(np.asarray(aT)[None], np.asarray(aC)[None], np.asarray(b)[None], [nT], [nC], [nR])[0])


def _d_reo_rows(aT, aC, b, nT, nC, nR) -> np.ndarray:
    return reo_rows(utilities(aT, nT, b, nR)) - reo_rows(utilities(aC, nC, b, nR))


def replicates(samples, rng, B=1000) -> tuple[np.ndarray, np.ndarray]:
    """B joint bootstrap replicates of D_REO (both arms and the shared random traffic) and their delta SEs."""
    draws = [resample_counts(pos, n, B, rng) for pos, n in samples]
    ones = np.ones(B)
    sizes = tuple(ones * n for _, n in samples)
    T, C = replicate_utilities(tuple(draws), sizes)(slice(None), slice(None))
    return reo_rows(T) - reo_rows(C), d_reo_se_rows(*draws, *sizes)


def regime(name: str) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, float]:
    """A scenario of bench/ci_coverage.py: (K, random-traffic shares P, arms' shares Q_C and Q_T, true D_REO),
    150,000 rows an arm and 43,000 random rows."""
    K, r_C, r_T, flip, e, *shape = AB_SCENARIOS[name]
    U_C, U_T = utilities_with_reo(K, r_C), utilities_with_reo(K, r_T)
    U_T = U_T[::-1].copy() if flip else U_T
    P = np.full(K, e / 43_000) if not shape else e * UNEQUAL / 43_000
    Q_C, Q_T = (P * U / np.sum(P * U) * 0.3 for U in (U_C, U_T))
    return K, P, Q_C, Q_T, reo_of_utilities(U_T) - reo_of_utilities(U_C)


def scenario(name: str, reps: int, seed: int) -> dict[str, float]:
    """Coverage of each variant in one scenario of bench/ci_coverage.py (unclustered rows)."""
    K, P, Q_C, Q_T, truth = regime(name)
    rng, n_arm, n_rand = np.random.default_rng(seed), 150_000, 43_000
    aC, aT, b = draw(Q_C, n_arm, rng, reps), draw(Q_T, n_arm, rng, reps), draw(P, n_rand, rng, reps)
    hits: dict[str, list[bool]] = {k: [] for k in ("pct", "bca", "shift", "shift1", "student")}
    groups = [str(k) for k in range(K)]
    for i in range(reps):
        samples = ((aT[i], n_arm), (aC[i], n_arm), (b[i], n_rand))
        (row,) = [x for x in ab_estimates(groups, aT[i], n_arm, aC[i], n_arm, b[i], n_rand) if x.metric == "reo"]
        if "near parity" in (row.reason or ""):  # fairmon publishes the projection for every method here
            for k in hits:
                hits[k].append(row.ci_low <= truth <= row.ci_high)
            continue
        (d, se_b), th = replicates(samples, rng), d_reo(*samples)
        se = float(d_reo_se_rows(*(np.asarray(x)[None] for x, _ in samples), *([n] for _, n in samples))[0])
        t = np.sort((d - th) / se_b)
        j = max(int(np.ceil(t.size * 0.025 - 1e-9)) - 1, 0)
        lo, hi = (x[0] for x in percentile_bounds(d[:, None], 0.95))
        a_hat = bca_acceleration(grouped_jackknife(_d_reo_rows, samples))
        bias = d.mean() - th
        found = {
            "pct": (lo, hi),
            "bca": bca_bounds(th, d, a_hat, 0.95)[:2],
            "shift": (lo - 2 * bias, hi - 2 * bias),
            "shift1": (lo - bias, hi - bias),
            "student": (th - t[t.size - 1 - j] * se, th - t[j] * se),
        }
        for k, (low, high) in found.items():
            hits[k].append(low <= truth <= high)
    return {k: float(np.mean(v)) for k, v in hits.items()}


def clustered(name: str, reps: int, seed: int, m: int) -> dict[str, float]:
    """Coverage of what fairmon publishes (``bootstrap``: resampling whole clusters, D_REO's
    bootstrap-t; ``delta``: the joint sandwich) when rows come in clusters of ``m`` (users):
    cluster c's m rows are multinomial with group shares Q_k·θ_c, θ_c = min(Gamma(2, 1/2), 3)
    shared by its groups (about mean 1, variance 1/2); the truth is the scenario's D_REO
    (θ's mean is the same for every group, so the utilities' ratios are the scenario's)."""
    K, P, Q_C, Q_T, truth = regime(name)
    rng, n_arm, n_rand = np.random.default_rng(seed), 150_000, 43_000

    def sample(Q: np.ndarray, n: int) -> BucketSums:
        shares = Q[None] * np.minimum(rng.gamma(2.0, 0.5, n // m), 3.0)[:, None]
        pos = rng.multinomial(m, np.concatenate([shares, 1 - shares.sum(1, keepdims=True)], axis=1))[:, :-1]
        return BucketSums(pos, np.full(n // m, float(m)))

    hits: dict[str, list[bool]] = {"bootstrap": [], "delta": []}
    groups = [str(k) for k in range(K)]
    for _ in range(reps):
        c = (sample(Q_T, n_arm), sample(Q_C, n_arm), sample(P, n_rand))
        sums = [x for s in c for x in (s.pos.sum(0).astype(np.int64), int(s.rows.sum()))]
        for row in ab_estimates(groups, *sums, methods=("delta", "bootstrap"), rng=rng, clusters=c):
            if row.metric == "reo":
                hits[row.method].append(row.ci_low <= truth <= row.ci_high)
    return {k: float(np.mean(v)) for k, v in hits.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=4)
    ap.add_argument("--match", default="", help="only scenarios whose name contains this text")
    ap.add_argument("--clustered", type=int, default=0, help="rows in clusters of this size: fairmon's two rows")
    args = ap.parse_args()
    names = [n for n in AB_SCENARIOS if args.match in n and "parity" not in n and "mirror" not in n]
    worst: dict[str, float] = {}
    for name in names:
        if args.clustered:
            cov = clustered(name, args.reps, args.seed, args.clustered)
        else:
            cov = scenario(name, args.reps, args.seed)
        mc = np.sqrt(0.95 * 0.05 / args.reps)
        print(f"{name:36} " + "  ".join(f"{k} {v:.3f}" for k, v in cov.items()) + f"  (MC SE ≈ {mc:.3f})")
        worst = {k: min(worst.get(k, 1.0), v) for k, v in cov.items()}
    print("worst coverage per variant: " + ", ".join(f"{k} {v:.3f}" for k, v in worst.items()))


if __name__ == "__main__":
    main()
