"""Prevalence at the threshold for model decisions (seed 002 §4-5.1, eqs. 6, 8-11).

A model that acts on score s at threshold t, where the outcome rate at the
threshold is β0 = E[Y | s = t], behaves as if it weighed false positives
against false negatives with the implied cost ratio c = (1 − β0)/β0 (eq. 6):
the implied threshold on the probability scale is 1/(1 + c) = β0. Comparing
β0 between groups compares the trade-offs applied to them.

β0 is estimated by local linear regression at t (eqs. 10-11): weighted least
squares of Y on (s − t) over the window |s − t| < d with tricube weights
w = (1 − (|s − t|/d)³)³; the intercept estimates E[Y | s = t]. Its standard
error is heteroskedasticity-robust (HC0/HC1, as statsmodels computes them for
WLS). The naive estimate (eq. 9) is the plain mean of Y in the window.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

HC_TYPES = ("HC0", "HC1", "HC3")


@dataclass(frozen=True)
class ThresholdPrevalence:
    """Prevalence at the threshold for one model × group (NaN + reason when undefined)."""

    n_window: int
    prevalence_at_threshold: float
    se: float
    ci_low: float
    ci_high: float
    implied_cost_ratio: float
    cost_ratio_ci_low: float
    cost_ratio_ci_high: float
    naive_window_mean: float
    slope: float
    reason: str | None = None
    prevalence_half_d: float = float("nan")
    bandwidth_flag: bool | None = None


def tricube(u: np.ndarray) -> np.ndarray:
    """w = (1 − |u|³)³ for |u| < 1, else 0 (seed 002 eq. 11). u = (s − t)/d."""
    u = np.abs(np.asarray(u, dtype=float))
    return np.where(u < 1, (1 - u**3) ** 3, 0.0)


def local_linear_at(x: np.ndarray, y: np.ndarray, w: np.ndarray, hc: str = "HC1") -> tuple[np.ndarray, np.ndarray]:
    """WLS of y on [1, x] with weights w; returns (β (2,), robust covariance (2, 2)).

    Robust covariance on the whitened design X* = √w X, e* = √w e:
    (X*ᵀX*)⁻¹ X*ᵀ diag(e*²) X* (X*ᵀX*)⁻¹, times n/(n − 2) for HC1 (n = rows
    with w > 0), or with e*² divided by (1 − h_ii)² for HC3 (h_ii the leverage
    of the whitened design; better in small windows), as statsmodels'
    WLS(...).fit(cov_type=hc). Raises ValueError on an unknown hc or a
    singular design.
    """
    if hc not in HC_TYPES:
        raise ValueError(f"hc must be one of {HC_TYPES}, got {hc!r}")
    keep = w > 0
    x, y, w = x[keep], y[keep], w[keep]
    X = np.column_stack([np.ones_like(x), x])
    sw = np.sqrt(w)
    Xs, ys = X * sw[:, None], y * sw
    XtX = Xs.T @ Xs
    if np.linalg.matrix_rank(XtX) < 2:
        raise ValueError("singular design: the window needs at least two distinct scores")
    inv = np.linalg.inv(XtX)
    beta = inv @ Xs.T @ ys
    e = ys - Xs @ beta
    if hc == "HC3":
        h = np.einsum("ij,jk,ik->i", Xs, inv, Xs)
        e = e / np.clip(1.0 - h, 1e-12, None)
    meat = (Xs * (e**2)[:, None]).T @ Xs
    cov = inv @ meat @ inv
    if hc == "HC1":
        cov = cov * x.size / (x.size - 2)
    return beta, cov


def wilson_interval(p: float, n: float, level: float) -> tuple[float, float]:
    """Wilson score interval for a proportion p on n (possibly effective, non-integer)
    trials: inside [0, 1] and of positive width even at p = 0 or 1 (Wilson 1927)."""
    z = float(stats.norm.ppf(0.5 + level / 2))
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


def _fit(s: np.ndarray, y: np.ndarray, t: float, d: float, hc: str):
    u = (s - t) / d
    inside = np.abs(u) < 1
    beta, cov = local_linear_at(s[inside] - t, y[inside], tricube(u[inside]), hc)
    return beta, cov, tricube(u[inside])


def prevalence_at_threshold(
    score: np.ndarray,
    outcome: np.ndarray,
    t: float,
    d: float,
    *,
    level: float = 0.95,
    hc: str = "HC1",
    min_rows: int = 100,
) -> ThresholdPrevalence:
    """β0 = E[Y | s = t] by tricube-weighted local linear regression (seed 002 eqs. 8-11).

    Inputs: scores and 0/1 outcomes of one model and group, shapes (n,), any
    score scale; threshold t and half-width d > 0 in score units. Returns the
    estimate, robust SE (``hc``: HC0, HC1 or HC3), a normal CI kept inside
    [0, 1], the implied cost ratio c = (1 − β0)/β0 (eq. 6) with the CI mapped
    through that monotone function, the naive window mean (eq. 9), the local
    slope, and the bandwidth diagnostic (DESIGN §4.2): β0 refitted at d/2
    (``prevalence_half_d``) and ``bandwidth_flag`` when the two differ by
    more than the SE of their difference (√|se(d/2)² − se(d)²|, the nested
    estimators' variance difference), a sign that the local line is biased
    at this bandwidth. A window whose outcomes are all equal has a zero
    robust SE: its CI is the Wilson interval on the tricube-effective sample
    size (Kish, (Σw)²/Σw²), never zero-width. Fewer than ``min_rows``
    (config ``min_window_rows``) rows in the window, a single distinct score,
    or β0 outside (0, 1) give NaN with a reason. Raises ValueError when
    d <= 0 or shapes differ.
    """
    s = np.asarray(score, dtype=float)
    y = np.asarray(outcome, dtype=float)
    if s.shape != y.shape:
        raise ValueError("score and outcome must have the same shape")
    if not d > 0:
        raise ValueError(f"bandwidth d must be > 0, got {d}")
    inside = np.abs((s - t) / d) < 1
    n = int(inside.sum())
    nan = float("nan")
    naive = float(y[inside].mean()) if n else nan

    def undefined(reason: str) -> ThresholdPrevalence:
        return ThresholdPrevalence(n, nan, nan, nan, nan, nan, nan, nan, naive, nan, reason)

    if n < min_rows:
        return undefined(f"{n} rows within d of t (min_window_rows = {min_rows}): too few for the local fit")
    try:
        beta, cov, w = _fit(s, y, t, d, hc)
    except ValueError as e:
        return undefined(str(e))
    b0, se = float(beta[0]), float(np.sqrt(cov[0, 0]))
    z = stats.norm.ppf(0.5 + level / 2)
    notes = []
    if se == 0 or np.unique(y[inside]).size == 1:
        n_eff = float(w.sum() ** 2 / np.sum(w * w))
        lo, hi = wilson_interval(float(np.clip(b0, 0, 1)), n_eff, level)
        notes.append(f"all outcomes in the window are equal: Wilson interval on effective n = {n_eff:.0f}")
    else:
        lo, hi = float(max(0.0, b0 - z * se)), float(min(1.0, b0 + z * se))
    half, flag = nan, None
    try:
        if int((np.abs((s - t) / (d / 2)) < 1).sum()) >= 3:
            beta_h, cov_h, _ = _fit(s, y, t, d / 2, hc)
            half = float(beta_h[0])
            se_diff = float(np.sqrt(abs(cov_h[0, 0] - cov[0, 0])))
            flag = bool(se_diff > 0 and abs(half - b0) > se_diff)
            if flag:
                notes.append(
                    f"bandwidth: β0 at d/2 = {half:.3g} differs from {b0:.3g} by more than its SE "
                    f"({se_diff:.2g}): the fit may be biased at this d"
                )
    except ValueError:
        pass
    reason = "; ".join(notes) or None
    if not 0 < b0 < 1:
        return ThresholdPrevalence(
            n,
            b0,
            se,
            lo,
            hi,
            nan,
            nan,
            nan,
            naive,
            float(beta[1]),
            "; ".join([*notes, f"prevalence at the threshold {b0:.3g} is outside (0, 1): no implied cost ratio"]),
            half,
            flag,
        )
    c = (1 - b0) / b0
    c_lo = (1 - hi) / hi if hi > 0 else float("inf")
    c_hi = (1 - lo) / lo if lo > 0 else float("inf")
    return ThresholdPrevalence(n, b0, se, lo, hi, c, c_lo, c_hi, naive, float(beta[1]), reason, half, flag)


def implied_threshold(cost_ratio: float | np.ndarray) -> float | np.ndarray:
    """τ = 1/(1 + c): the probability above which acting is optimal for cost ratio c
    (seed 002 §4.1: c = 4 -> 0.2, c = 0.1 -> 0.909)."""
    return 1.0 / (1.0 + np.asarray(cost_ratio, dtype=float))


def cost_ratio_from_threshold(tau: float | np.ndarray) -> float | np.ndarray:
    """c = (1 − τ)/τ, the inverse of :func:`implied_threshold` (seed 002 §4.1:
    τ = 0.25 -> 3, τ = 0.16 -> 5.25)."""
    tau = np.asarray(tau, dtype=float)
    return (1.0 - tau) / tau


def group_difference(a: ThresholdPrevalence, b: ThresholdPrevalence, level: float = 0.95) -> tuple[float, ...]:
    """β0_a − β0_b with SE = √(se_a² + se_b²) (independent groups), normal CI and
    two-sided p-value: (diff, se, ci_low, ci_high, p_value)."""
    diff = a.prevalence_at_threshold - b.prevalence_at_threshold
    se = float(np.hypot(a.se, b.se))
    z = stats.norm.ppf(0.5 + level / 2)
    if not (np.isfinite(diff) and np.isfinite(se) and se > 0):
        return diff, se, float("nan"), float("nan"), float("nan")
    return float(diff), se, float(diff - z * se), float(diff + z * se), float(2 * stats.norm.sf(abs(diff) / se))
