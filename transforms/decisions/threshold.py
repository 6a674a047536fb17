"""Prevalence at the threshold for model decisions (seed 002 §4-5.1, eqs. 6, 8-11; DESIGN §4.2).

A model that acts on score s at threshold t, where the outcome rate at the
threshold is β0 = E[Y | s = t], behaves as if it weighed false positives
against false negatives with the implied cost ratio c = (1 − β0)/β0 (eq. 6):
the implied threshold on the probability scale is 1/(1 + c) = β0 (eqs. 4, 8).
Comparing β0 between groups compares the trade-offs applied to them.

β0 is estimated by local linear regression at t (eqs. 10-11): weighted least
squares of Y on (s − t) over the window |s − t| < d with tricube weights
w = (1 − (|s − t|/d)³)³; the intercept estimates E[Y | s = t]. Its standard
error is heteroskedasticity-robust (HC0, HC1 or HC3, as statsmodels'
``WLS(...).fit(cov_type=hc)`` computes them). The naive estimate (eq. 9) is
the plain mean of Y in the window.

Intervals (DESIGN §4.2: inside [0, 1], never of zero width). Each estimate
below is linear in the outcomes, β0 = Σ lᵢ yᵢ (l its equivalent-kernel
weights, Σ l = 1), and gets one of two intervals:

* ``hc_normal``: β0 ± z·SE with the HC SE, clipped to [0, 1]; used when the
  window has at least ``min_window_rows`` rows, the SE is positive and the
  fit has at least :data:`MIN_EFFECTIVE_EVENTS` effective events and
  non-events (n_eff·min(β0, 1 − β0)).
* ``wilson_neff``: otherwise (small windows, windows whose outcomes are all
  equal, β0 at 0 or 1, rare events). For 0/1 outcomes whose rate is near β0
  across the window, Var(β0) = β0(1 − β0)·Σ lᵢ², so β0 is treated as a
  proportion observed on n_eff = 1/Σ lᵢ² trials — the Kish effective sample
  size of the weights l, which is (Σw)²/Σw² for a plain local mean — and gets
  the Wilson score interval: inside [0, 1] and of positive width at β0 = 0 or 1.

``ci = "conventional"`` reports that interval around the local linear fit
(the paper's estimator). ``ci = "robust"`` reports robust bias-corrected
inference (Calonico, Cattaneo and Titiunik 2014, Econometrica 82(6), with
the pilot bandwidth equal to d, in which case the bias-corrected local
linear estimate is the local quadratic one at d and its robust variance is
that fit's): the same kind of interval around the local quadratic fit at the
same d and kernel, widened where needed to contain the local linear point
estimate, which stays the reported value. The local linear fit's leading
bias is proportional to the curvature of E[Y | s] times d², and it does not
shrink as the window fills, so with many rows in the window the conventional
interval misses the truth more often than its level says; the robust
interval keeps coverage near the level at a moderately larger width
(``bench/coverage_decisions.py``; figures in bench/README.md).

Windows with fewer than :data:`MIN_FIT_ROWS` rows, or a single distinct
score, give NaN with a reason.

Bandwidth diagnostic (DESIGN §4.2): β0 is also estimated at d/2
(``prevalence_half_d``). The local linear bias grows like d², so a
half-bandwidth estimate that moves by more than the noise says d is too wide
for the point estimate. The flag fires when |β0(d) − β0(d/2)| exceeds the
larger of the two estimates' SEs, each being the SE behind its own
conventional interval (the HC SE for ``hc_normal``, the 95 % Wilson
half-width / 1.96 for ``wilson_neff``). The larger is the d/2 one in
practice and exceeds the difference's own SD without bias, so the flag
also fires by chance now and then (rate in bench/README.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize

from fairmon.transforms.decisions.local_poly import (
    HC_TYPES,
    IntervalPart,
    LocalFit,
    local_linear_at,
    local_linear_fit,
    tricube,
    wilson_interval,
)

__all__ = [
    "CI_TYPES",
    "HC_TYPES",
    "MIN_EFFECTIVE_EVENTS",
    "MIN_FIT_ROWS",
    "IntervalPart",
    "LocalFit",
    "PrevalenceDifference",
    "ThresholdPrevalence",
    "cost_ratio_from_threshold",
    "group_difference",
    "implied_threshold",
    "local_linear_at",
    "local_linear_fit",
    "prevalence_at_threshold",
    "prevalence_difference",
    "tricube",
    "wilson_interval",
]

CI_TYPES = ("robust", "conventional")
#: Fewest rows within d of t for any estimate (a line through fewer points is noise).
MIN_FIT_ROWS = 10
#: Fewest effective events (and non-events), n_eff·min(β0, 1 − β0), for the normal interval.
MIN_EFFECTIVE_EVENTS = 5.0


@dataclass(frozen=True)
class ThresholdPrevalence:
    """Prevalence at the threshold for one model × group (seed 002 eqs. 6, 8-11).

    Probabilities: ``prevalence_at_threshold`` (the local linear β0 clipped to
    [0, 1]), ``se`` (its HC SE), ``ci_*``, ``naive_window_mean``,
    ``prevalence_half_d``, ``se_half_d``; the cost ratio and its bounds are
    ratios; ``slope`` is probability per score unit; ``n_eff`` rows. NaN values
    come with a ``reason``, which also names a small-sample interval, clipping
    and a bandwidth flag. ``parts`` holds the fit the interval is built around
    (the local linear one for ``conventional``, the local quadratic one for
    ``robust``); the interval is its interval widened to contain the point.
    """

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
    ci_method: str | None = None
    n_eff: float = float("nan")
    prevalence_half_d: float = float("nan")
    se_half_d: float = float("nan")
    bandwidth_flag: bool = False
    raw_intercept: float = float("nan")
    parts: tuple[IntervalPart, ...] = ()

    def interval(self, level: float) -> tuple[float, float]:
        """The interval at another confidence ``level`` by the same method: the
        hull of the parts' intervals and the point estimate; (NaN, NaN) when undefined."""
        if not self.parts:
            return float("nan"), float("nan")
        return _hull(self.parts, self.prevalence_at_threshold, level)


