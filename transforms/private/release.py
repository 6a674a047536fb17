"""Differentially private fairness audits of score logs (seed 000 §4.3, §5; DESIGN §4.6).

The platform releases, per group a, the histogram n_{a,y} of scores among
qualified individuals over a score set Y that is *declared in advance*
(config; never derived from the data), each bin plus discrete Laplace noise
from OpenDP's vetted sampler. Each individual (one per item_id, de-duplicated
upstream) falls in exactly one bin.

Neighbouring data sets and the noise scale. The seed (§4.3.3, Def. 4.1)
adds or removes one individual, under which the histogram has L1 sensitivity
1. In the seed's own setting (§5.1, text after eq. 3) the group sizes n_{a,q}
are public, so the private part of an individual is the score: neighbours
differ in one individual's score, which moves two bins and gives L1
sensitivity 2. To be ε-DP for that relation the bins get scale b = 2/ε
(:func:`histogram_scale`). When the group sizes are not public they are
released with noise from the same budget: ε/2 for the bins (scale 2/ε) and
ε/2 for the sizes (scale 2/ε); under add/remove this composes to ε, and under
a change of one score the sizes do not move and the bins cost 2·ε/2 = ε.

From the release (post-processing, no further privacy cost):

* P*_{a,y} = ñ_{a,y} / n_{a,q} (eq. 4), n_{a,q} public or noisy, never clipped;
* EFG = max_y max_{a,a'} |P*_{a,y} − P*_{a',y}| (§5.1, after eq. 4);
* a per-cell error bound t with Pr[∃(a,y): |P*_{a,y} − P_{a,y}| > t] ≤ δ, from
  the proof of Lemma 5.2 (Hoeffding for sampling, Laplace tails for noise,
  a union bound over cells; eq. 10 and the display after it); hence
  FG ∈ [EFG − 2t, EFG + 2t], and at the seed's sample size (eqs. 6, 8) with
  1/b > α/2, t ≤ α/2 so the interval is [EFG − α, EFG + α] as in DESIGN §4.6.

Sample sizes: private (8/α²) ln(3|A||Y|/δ) (eqs. 6, 8), non-private
(2/α²) ln(2|A||Y|/δ) (eq. 7). DESIGN §5: α = 0.2, |A| = 2, |Y| = 100,
δ = 0.05 give 1,879 and 450 (ratio 4.18; the paper prints 4.17×); the ratio
is below 4·ln 3/ln 2 = 6.34 (eq. 11), approached as |A||Y|/δ → 1.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl


def check_audit_levels(alpha: float, delta: float) -> None:
    """Raise ValueError, naming the value, unless the fairness tolerance
    0 < α < 1 and the failure probability 0 < δ < 1 (seed 000 §3: α bounds a
    difference of rates, δ is a probability; NaN is neither)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha (fairness tolerance α) must be in (0, 1), got {alpha}")
    if not 0 < delta < 1:
        raise ValueError(f"delta (failure probability δ) must be in (0, 1), got {delta}")


def min_sample_private(alpha: float, n_groups: int, n_levels: int, delta: float) -> int:
    """⌈(8/α²) ln(3|A||Y|/δ)⌉ qualified individuals per group (seed 000 eqs. 6, 8).
    Raises ValueError unless 0 < α < 1 and 0 < δ < 1 (:func:`check_audit_levels`)."""
    check_audit_levels(alpha, delta)
    return math.ceil(8 / alpha**2 * math.log(3 * n_groups * n_levels / delta))


def min_sample_nonprivate(alpha: float, n_groups: int, n_levels: int, delta: float) -> int:
    """⌈(2/α²) ln(2|A||Y|/δ)⌉ qualified individuals per group without noise (seed 000 eq. 7).
    Raises ValueError unless 0 < α < 1 and 0 < δ < 1 (:func:`check_audit_levels`)."""
    check_audit_levels(alpha, delta)
    return math.ceil(2 / alpha**2 * math.log(2 * n_groups * n_levels / delta))


