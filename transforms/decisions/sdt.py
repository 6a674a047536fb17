"""Signal detection theory for human labelers (seed 002 §5.3, eq. 12; DESIGN §4.3).

Equal-variance Gaussian model: an item's evidence is N(0, 1) when it is not
violating and N(d′, 1) when it is; the labeler says "violating" above a
criterion t. Against gold labels:

* FPR = P(label = 1 | gold = 0), FNR = P(label = 0 | gold = 1);
* criterion t = Φ⁻¹(1 − FPR), sensitivity d′ = t − Φ⁻¹(FNR) (§5.3);
* prevalence φ = mean(gold) in the group;
* cost ratio c = ((1 − φ)/φ) · exp(−t·d′ + d′²/2) (eq. 12) and implied
  threshold 1/(1 + c) = P(gold = 1 | evidence = t): the posterior probability
  at which this labeler switches to "violating".

Since −t·d′ + d′²/2 = (z² − t²)/2 with z = Φ⁻¹(FNR),
log c = log((1 − φ)/φ) + z²/2 − t²/2: a sum of three terms, each a function
of one estimated proportion, each monotone on either side of 1/2.

Intervals (``ci_method``):

* ``delta`` (every cell tp, fn, fp, tn has at least ``min_errors`` counts):
  the delta method. Var(log c) = t²·Var(t) + z²·Var(z) + 1/(n φ(1 − φ)) with
  Var(t) = FPR(1 − FPR)/(n_neg ϕ(t)²) and Var(z) = FNR(1 − FNR)/(n_pos ϕ(z)²);
  Var(d′) = Var(t) + Var(z).
* ``exact`` (a cell has fewer than ``min_errors``: few false negatives, few
  false positives, or few correct answers): Clopper–Pearson bounds for the
  proportions carried through the monotone maps. t depends on FPR alone and
  takes its bounds at ``level``. d′ is decreasing in both FPR and FNR; its
  bounds use FPR and FNR bounds each at level^(1/2). log c uses FPR, FNR and
  φ bounds each at level^(1/3), and its bounds are the exact range of the
  three-term sum over that box (a term's minimum is 0 when its interval
  contains 1/2). Given the gold counts the two error counts are independent
  binomials, and φ̂ depends on the gold counts alone, so all three intervals
  hold together with probability at least (level^(1/3))³ = level: the
  combined interval is conservative, never anti-conservative (Šidák's
  product rule; Clopper–Pearson bounds are themselves conservative). A
  count of 0 makes a bound infinite (e.g. no false negative: no finite upper
  bound on c), which is what such data can say.

Rates of exactly 0 or 1 use the log-linear correction (0.5 added to each
cell) for the point estimates and set ``corrected``; intervals come from the
raw counts and are widened where needed to contain the point estimate.
Confusion counts of a pool count a label per (item, labeler): items labeled
by several labelers make the binomial model an approximation there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize

CI_METHODS = ("delta", "exact")


@dataclass(frozen=True)
class SDTEstimate:
    """SDT quantities for one group (and labeler); NaN + reason below the minimum counts.

    Rates, prevalence and the implied threshold are probabilities; t, d′ and
    their SEs/bounds are in standard deviations of the benign evidence; the
    cost ratio and its bounds are ratios (bounds may be 0 or inf).
    ``se_*`` are delta-method SEs whatever ``ci_method`` gave the intervals.
    """

    n_pos: int
    n_neg: int
    fpr: float
    fnr: float
    prevalence: float
    criterion_t: float
    se_t: float
    d_prime: float
    se_d_prime: float
    implied_threshold: float
    cost_ratio: float
    se_log_cost_ratio: float
    cost_ratio_ci_low: float
    cost_ratio_ci_high: float
    corrected: bool
    reason: str | None = None
    ci_method: str | None = None
    criterion_t_ci_low: float = float("nan")
    criterion_t_ci_high: float = float("nan")
    d_prime_ci_low: float = float("nan")
    d_prime_ci_high: float = float("nan")
    counts: tuple[int, int, int, int] | None = None

    @property
    def implied_threshold_ci(self) -> tuple[float, float]:
        """(low, high) of 1/(1 + c), from the cost-ratio CI (decreasing map)."""
        return _tau(self.cost_ratio_ci_high), _tau(self.cost_ratio_ci_low)

    def log_cost_ratio_interval(self, level: float) -> tuple[float, float]:
        """Interval of log c at another confidence ``level`` by this estimate's
        ``ci_method`` (bounds may be ±inf); (NaN, NaN) when undefined."""
        from scipy import stats  # imported here, not at the top (fairmon.transforms)

        if self.ci_method is None or self.counts is None:
            return float("nan"), float("nan")
        log_c = float(np.log(self.cost_ratio))
        if self.ci_method == "delta":
            h = float(stats.norm.ppf(0.5 + level / 2)) * self.se_log_cost_ratio
            return log_c - h, log_c + h
        lo, hi = _exact_log_c(*self.counts, level)
        return min(lo, log_c), max(hi, log_c)


def _tau(c: float) -> float:
    return 0.0 if c == np.inf else 1.0 / (1.0 + c)


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper–Pearson) interval of a binomial proportion: k successes
    of n > 0 trials at confidence ``level`` (probabilities; 0 and 1 at the
    ends). Used for FPR, FNR and φ near 0 or 1 (DESIGN §4.3). Raises
    ValueError unless 0 ≤ k ≤ n and n > 0."""
    from scipy import stats  # imported here, not at the top (fairmon.transforms)

    if not (n > 0 and 0 <= k <= n):
        raise ValueError(f"need 0 <= k <= n and n > 0, got k={k}, n={n}")
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else float(stats.beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.isf(a, k + 1, n - k))
    return lo, hi


