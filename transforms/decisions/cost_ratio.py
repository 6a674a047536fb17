"""Comparing two groups' implied cost ratios (seed 002 §4.3 eq. 5, §4.4 eq. 6, §5.1; DESIGN §4.2).

A model acting at threshold t on content of group a implies the cost ratio
c_a = (1 − β0_a)/β0_a, β0_a = E[Y | s = t, a] (eq. 6); a cell of eq. 5
(content of producer group a seen by viewer group b) is a group like any
other, its c_ab coming from the cell's own β0. The fairness principle of
§4.3 — false positives and false negatives equally costly whoever they
affect — asks for equal implied thresholds, i.e. c_a / c_b = 1. The
difference β0_a − β0_b (``threshold_prevalence_diff.diff``) tests that;
the ratio c_a / c_b says how much more one group's false negatives are
weighed than the other's, in the units a policy would state it (§4.3: "a
false positive ten times as costly as a false negative"). It is also the
odds ratio of the two prevalences at the threshold, odds(β0_b)/odds(β0_a).

Interval: MOVER on the log scale. log c = log(1 − β0) − log β0 is a
decreasing map of β0, so each group's interval for β0 at the table's level
[l, u] is, exactly and at the same level, an interval [log c(u), log c(l)]
for log c — the same bounds the ``threshold_prevalence`` table publishes as
``cost_ratio_ci_low/high``, whatever built them (HC normal, Wilson on the
effective n, the robust bias-corrected fit). The method of variance
estimates recovery (MOVER; Zou and Donner 2008, Stat Med 27:1693; Newcombe
1998 method 10 for a difference of proportions, which the diff column
uses) combines the two independent groups' intervals into one for the
difference log c_a − log c_b, each side's spread recovered from its own
interval's distance to its estimate; the ratio's interval is its
exponential. Why this and not the delta method on log c:

* it cannot leave (0, ∞): a bound is 0 or ∞ only where a group's β0
  interval reaches 0 or 1, i.e. exactly where that group's own cost ratio
  interval is unbounded, so the ratio agrees with the per-group intervals;
* near 0 and 1 (rare events, small windows, where the β0 interval is the
  skewed Wilson one and the HC SE can be 0) it keeps the skew of the β0
  interval, which the delta SE se/(β0(1 − β0)) — symmetric on log c and 0
  for an all-equal window — loses;
* with two ``hc_normal`` groups and small SEs it reduces to the delta
  method, log(c_a/c_b) ± z·√(Σ se²/(β0(1 − β0))²), to first order;
* it is reciprocal: swapping a and b inverts the ratio and its bounds.

As for the difference, the intervals are those of the fits each group's
interval is built around (the local linear fit for ``conventional``, the
bias-corrected local quadratic one for ``robust``), the result widened to
contain the point ratio of the local linear estimates; a group whose
bias-corrected estimate is clipped to 0 or 1 (so log c has no finite
centre) contributes its published interval around its point estimate
instead. The test of equal thresholds stays the diff's ``p_value``
(c_a = c_b exactly when β0_a = β0_b); the two intervals live on different
scales and may disagree at the margin about excluding "no difference".
Coverage: tests/test_cost_ratio.py and ``bench/coverage_decisions.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fairmon.transforms.decisions.threshold import ThresholdPrevalence, mover_difference

__all__ = ["CostRatioRatio", "cost_ratio_ratio", "log_cost_ratio_interval"]


@dataclass(frozen=True)
class CostRatioRatio:
    """c_a / c_b (ratio, dimensionless) and its interval at the level asked;
    NaN with a ``reason`` when either cost ratio is undefined; ``reason`` also
    names an unbounded side (a bound of 0 or inf)."""

    ratio: float
    ci_low: float
    ci_high: float
    reason: str | None = None


def _log_c(p: float) -> float:
    """log((1 − p)/p) for p in [0, 1]: +inf at 0, −inf at 1."""
    with np.errstate(divide="ignore"):
        return float(np.log1p(-p) - np.log(p))


def log_cost_ratio_interval(e: ThresholdPrevalence, level: float = 0.95) -> tuple[float, float, float]:
    """(log c at the interval's centre, lower, upper bound) for one group's
    prevalence at the threshold (seed 002 eq. 6: c = (1 − β0)/β0).

    The centre and bounds are those of the fit ``e``'s interval is built
    around (its first part), carried through the decreasing map
    β0 ↦ log((1 − β0)/β0): the lower bound of log c comes from β0's upper
    bound, ±inf where β0's interval reaches 1 or 0. When that fit's estimate
    is 0 or 1 (no finite centre), ``e``'s own interval (widened to contain
    the point) and its point estimate. ``level`` in (0, 1). NaNs when ``e``
    has no estimate. Raises nothing.
    """
    nan = float("nan")
    if not e.parts:
        return nan, nan, nan
    part = e.parts[0]
    centre, (lo, hi) = part.estimate, part.at(level)
    if not 0 < centre < 1:
        centre, (lo, hi) = e.prevalence_at_threshold, e.interval(level)
    return _log_c(centre), _log_c(hi), _log_c(lo)


def _undefined(name: str, e: ThresholdPrevalence) -> str | None:
    """Why group ``name``'s cost ratio is undefined, or None when it is defined."""
    if not e.parts:
        return f"{name} has no estimate: no cost_ratio_ratio"
    if not np.isfinite(e.implied_cost_ratio):
        return f"{name}'s prevalence at the threshold is {e.prevalence_at_threshold:g}: no cost_ratio_ratio"
    return None