def sample_size_ratio(n_groups: int, n_levels: int, delta: float) -> float:
    """Private / non-private minimum (without rounding, seed 000 eq. 11): 4 ln(3x)/ln(2x),
    x = |A||Y|/δ; its supremum over x ≥ 1 is 4 ln 3/ln 2 ≈ 6.34 (at x = 1)."""
    x = n_groups * n_levels / delta
    return 4 * math.log(3 * x) / math.log(2 * x)


# --- the data the histogram is built from ---------------------------------------------------


def population_key(item_ids) -> str:
    """The privacy ledger's key of the individuals a release is about (DESIGN §4.6, §2: one
    individual per item_id): ``population:`` + SHA-256 (hex) of the sorted distinct item_ids,
    as text, one per line. ``item_ids``: any iterable (duplicates and order do not matter).
    It depends on who is in the data only, not on the model, file name or folder, so two
    models scoring the same people share one budget and a moved project keeps its ledger.
    The key is a function of the data: it stays with the platform (ledger), never in a
    release (it would tell whether a given set of individuals is the population)."""
    import hashlib

    ids = sorted({str(i) for i in item_ids})
    return "population:" + hashlib.sha256("\n".join(ids).encode()).hexdigest()


def dedupe_latest(rows: pl.DataFrame, key: str = "item_id") -> tuple[pl.DataFrame, int]:
    """One row per ``key`` (DESIGN §2 scores: one individual per item_id): the
    last row in the frame's order wins (callers sort by ds, then load order, so
    the latest score counts). Returns the rows kept and how many were dropped."""
    kept = rows.unique(subset=key, keep="last", maintain_order=True)
    return kept, rows.height - kept.height


def score_histograms(
    scores: np.ndarray, groups: np.ndarray, qualified: np.ndarray, edges: np.ndarray, group_names: list[str]
) -> np.ndarray:
    """n_{a,y} (seed 000 eq. 3's numerator): counts of qualified individuals per
    group (rows, in ``group_names`` order) and declared score bin (columns).
    ``edges`` are the declared bin edges; bins are right-open [e_i, e_{i+1})
    and the two outer bins are open-ended, so every score lands in exactly one
    bin whatever its value (no data-dependent clipping or dropping). Rows whose
    group is not in ``group_names`` are not counted. Shape (|A|, |Y|)."""
    edges = np.asarray(edges, float)
    idx = np.searchsorted(edges[1:-1], np.asarray(scores, float), side="right")
    out = np.zeros((len(group_names), len(edges) - 1), dtype=np.int64)
    for i, g in enumerate(group_names):
        sel = (groups == g) & qualified
        out[i] = np.bincount(idx[sel], minlength=len(edges) - 1)
    return out


# --- the mechanism ----------------------------------------------------------------------------


def histogram_scale(epsilon: float, public_sizes: bool) -> float:
    """Laplace scale b of each histogram bin for an ε-DP release (module docstring):
    2/ε in both settings (public sizes: sensitivity 2 at the full ε; noisy sizes:
    sensitivity 1 at ε/2 under add/remove, 2 at ε/2·2 under a changed score)."""
    if not epsilon > 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon}")
    return 2.0 / epsilon


def _laplace_measurement(scale: float):
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T="i64")), dp.l1_distance(T="i64"), scale=scale)


def privacy_loss(scale: float, l1_sensitivity: int) -> float:
    """ε that OpenDP's privacy map certifies for integer vectors with noise of
    scale ``scale`` whose neighbours differ by ``l1_sensitivity`` in L1."""
    return float(_laplace_measurement(scale).map(l1_sensitivity))


def laplace_release(counts: np.ndarray, scale: float) -> np.ndarray:
    """Integer counts plus i.i.d. discrete Laplace noise of scale ``scale``
    (P(r = k) ∝ exp(−|k|/b)), drawn by OpenDP's ``make_laplace`` (vetted,
    exact sampler; not floating-point numpy noise). Same shape as ``counts``,
    integer. Raises ValueError unless scale > 0."""
    if not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale}")
    c = np.asarray(counts, dtype=np.int64)
    noisy = _laplace_measurement(scale)(c.ravel().tolist())
    return np.asarray(noisy, dtype=np.int64).reshape(c.shape)