def _half_square_range(q_lo: float, q_hi: float) -> tuple[float, float]:
    """Range of Φ⁻¹(q)²/2 for q in [q_lo, q_hi] (Φ⁻¹(0 or 1)² = inf)."""
    from scipy import stats  # imported here, not at the top (fairmon.transforms)

    ends = [stats.norm.ppf(q) ** 2 / 2 for q in (q_lo, q_hi)]
    low = 0.0 if q_lo <= 0.5 <= q_hi else min(ends)
    return float(low), float(max(ends))


def _exact_log_c(tp: int, fn: int, fp: int, tn: int, level: float) -> tuple[float, float]:
    """Bounds of log c from Clopper–Pearson bounds of FPR, FNR and φ, each at level^(1/3)."""
    g = level ** (1 / 3)
    n_pos, n_neg = tp + fn, fp + tn
    f_lo, f_hi = clopper_pearson(fp, n_neg, g)
    m_lo, m_hi = clopper_pearson(fn, n_pos, g)
    p_lo, p_hi = clopper_pearson(n_pos, n_pos + n_neg, g)
    with np.errstate(divide="ignore"):
        a_lo, a_hi = np.log((1 - p_hi) / p_hi), np.log((1 - p_lo) / p_lo)
    b_lo, b_hi = _half_square_range(m_lo, m_hi)  # z²/2, z = Φ⁻¹(FNR)
    c_lo, c_hi = _half_square_range(1 - f_hi, 1 - f_lo)  # t²/2, t = Φ⁻¹(1 − FPR)
    return float(a_lo + b_lo - c_hi), float(a_hi + b_hi - c_lo)


def sdt_from_rates(fpr: float, fnr: float, prevalence: float) -> tuple[float, float, float, float]:
    """(t, d′, implied threshold, cost ratio) from rates (seed 002 §5.3, eq. 12).

    Raises ValueError unless 0 < fpr, fnr, prevalence < 1.
    """
    from scipy import stats  # imported here, not at the top (fairmon.transforms)

    for name, v in (("fpr", fpr), ("fnr", fnr), ("prevalence", prevalence)):
        if not 0 < v < 1:
            raise ValueError(f"{name} must be in (0, 1), got {v}")
    t = float(stats.norm.ppf(1 - fpr))
    d = t - float(stats.norm.ppf(fnr))
    c = (1 - prevalence) / prevalence * float(np.exp(-t * d + d * d / 2))
    return t, d, 1 / (1 + c), c


def rates_from_sdt(t: float, d_prime: float) -> tuple[float, float]:
    """(FPR, FNR) of criterion t and sensitivity d′: FPR = 1 − Φ(t), FNR = Φ(t − d′) (seed 002 §5.3)."""
    from scipy import stats  # imported here, not at the top (fairmon.transforms)

    return float(stats.norm.sf(t)), float(stats.norm.cdf(t - d_prime))