def _part(fit: LocalFit, min_window_rows: int, constant: float | None = None) -> tuple[IntervalPart, str | None]:
    """The interval part of a fit and, for ``wilson_neff``, why the normal interval was not used.
    ``constant``: the common value when all outcomes in the window are equal (the fit is then
    exactly that value; its HC SE is 0 up to rounding)."""
    b0 = float(np.clip(fit.beta[0], 0.0, 1.0)) if constant is None else float(np.clip(constant, 0.0, 1.0))
    se = float(np.sqrt(fit.cov[0, 0])) if constant is None else 0.0
    n_eff = fit.n_eff
    events = n_eff * min(b0, 1 - b0)
    if constant is not None:
        why = f"all outcomes in the window are {constant:g}"
    elif fit.n < min_window_rows:
        why = f"{fit.n} rows within d (< min_window_rows = {min_window_rows})"
    elif not (np.isfinite(se) and se > 0):
        why = "no finite positive HC SE"
    elif events < MIN_EFFECTIVE_EVENTS:
        why = f"{events:.1f} effective events (< {MIN_EFFECTIVE_EVENTS:g})"
    else:
        return IntervalPart("hc_normal", b0, se, n_eff), None
    return IntervalPart("wilson_neff", b0, se, n_eff), why


def _hull(parts: tuple[IntervalPart, ...], point: float, level: float) -> tuple[float, float]:
    bounds = [p.at(level) for p in parts]
    return min(point, *(b[0] for b in bounds)), max(point, *(b[1] for b in bounds))


def _fit_window(
    s: np.ndarray, y: np.ndarray, t: float, d: float, hc: str, degree: int = 1
) -> tuple[int, LocalFit | str]:
    """Rows within d of t and their fit, or the reason there is none."""
    u = (s - t) / d
    inside = np.abs(u) < 1
    n = int(inside.sum())
    if n < MIN_FIT_ROWS:
        return n, f"{n} rows within d = {d:g} of t (fewer than {MIN_FIT_ROWS}, the minimum for any estimate)"
    try:
        return n, local_linear_fit(s[inside] - t, y[inside], tricube(u[inside]), hc, degree)
    except ValueError as e:
        return n, str(e)