def cost_ratio_ratio(a: ThresholdPrevalence, b: ThresholdPrevalence, level: float = 0.95) -> CostRatioRatio:
    """c_a / c_b, the ratio of two independent groups' (or eq. 5 cells')
    implied cost ratios, with its MOVER interval on the log scale at ``level``
    (seed 002 eqs. 5-6, §4.3's principle: equal costs imply c_a / c_b = 1;
    the module docstring says why this interval).

    Inputs: two :class:`~fairmon.transforms.decisions.threshold.ThresholdPrevalence`
    of disjoint groups built with the same ``ci``; ``level`` in (0, 1). With
    (Lₐ, lₐ, uₐ) = :func:`log_cost_ratio_interval` of a and likewise for b,
    the log-ratio interval is (Lₐ − L_b) − √((Lₐ − lₐ)² + (u_b − L_b)²) to
    (Lₐ − L_b) + √((uₐ − Lₐ)² + (L_b − l_b)²); the ratio's is its
    exponential, widened to contain ``ratio`` = a.implied_cost_ratio /
    b.implied_cost_ratio. Bounds are 0 or inf only where a β0 interval
    reaches 0 or 1 (the reason says which). NaN with a reason when a group
    has no estimate or a prevalence at the threshold of 0 or 1 (no implied
    cost ratio). Raises nothing.
    """
    nan = float("nan")
    why = [w for w in (_undefined("group_a", a), _undefined("group_b", b)) if w]
    if why:
        return CostRatioRatio(nan, nan, nan, "; ".join(why))
    ratio = float(a.implied_cost_ratio / b.implied_cost_ratio)
    log_low, log_high = mover_difference(*log_cost_ratio_interval(a, level), *log_cost_ratio_interval(b, level))
    low, high = min(float(np.exp(log_low)), ratio), max(float(np.exp(log_high)), ratio)
    open_sides = []
    if np.isinf(log_low):
        open_sides.append("down to 0 (group_a's prevalence interval reaches 1 or group_b's reaches 0)")
    if np.isinf(log_high):
        open_sides.append("up to inf (group_a's prevalence interval reaches 0 or group_b's reaches 1)")
    reason = f"cost_ratio_ratio interval unbounded {' and '.join(open_sides)}" if open_sides else None
    return CostRatioRatio(ratio, low, high, reason)