def _exact_intervals(
    tp: int, fn: int, fp: int, tn: int, level: float, point: tuple[float, float, float]
) -> tuple[tuple[float, float], tuple[float, float], tuple[float, float]]:
    """Exact intervals for (t, d′, c) from the raw counts (module docstring):
    Clopper–Pearson bounds on the rates carried through the monotone maps — t
    at ``level``, d′ at its square root per rate, c through
    :func:`_exact_log_c`. Used when a cell is too small for the delta method.
    Each interval is widened to contain its point estimate in ``point``
    (t, d′, c), since the log-linear-corrected points may sit just outside the
    raw-count bounds. Source: seed 002 §5.3, eq. 12."""
    from scipy import stats  # imported here, not at the top (fairmon.transforms)

    n_pos, n_neg = tp + fn, fp + tn
    f_lo, f_hi = clopper_pearson(fp, n_neg, level)
    t_ci = (float(stats.norm.isf(f_hi)), float(stats.norm.isf(f_lo)))
    g2 = level**0.5
    f2_lo, f2_hi = clopper_pearson(fp, n_neg, g2)
    m2_lo, m2_hi = clopper_pearson(fn, n_pos, g2)
    d_ci = (
        float(stats.norm.isf(f2_hi) - stats.norm.ppf(m2_hi)),
        float(stats.norm.isf(f2_lo) - stats.norm.ppf(m2_lo)),
    )
    lc_lo, lc_hi = _exact_log_c(tp, fn, fp, tn, level)
    with np.errstate(over="ignore"):
        c_ci = (float(np.exp(lc_lo)), float(np.exp(lc_hi)))
    t_ci, d_ci, c_ci = (
        (min(lo, x), max(hi, x)) for (lo, hi), x in ((t_ci, point[0]), (d_ci, point[1]), (c_ci, point[2]))
    )
    return t_ci, d_ci, c_ci


def sdt_estimate(
    tp: int,
    fn: int,
    fp: int,
    tn: int,
    *,
    level: float = 0.95,
    min_pos: int = 10,
    min_neg: int = 10,
    min_errors: int = 5,
) -> SDTEstimate:
    """SDT estimate with intervals from one confusion table against gold labels
    (seed 002 §5.3, eq. 12; DESIGN §4.3).

    Inputs: counts of (label, gold) = (1,1) tp, (0,1) fn, (1,0) fp, (0,0) tn
    (non-negative integers). Fewer than ``min_pos`` gold positives or
    ``min_neg`` gold negatives give NaN with a reason. A rate of exactly 0 or
    1 applies the log-linear correction to all four cells for the point
    estimates and sets ``corrected``. Intervals by the delta method, or by
    exact bounds when a cell has fewer than ``min_errors`` counts (module
    docstring); ``ci_method`` says which and ``reason`` says why. Raises
    ValueError on a negative count or ``min_errors`` < 0.
    """
    from scipy import stats  # imported here, not at the top (fairmon.transforms)

    if min(tp, fn, fp, tn) < 0:
        raise ValueError(f"counts must be >= 0, got tp={tp}, fn={fn}, fp={fp}, tn={tn}")
    if min_errors < 0:
        raise ValueError(f"min_errors must be >= 0, got {min_errors}")
    n_pos, n_neg = tp + fn, fp + tn
    nan = float("nan")
    if n_pos < min_pos or n_neg < min_neg:
        return SDTEstimate(
            n_pos,
            n_neg,
            *([nan] * 12),
            False,
            f"n_pos = {n_pos}, n_neg = {n_neg} below the minimum ({min_pos}, {min_neg})",
        )
    reasons = []
    phi = n_pos / (n_pos + n_neg)
    corrected = fp in (0, n_neg) or fn in (0, n_pos)
    if corrected:  # log-linear correction (Hautus 1995)
        fpr, fnr = (fp + 0.5) / (n_neg + 1), (fn + 0.5) / (n_pos + 1)
        reasons.append("log-linear correction applied (a rate was 0 or 1)")
    else:
        fpr, fnr = fp / n_neg, fn / n_pos
    t, d, tau, c = sdt_from_rates(fpr, fnr, phi)
    zf = float(stats.norm.ppf(fnr))
    var_t = fpr * (1 - fpr) / (n_neg * stats.norm.pdf(t) ** 2)
    var_z = fnr * (1 - fnr) / (n_pos * stats.norm.pdf(zf) ** 2)
    var_logit_phi = 1 / ((n_pos + n_neg) * phi * (1 - phi))
    se_t, se_d = float(np.sqrt(var_t)), float(np.sqrt(var_t + var_z))
    se_log_c = float(np.sqrt(t * t * var_t + zf * zf * var_z + var_logit_phi))
    few = {k: v for k, v in (("tp", tp), ("fn", fn), ("fp", fp), ("tn", tn)) if v < min_errors}
    if not few:
        zq = float(stats.norm.ppf(0.5 + level / 2))
        method = "delta"
        t_ci = (t - zq * se_t, t + zq * se_t)
        d_ci = (d - zq * se_d, d + zq * se_d)
        c_ci = (c * float(np.exp(-zq * se_log_c)), c * float(np.exp(zq * se_log_c)))
    else:
        method = "exact"
        cells = ", ".join(f"{k} = {v}" for k, v in few.items())
        reasons.append(
            f"fewer than {min_errors} in a cell ({cells}): exact Clopper–Pearson bounds carried through"
            " (t at the level, d′ at its square root, c at its cube root per rate)"
        )
        t_ci, d_ci, c_ci = _exact_intervals(tp, fn, fp, tn, level, (t, d, c))
        if not np.isfinite(c_ci[1]):
            reasons.append("no finite upper bound on the cost ratio (no false negative)")
        if c_ci[0] == 0:
            reasons.append("no positive lower bound on the cost ratio (no false positive)")
    return SDTEstimate(
        n_pos,
        n_neg,
        fpr,
        fnr,
        phi,
        t,
        se_t,
        d,
        se_d,
        tau,
        c,
        se_log_c,
        c_ci[0],
        c_ci[1],
        corrected,
        "; ".join(reasons) or None,
        method,
        t_ci[0],
        t_ci[1],
        d_ci[0],
        d_ci[1],
        (tp, fn, fp, tn),
    )