def _check_arguments(s: np.ndarray, y: np.ndarray, d: float, hc: str, ci: str, min_window_rows: int) -> None:
    """Raise ValueError for arguments no estimate can come from (shapes, d ≤ 0,
    unknown ``hc`` or ``ci``, ``min_window_rows`` < 1): a caller's mistake, not data."""
    if s.shape != y.shape:
        raise ValueError("score and outcome must have the same shape")
    if not d > 0:
        raise ValueError(f"bandwidth d must be > 0, got {d}")
    if hc not in HC_TYPES:
        raise ValueError(f"hc must be one of {HC_TYPES}, got {hc!r}")
    if ci not in CI_TYPES:
        raise ValueError(f"ci must be one of {CI_TYPES}, got {ci!r}")
    if min_window_rows < 1:
        raise ValueError(f"min_window_rows must be >= 1, got {min_window_rows}")


def _robust_parts(
    s: np.ndarray,
    y: np.ndarray,
    t: float,
    d: float,
    hc: str,
    min_window_rows: int,
    constant: float | None,
    parts: tuple[IntervalPart, ...],
    *,
    quiet: bool,
    reasons: list[str],
) -> tuple[IntervalPart, ...]:
    """The ``robust`` interval's part: built around the local quadratic fit
    (bias-corrected, see the module docstring), or ``parts`` unchanged, with a
    reason, when that fit is undefined. Appends to ``reasons``; ``quiet``
    (the conventional part already fell back to Wilson and said so) skips
    repeating the fallback. Source: seed 002 eqs. 8-11, DESIGN §4.2."""
    _, quad = _fit_window(s, y, t, d, hc, degree=2)
    if isinstance(quad, str):
        reasons.append(f"no bias-corrected (local quadratic) fit: {quad}; conventional interval")
        return parts
    part, why_q = _part(quad, min_window_rows, constant)
    if why_q and not quiet:
        reasons.append(f"bias-corrected fit: {why_q}: Wilson interval on its effective n = {quad.n_eff:.1f}")
    return (part,)


def _half_bandwidth(
    s: np.ndarray,
    y: np.ndarray,
    t: float,
    d: float,
    hc: str,
    min_window_rows: int,
    constant: float | None,
    b0: float,
    main: IntervalPart,
    reasons: list[str],
) -> tuple[float, float, bool]:
    """The bandwidth diagnostic (DESIGN §4.2): (β0 at d/2, its SE, flag). The
    flag is set when the d/2 estimate differs from ``b0`` by more than the
    larger of the two SEs: a bias that halving the window exposes, so d may
    be too wide. Appends to ``reasons``; NaNs and no flag when the d/2 window
    cannot be fitted."""
    _, fit_half = _fit_window(s, y, t, d / 2, hc)
    if isinstance(fit_half, str):
        reasons.append(f"no d/2 estimate: {fit_half}")
        return float("nan"), float("nan"), False
    half, _ = _part(fit_half, min_window_rows, constant)
    half_b0, half_se = half.estimate, half.interval_se
    bar = max(main.interval_se, half_se)
    if abs(b0 - half_b0) > bar:
        reasons.append(
            f"bandwidth: the d/2 estimate {half_b0:.3g} differs from {b0:.3g} by more than"
            f" the larger SE ({bar:.2g}); the point estimate may be biased, d may be too wide"
        )
        return half_b0, half_se, True
    return half_b0, half_se, False


