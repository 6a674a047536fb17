"""Differentially private fairness audits of score logs (seed 000 §5).

An auditor receives, per group a, the histogram of scores among qualified
individuals, n_{a,q,y} (y = score bin), with Laplace noise of scale 1/ε added
to every bin. Each person falls in exactly one bin, so the whole histogram
has L1 sensitivity 1 and the release is ε-differentially private. From it:

* P*_{a,y} = ñ_{a,q,y} / Σ_y ñ_{a,q,y} (eq. 4; negative noisy counts clipped
  to 0 first, which is post-processing and keeps ε-DP);
* for continuous scores, the survival form P*_{a,≥y} (eq. 5);
* the empirical fairness gap EFG = max_y max_{a,a'} |P*_{a,y} − P*_{a',y}|.

Theorem 1's conditions for an (α, δ, ε)-fair decision: min_a n_{a,q} ≥
(8/α²) ln(3|A||Y|/δ) (eq. 7) and ε > α/2. Without privacy the minimum is
(2/α²) ln(2|A||Y|/δ) (eq. 8). DESIGN §5: α = 0.2, |A| = 2, |Y| = 100,
δ = 0.05 give 1,879 and 450 (ratio 4.18; the paper prints 4.17×); the ratio
is below 4·ln 3/ln 2 = 6.34, approached as |A||Y|/δ → 1.
"""

from __future__ import annotations

import math

import numpy as np


def min_sample_private(alpha: float, n_groups: int, n_levels: int, delta: float) -> int:
    """⌈(8/α²) ln(3|A||Y|/δ)⌉ qualified individuals per group (seed 000 eq. 7)."""
    return math.ceil(8 / alpha**2 * math.log(3 * n_groups * n_levels / delta))


def min_sample_nonprivate(alpha: float, n_groups: int, n_levels: int, delta: float) -> int:
    """⌈(2/α²) ln(2|A||Y|/δ)⌉ qualified individuals per group without noise (seed 000 eq. 8)."""
    return math.ceil(2 / alpha**2 * math.log(2 * n_groups * n_levels / delta))


def sample_size_ratio(n_groups: int, n_levels: int, delta: float) -> float:
    """Private / non-private minimum (without rounding): 4 ln(3x)/ln(2x), x = |A||Y|/δ;
    its supremum over x ≥ 1 is 4 ln 3/ln 2 ≈ 6.34 (at x = 1)."""
    x = n_groups * n_levels / delta
    return 4 * math.log(3 * x) / math.log(2 * x)


def score_histograms(
    scores: np.ndarray, groups: np.ndarray, qualified: np.ndarray, bins: np.ndarray, group_names: list[str]
) -> np.ndarray:
    """n_{a,q,y}: counts of qualified individuals per group (rows, in
    ``group_names`` order) and score bin (columns; ``bins`` are the bin edges,
    right-open, last bin closed). Shape (|A|, |Y|)."""
    out = np.zeros((len(group_names), len(bins) - 1), dtype=np.int64)
    for i, g in enumerate(group_names):
        sel = (groups == g) & qualified
        out[i] = np.histogram(scores[sel], bins=bins)[0]
    return out


def laplace_release(counts: np.ndarray, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """Counts plus i.i.d. Laplace(0, 1/ε) noise per bin (sensitivity 1 -> ε-DP).
    Raises ValueError unless ε > 0."""
    if not epsilon > 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon}")
    return counts + rng.laplace(0.0, 1.0 / epsilon, size=np.shape(counts))


def score_distribution(noisy: np.ndarray, survival: bool = False) -> np.ndarray:
    """P*_{a,y} (eq. 4), or with ``survival`` P*_{a,≥y} (eq. 5), per group row.
    Negative noisy counts are clipped to 0; a group with no mass gives NaN."""
    c = np.clip(np.asarray(noisy, float), 0, None)
    tot = c.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = c / tot
    return np.flip(np.cumsum(np.flip(p, axis=1), axis=1), axis=1) if survival else p


def fairness_gap(P: np.ndarray) -> float:
    """EFG = max over bins of the largest difference between groups, max_y (max_a P − min_a P)."""
    return float(np.nanmax(np.nanmax(P, axis=0) - np.nanmin(P, axis=0)))


def audit_decision(
    efg: float, n_min: int, alpha: float, delta: float, epsilon: float, n_groups: int, n_levels: int
) -> dict:
    """The (α, δ, ε) decision (seed 000 Theorem 1, as we apply it): when
    min_a n_{a,q} meets eq. 7 and ε > α/2, the release supports "fair" if
    EFG ≤ α and "unfair" otherwise, each with confidence 1 − δ; if a condition
    fails the audit is "inconclusive" and says which."""
    need = min_sample_private(alpha, n_groups, n_levels, delta)
    problems = []
    if n_min < need:
        problems.append(f"smallest group has {n_min} qualified individuals, Theorem 1 needs {need}")
    if not epsilon > alpha / 2:
        problems.append(f"epsilon {epsilon} is not above alpha/2 = {alpha / 2}")
    decision = "inconclusive" if problems else ("fair" if efg <= alpha else "unfair")
    return {
        "decision": decision,
        "efg": efg,
        "alpha": alpha,
        "delta": delta,
        "epsilon": epsilon,
        "min_group_n": n_min,
        "required_n": need,
        "conditions_failed": problems,
    }