def compare_log_cost_ratio(a: SDTEstimate, b: SDTEstimate) -> tuple[float, float]:
    """Wald z statistic and two-sided p-value of log c_a − log c_b for
    independent estimates (delta-method SEs of seed 002 eq. 12's log c);
    (NaN, NaN) when undefined. Raises nothing."""
    from scipy import stats  # imported here, not at the top (fairmon.transforms)

    se = float(np.hypot(a.se_log_cost_ratio, b.se_log_cost_ratio))
    if not (np.isfinite(se) and se > 0 and a.cost_ratio > 0 and b.cost_ratio > 0):
        return float("nan"), float("nan")
    z = (np.log(a.cost_ratio) - np.log(b.cost_ratio)) / se
    return float(z), float(2 * stats.norm.sf(abs(z)))


def compare_cost_ratios(a: SDTEstimate, b: SDTEstimate) -> tuple[float, str | None]:
    """Two-sided p-value of c_a = c_b for independent estimates, and how it was
    obtained (seed 002 §5.3: comparing cost ratios between labelers or groups).

    Both ``delta``: the Wald test of :func:`compare_log_cost_ratio`. Otherwise
    (an ``exact`` estimate, whose delta SE is unreliable near 0 and 1) the
    interval-overlap test: with γ* the largest level at which the two log c
    intervals are disjoint, p = 1 − γ*². Under c_a = c_b both intervals hold
    the common value with probability ≥ γ² (independence), so this p-value is
    valid and conservative. Returns (NaN, reason) when either estimate is
    undefined. Raises nothing.
    """
    nan = float("nan")
    if a.ci_method is None or b.ci_method is None:
        return nan, "no estimate to compare (too few gold labels)"
    if a.ci_method == b.ci_method == "delta":
        return compare_log_cost_ratio(a, b)[1], None

    def gap(level: float) -> float:  # > 0 when the intervals are disjoint
        la, ha = a.log_cost_ratio_interval(level)
        lb, hb = b.log_cost_ratio_interval(level)
        return max(la, lb) - min(ha, hb)

    eps = 1e-9
    if gap(eps) <= 0:
        return 1.0, "p-value by interval overlap (exact bounds; conservative)"
    if gap(1 - eps) > 0:
        return float(1 - (1 - eps) ** 2), "p-value by interval overlap (exact bounds; conservative)"
    g = optimize.brentq(gap, eps, 1 - eps, xtol=1e-12)
    return float(1 - g * g), "p-value by interval overlap (exact bounds; conservative)"