def prevalence_at_threshold(
    score: np.ndarray,
    outcome: np.ndarray,
    t: float,
    d: float,
    *,
    level: float = 0.95,
    hc: str = "HC1",
    min_window_rows: int = 100,
    ci: str = "conventional",
) -> ThresholdPrevalence:
    """β0 = E[Y | s = t] by tricube-weighted local linear regression (seed 002
    eqs. 8-11), with an interval inside [0, 1] and a bandwidth diagnostic (DESIGN §4.2).

    Inputs: scores (any scale) and outcomes (0/1, or rates in [0, 1]) of one
    model and group, shapes (n,); threshold t and half-width d > 0 in score
    units; ``level`` the confidence level; ``hc`` one of :data:`HC_TYPES`;
    windows with fewer than ``min_window_rows`` rows get the ``wilson_neff``
    interval; ``ci`` ``"conventional"`` (around the paper's fit, the default
    here) or ``"robust"`` (bias-corrected, the pipeline's default) — see the
    module docstring.

    Returns the local linear β0 clipped to [0, 1] (the reason says when
    clipping happened), the HC standard error of the fitted intercept, the
    interval, ``ci_method`` (``hc_normal`` or ``wilson_neff``, prefixed
    ``robust_`` when built around the local quadratic fit),
    the implied cost ratio c = (1 − β0)/β0 (eq. 6; NaN when β0 is 0 or 1) with
    the interval carried through that decreasing map (upper bound inf when the
    lower prevalence bound is 0), the naive window mean (eq. 9), the slope,
    the d/2 estimate and the bandwidth flag. Fewer than :data:`MIN_FIT_ROWS`
    rows in the window or a single distinct score give NaN with a reason.

    Raises ValueError when d ≤ 0, shapes differ, ``hc`` or ``ci`` is unknown,
    or ``min_window_rows`` < 1.
    """
    s = np.asarray(score, dtype=float)
    y = np.asarray(outcome, dtype=float)
    _check_arguments(s, y, d, hc, ci, min_window_rows)
    nan = float("nan")
    n, fit = _fit_window(s, y, t, d, hc)
    naive = float(y[np.abs(s - t) < d].mean()) if n else nan
    if isinstance(fit, str):
        reason = fit if n else f"{fit}; no naive window mean"
        return ThresholdPrevalence(n, nan, nan, nan, nan, nan, nan, nan, naive, nan, reason)

    reasons: list[str] = []
    window_y = y[np.abs(s - t) < d]
    constant = float(window_y[0]) if np.ptp(window_y) == 0 else None
    raw = float(fit.beta[0])
    b0 = float(np.clip(raw if constant is None else constant, 0.0, 1.0))
    if constant is None and b0 != raw:
        reasons.append(f"local linear intercept {raw:.3g} clipped to {b0:g}")
    se = float(np.sqrt(fit.cov[0, 0])) if constant is None else 0.0
    if not np.isfinite(se):
        reasons.append(f"{hc} standard error undefined (a row has leverage 1)")
    main, why = _part(fit, min_window_rows, constant)
    parts = (main,)
    if why:
        reasons.append(f"{why}: Wilson interval on the effective n = {fit.n_eff:.1f}")
    if ci == "robust":
        parts = _robust_parts(s, y, t, d, hc, min_window_rows, constant, parts, quiet=bool(why), reasons=reasons)
    method = ("robust_" if parts[0] is not main else "") + parts[0].method
    lo, hi = _hull(parts, b0, level)

    if 0 < b0 < 1:
        c = (1 - b0) / b0
    else:
        c = nan
        reasons.append(f"prevalence at the threshold is {b0:g}: no implied cost ratio")
    c_lo = (1 - hi) / hi if hi > 0 else float("inf")
    c_hi = (1 - lo) / lo if lo > 0 else float("inf")

    half_b0, half_se, flag = _half_bandwidth(s, y, t, d, hc, min_window_rows, constant, b0, main, reasons)
    return ThresholdPrevalence(
        n,
        b0,
        se,
        lo,
        hi,
        float(c),
        float(c_lo),
        float(c_hi),
        naive,
        float(fit.beta[1]),
        "; ".join(reasons) or None,
        method,
        fit.n_eff,
        half_b0,
        half_se,
        flag,
        raw,
        parts,
    )


def implied_threshold(cost_ratio: float | np.ndarray) -> float | np.ndarray:
    """τ = 1/(1 + c): the probability above which acting is optimal for cost ratio c
    (seed 002 eq. 4, §4.1: c = 4 -> 0.2, c = 0.1 -> 0.909)."""
    return 1.0 / (1.0 + np.asarray(cost_ratio, dtype=float))


def cost_ratio_from_threshold(tau: float | np.ndarray) -> float | np.ndarray:
    """c = (1 − τ)/τ, the inverse of :func:`implied_threshold` (seed 002 eq. 6,
    §4.4: τ = 0.25 -> 3, τ = 0.16 -> 5.25)."""
    tau = np.asarray(tau, dtype=float)
    return (1.0 - tau) / tau


@dataclass(frozen=True)
class PrevalenceDifference:
    """β0_a − β0_b between two groups (probability), its SE, interval, p-value, and
    why any of them is NaN (``reason``)."""

    diff: float
    se: float
    ci_low: float
    ci_high: float
    p_value: float
    reason: str | None = None