def discrete_laplace_bound(scale: float, p: float) -> int:
    """Smallest integer R with Pr[|r| > R] ≤ p for discrete Laplace r of scale b:
    Pr[|r| ≥ k] = 2e^{−k/b}/(1 + e^{−1/b}) for k ≥ 1 (the discrete analogue of
    the continuous tail e^{−x/b} used in the proof of seed 000 Lemma 5.2)."""
    k = math.ceil(scale * math.log(2 / (p * (1 + math.exp(-1 / scale)))))
    return max(k - 1, 0)


# --- estimators on the release (post-processing) --------------------------------------------


def score_distribution(noisy: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """P*_{a,y} = ñ_{a,y} / n_{a,q} (seed 000 eq. 4) per group row, with n_{a,q}
    public or itself noisy. Not clipped (clipping would bias it); a size ≤ 0
    gives NaN for that group."""
    n = np.asarray(sizes, float)[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, np.asarray(noisy, float) / n, np.nan)


def survival_distribution(P: np.ndarray) -> np.ndarray:
    """P*_{a,≥y} = Σ_{y' ≥ y} P*_{a,y'} (the survival form of seed 000 eq. 5).
    Informational only: its noise is a sum of up to |Y| Laplace draws, so the
    per-cell bound of :func:`cell_error_bound` does not cover it and the decision
    never uses it."""
    return np.flip(np.cumsum(np.flip(P, axis=1), axis=1), axis=1)


def fairness_gap(P: np.ndarray) -> float:
    """EFG = max_y (max_a P*_{a,y} − min_a P*_{a,y}) (seed 000 §5.1, after eq. 4) of P* (groups × bins).
    NaN when a group has no distribution (its size ≤ 0, :func:`score_distribution`): the gap over the other
    groups is not the gap over the declared ones. Raises nothing."""
    P = np.asarray(P, float)
    if P.size == 0 or np.isnan(P).all(axis=1).any():
        return float("nan")
    return float(np.nanmax(np.nanmax(P, axis=0) - np.nanmin(P, axis=0)))


def efg_reason(P: np.ndarray, t: float) -> str | None:
    """Why the release's EFG says nothing about FG, or None: a declared group's noisy size is ≤ 0 (no
    distribution: EFG undefined), or the cell error bound ``t`` is infinite (a group's size, less its noise
    bound, is ≤ 0), when EFG is the noise's number, not the groups' (a probability gap read 21.1). The
    decision is then "inconclusive" (:func:`audit_decision`). Raises nothing."""
    P = np.asarray(P, float)
    if P.size and np.isnan(P).all(axis=1).any():
        return "a group's released size is 0 or below: it has no score distribution, so EFG is undefined"
    if not math.isfinite(t):
        return (
            "a group is too small for the noise (its size less the noise bound is 0 or below): EFG and its "
            "interval say nothing about FG"
        )
    return None


def cell_error_bound(
    sizes: np.ndarray, hist_scale: float, n_levels: int, delta: float, size_scale: float | None = None
) -> dict:
    """t with Pr[∃ a, y: |P*_{a,y} − P_{a,y}| > t] ≤ δ, following the proof of
    seed 000 Lemma 5.2 (eq. 10: triangle inequality, Hoeffding for the sampling
    error, the Laplace tail for the noise, union bound over all cells).

    Public sizes (``size_scale`` None; ``sizes`` are the true n_{a,q}): δ is
    split as in the seed's "3" = 2 + 1, 2δ/3 to Hoeffding (2|A||Y| one-sided
    tails) and δ/3 to the |A||Y| bin noises, so per group
    t_a = sqrt(ln(3|A||Y|/δ) / (2 n_a)) + R / n_a with R the discrete Laplace
    bound at δ/(3|A||Y|). At n_a from eqs. 6/8 and 1/b > α/2 this is ≤ α/2.

    Noisy sizes m_a = n_a + s_a: since ñ_{a,y}/m_a − n_{a,y}/n_a =
    (r − P̄ s)/m_a, |P* − P̄| ≤ (R + S)/m_a; and n_a ≥ m_a − S bounds the
    Hoeffding term. δ is split δ/2 (Hoeffding), δ/4 (bins), δ/4 (sizes).

    Returns t (max over groups; inf when a lower bound on n_a is ≤ 0), the
    smallest n_a the bound relies on (public, or the noisy lower bound
    m_a − S), R and S."""
    m = np.asarray(sizes, float)
    k = len(m) * n_levels
    if size_scale is None:
        d_h, d_r, S = 2 * delta / 3, delta / 3, 0
    else:
        d_h, d_r = delta / 2, delta / 4
        S = discrete_laplace_bound(size_scale, delta / 4 / len(m))
    R = discrete_laplace_bound(hist_scale, d_r / k)
    n_low = m - S
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = np.where(n_low > 0, np.sqrt(math.log(2 * k / d_h) / (2 * np.maximum(n_low, 1))), np.inf)
        noise = np.where(m > 0, (R + S) / np.maximum(m, 1), np.inf)
    t = float(np.max(tau + noise))
    return {"t": t, "n_min": float(n_low.min()), "noise_bound_bins": R, "noise_bound_sizes": S}


def audit_decision(efg: float, t: float, alpha: float) -> dict:
    """The decision on FG from the release (DESIGN §4.6): with every cell within
    t of the truth (probability ≥ 1 − δ, :func:`cell_error_bound`),
    FG ∈ [EFG − 2t, EFG + 2t] (clipped to [0, 1]). "fair" only when the whole
    interval is ≤ α, "unfair" only when it is > α, else "inconclusive". So a
    "fair" verdict needs margin, EFG ≤ α − 2t (seed 000 Lemma 5.2 with
    n ≥ (2/t²) ln(3|A||Y|/δ) and noise 1/b > t), and the chance of "fair" when
    FG > α, or "unfair" when FG ≤ α, is at most δ."""
    lo, hi = max(0.0, efg - 2 * t), min(1.0, efg + 2 * t)
    if not (math.isfinite(t) and math.isfinite(efg)):
        lo, hi = 0.0, 1.0
    decision = "fair" if hi <= alpha else ("unfair" if lo > alpha else "inconclusive")
    return {"decision": decision, "efg": efg, "fg_interval": [lo, hi], "cell_error_t": t}


def decision_sample_size(
    alpha: float, n_groups: int, n_levels: int, delta: float, epsilon: float, efg: float = 0.0
) -> int | None:
    """Fewest qualified individuals per group (every group that size, sizes
    public) for which fairmon's decision (:func:`audit_decision`) calls a
    release "fair" when its EFG is ``efg``: EFG + 2·t(n) ≤ α with t(n) the
    cell error bound of :func:`cell_error_bound` at the noise of an
    ``epsilon``-DP release (:func:`histogram_scale`). It exceeds seed 000's n
    (eqs. 6, 8: :func:`min_sample_private`) when EFG is near α: the paper
    sizes a test with margin α/2, while fairmon's interval [EFG − 2t, EFG + 2t]
    must lie wholly below α. t(n) falls with n, so the smallest n is found by
    bisection over 1..10⁹. None when even 10⁹ does not suffice (``efg`` ≥ α).
    Raises ValueError as :func:`check_audit_levels`, or unless ε > 0."""
    check_audit_levels(alpha, delta)
    scale = histogram_scale(epsilon, True)

    def fair(n: int) -> bool:
        return efg + 2 * cell_error_bound(np.full(n_groups, n), scale, n_levels, delta)["t"] <= alpha

    lo, hi = 1, 10**9
    if not fair(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fair(mid) else (mid + 1, hi)
    return lo


def seed_conditions(n_min: float, alpha: float, delta: float, hist_scale: float, n_groups: int, n_levels: int) -> list:
    """The conditions of seed 000 Theorem 1 (eqs. 6/8: min_a n_{a,q} ≥
    (8/α²) ln(3|A||Y|/δ); noise 1/b > α/2, the seed's ε > α/2 for b = 1/ε)
    that fail, as sentences; informational, the decision uses the interval."""
    need = min_sample_private(alpha, n_groups, n_levels, delta)
    out = []
    if n_min < need:
        out.append(f"smallest group size used is {n_min:g}; Theorem 1 (eqs. 6/8) asks for {need}")
    if not 1 / hist_scale > alpha / 2:
        out.append(f"noise scale {hist_scale:g} per bin: 1/b = {1 / hist_scale:g} is not above alpha/2 = {alpha / 2:g}")
    return out