def mover_difference(
    a: float, low_a: float, high_a: float, b: float, low_b: float, high_b: float
) -> tuple[float, float]:
    """The MOVER interval of a − b from two independent estimates and their intervals at one level (Newcombe 1998
    method 10; Zou and Donner 2008): (a − b) − √((a − low_a)² + (high_b − b)²) to
    (a − b) + √((high_a − a)² + (b − low_b)²). Scalars in any one unit (a probability, a log cost ratio); an
    infinite bound gives an infinite side. Raises nothing."""
    diff = a - b
    return diff - float(np.hypot(a - low_a, high_b - b)), diff + float(np.hypot(high_a - a, b - low_b))


def _mover(a: IntervalPart, b: IntervalPart, level: float) -> tuple[float, float]:
    """MOVER interval of a − b around the parts' own estimates at ``level``."""
    return mover_difference(a.estimate, *a.at(level), b.estimate, *b.at(level))


def prevalence_difference(a: ThresholdPrevalence, b: ThresholdPrevalence, level: float = 0.95) -> PrevalenceDifference:
    """β0_a − β0_b for two independent groups (seed 002 §5.1: differences in the
    prevalence at the threshold between groups; DESIGN §4.2).

    Inputs: two :class:`ThresholdPrevalence` of disjoint groups, built with the
    same ``ci``. ``diff`` is the difference of the local linear estimates and
    ``se`` = √(se_a² + se_b²) from their HC SEs. The interval combines the
    intervals of the fits each group's interval is built around (local linear
    for ``conventional``, local quadratic for ``robust``) by the method of
    variance estimates recovery (MOVER; Newcombe 1998 method 10, Zou and
    Donner 2008): with those fits' estimates p′ and bounds l′, u′,
    (p′a − p′b) ∓ √((p′a − l′a)² + (u′b − p′b)²) / √((u′a − p′a)² + (p′b − l′b)²),
    then widened where needed to contain ``diff``. For two ``hc_normal``
    groups that is the normal interval of p′a − p′b with the parts' HC SEs
    (diff ± z·se when ``conventional``); with a Wilson group it inherits the
    score interval's behaviour near 0 and 1. The two-sided p-value inverts the
    MOVER interval: the α at which its level-(1 − α) version has 0 on an edge
    (for two ``hc_normal`` parts, 2·(1 − Φ(|p′a − p′b| / √(se′a² + se′b²)))).
    NaN with a ``reason`` when either group has no estimate. Raises nothing.
    """
    from scipy import stats  # imported here, not at the top (fairmon.transforms)

    nan = float("nan")
    for name, e in (("group_a", a), ("group_b", b)):
        if not e.parts:
            return PrevalenceDifference(nan, nan, nan, nan, nan, f"{name} has no estimate ({e.reason})")
    diff = float(a.prevalence_at_threshold - b.prevalence_at_threshold)
    se = float(np.hypot(a.se, b.se))
    reason = None if np.isfinite(se) else "an HC SE is undefined (a row of leverage 1); interval and p-value still hold"
    pa, pb = a.parts[0], b.parts[0]
    lo, hi = _mover(pa, pb, level)
    lo, hi = min(lo, diff), max(hi, diff)
    centre = pa.estimate - pb.estimate
    if pa.method == pb.method == "hc_normal":
        return PrevalenceDifference(
            diff, se, lo, hi, float(2 * stats.norm.sf(abs(centre) / np.hypot(pa.se, pb.se))), reason
        )

    def edge(conf: float) -> float:  # > 0 when the level-conf interval excludes 0
        lo_, hi_ = _mover(pa, pb, conf)
        return lo_ if centre > 0 else -hi_

    eps = 1e-12
    if centre == 0 or edge(eps) <= 0:
        p = 1.0
    elif edge(1 - eps) > 0:
        p = eps
    else:
        p = 1 - optimize.brentq(edge, eps, 1 - eps, xtol=1e-14)
    return PrevalenceDifference(diff, se, lo, hi, float(p), reason)


def group_difference(a: ThresholdPrevalence, b: ThresholdPrevalence, level: float = 0.95) -> tuple[float, ...]:
    """(diff, se, ci_low, ci_high, p_value) of :func:`prevalence_difference`."""
    r = prevalence_difference(a, b, level)
    return r.diff, r.se, r.ci_low, r.ci_high, r.p_value
