"""Signal detection theory for human labelers (seed 002 §5.3, eq. 12).

Equal-variance Gaussian model: an item's evidence is N(0, 1) when it is not
violating and N(d′, 1) when it is; the labeler says "violating" above a
criterion t. Against gold labels:

* FPR = P(label = 1 | gold = 0), FNR = P(label = 0 | gold = 1);
* criterion t = Φ⁻¹(1 − FPR), sensitivity d′ = t − Φ⁻¹(FNR);
* prevalence φ = mean(gold) in the group;
* cost ratio c = ((1 − φ)/φ) · exp(−t·d′ + d′²/2) (eq. 12) and implied
  threshold 1/(1 + c) = P(gold = 1 | evidence = t): the posterior probability
  at which this labeler switches to "violating".

Since −t·d′ + d′²/2 = (z² − t²)/2 with z = Φ⁻¹(FNR), log c = logit⁻(φ) +
(z² − t²)/2, whose delta-method variance is
t²·Var(t) + z²·Var(z) + 1/(n φ(1 − φ)) with Var(t) = FPR(1 − FPR)/(n_neg ϕ(t)²)
and Var(z) = FNR(1 − FNR)/(n_pos ϕ(z)²). Rates of exactly 0 or 1 use the
log-linear correction (add 0.5 to each cell) and are flagged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class SDTEstimate:
    """SDT quantities for one group (and labeler); NaN + reason below the minimum counts."""

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

    @property
    def implied_threshold_ci(self) -> tuple[float, float]:
        """(low, high) of 1/(1 + c), from the cost-ratio CI (decreasing map)."""
        return 1 / (1 + self.cost_ratio_ci_high), 1 / (1 + self.cost_ratio_ci_low)


def sdt_from_rates(fpr: float, fnr: float, prevalence: float) -> tuple[float, float, float, float]:
    """(t, d′, implied threshold, cost ratio) from rates (seed 002 §5.3, eq. 12).

    Raises ValueError unless 0 < fpr, fnr, prevalence < 1.
    """
    for name, v in (("fpr", fpr), ("fnr", fnr), ("prevalence", prevalence)):
        if not 0 < v < 1:
            raise ValueError(f"{name} must be in (0, 1), got {v}")
    t = float(stats.norm.ppf(1 - fpr))
    d = t - float(stats.norm.ppf(fnr))
    c = (1 - prevalence) / prevalence * float(np.exp(-t * d + d * d / 2))
    return t, d, 1 / (1 + c), c


def rates_from_sdt(t: float, d_prime: float) -> tuple[float, float]:
    """(FPR, FNR) of criterion t and sensitivity d′: FPR = 1 − Φ(t), FNR = Φ(t − d′)."""
    return float(stats.norm.sf(t)), float(stats.norm.cdf(t - d_prime))


def _exact(k: int, n: int, level: float) -> tuple[float, float]:
    ci = stats.binomtest(int(k), int(n)).proportion_ci(confidence_level=level, method="exact")
    return float(ci.low), float(ci.high)


def _square_range(a: float, b: float) -> tuple[float, float]:
    """min and max of x² for x in [a, b] (a ≤ b, infinities allowed)."""
    lo = 0.0 if a <= 0 <= b else min(a * a, b * b)
    return lo, max(a * a, b * b)


def exact_cost_ratio_interval(fp: int, n_neg: int, fn: int, n_pos: int, level: float) -> tuple[float, float]:
    """Cost-ratio interval from exact binomial bounds, valid near rates of 0 or 1 (DESIGN §4.3).

    Clopper–Pearson intervals for FPR (fp of n_neg), FNR (fn of n_pos) and the
    prevalence φ (n_pos of n_pos + n_neg), each at level 1 − α/3 so that all
    three hold at once with probability ≥ ``level`` (Bonferroni), carried
    through log c = log((1 − φ)/φ) + (z² − t²)/2 with t = Φ⁻¹(1 − FPR),
    z = Φ⁻¹(FNR) (seed 002 eq. 12): its range over that box, since the terms
    are separable and each is monotone in |z|, |t| and φ. Returns (low, high)
    of c; 0 or inf where a rate's bound reaches 0 or 1. Conservative by design.
    """
    a = (1 - level) / 3
    f_lo, f_hi = _exact(fp, n_neg, 1 - a)
    m_lo, m_hi = _exact(fn, n_pos, 1 - a)
    p_lo, p_hi = _exact(n_pos, n_pos + n_neg, 1 - a)
    with np.errstate(divide="ignore", invalid="ignore"):
        t2 = _square_range(float(stats.norm.ppf(1 - f_hi)), float(stats.norm.ppf(1 - f_lo)))
        z2 = _square_range(float(stats.norm.ppf(m_lo)), float(stats.norm.ppf(m_hi)))
        odds_lo = np.log((1 - p_hi) / p_hi) if p_hi > 0 else np.inf
        odds_hi = np.log((1 - p_lo) / p_lo) if p_lo > 0 else np.inf
        lc_lo = odds_lo + z2[0] / 2 - t2[1] / 2
        lc_hi = odds_hi + z2[1] / 2 - t2[0] / 2
        return float(np.exp(lc_lo)), float(np.exp(lc_hi))


def sdt_estimate(
    tp: int,
    fn: int,
    fp: int,
    tn: int,
    *,
    level: float = 0.95,
    min_pos: int = 10,
    min_neg: int = 10,
    near_errors: int = 5,
) -> SDTEstimate:
    """SDT estimate with delta-method CIs from one confusion table against gold labels.

    Inputs: counts of (label, gold) = (1,1) tp, (0,1) fn, (1,0) fp, (0,0) tn.
    Fewer than ``min_pos`` gold positives or ``min_neg`` gold negatives give
    NaN with a reason. A rate of exactly 0 or 1 applies the log-linear
    correction to all four cells and sets ``corrected``. Near 0 or 1 — fewer
    than ``near_errors`` in any of the cells fp, tn, fn, tp — the delta method
    fails (FNR = 0.001 with ~20 gold positives covered 0.000), so the
    cost-ratio interval comes from exact binomial bounds
    (:func:`exact_cost_ratio_interval`) and ``se_log_cost_ratio`` is NaN (no
    delta-method comparison), with a reason. Source: seed 002 §5.3 (eq. 12);
    delta method as in this module's docstring.
    """
    n_pos, n_neg = tp + fn, fp + tn
    nan = float("nan")
    if n_pos < min_pos or n_neg < min_neg:
        return SDTEstimate(
            n_pos,
            n_neg,
            nan,
            nan,
            nan,
            nan,
            nan,
            nan,
            nan,
            nan,
            nan,
            nan,
            nan,
            nan,
            False,
            f"n_pos = {n_pos}, n_neg = {n_neg} below the minimum ({min_pos}, {min_neg})",
        )
    phi = n_pos / (n_pos + n_neg)
    corrected = fp in (0, n_neg) or fn in (0, n_pos)
    if corrected:  # log-linear correction (Hautus 1995)
        fpr, fnr = (fp + 0.5) / (n_neg + 1), (fn + 0.5) / (n_pos + 1)
    else:
        fpr, fnr = fp / n_neg, fn / n_pos
    t, d, tau, c = sdt_from_rates(fpr, fnr, phi)
    zf = float(stats.norm.ppf(fnr))
    var_t = fpr * (1 - fpr) / (n_neg * stats.norm.pdf(t) ** 2)
    var_z = fnr * (1 - fnr) / (n_pos * stats.norm.pdf(zf) ** 2)
    var_logit_phi = 1 / ((n_pos + n_neg) * phi * (1 - phi))
    se_log_c = float(np.sqrt(t * t * var_t + zf * zf * var_z + var_logit_phi))
    zq = stats.norm.ppf(0.5 + level / 2)
    c_lo, c_hi = float(c * np.exp(-zq * se_log_c)), float(c * np.exp(zq * se_log_c))
    notes = ["log-linear correction applied (a rate was 0 or 1)"] if corrected else []
    fewest = min(fp, tn, fn, tp)
    if fewest < near_errors:
        c_lo, c_hi = exact_cost_ratio_interval(fp, n_neg, fn, n_pos, level)
        se_log_c = float("nan")
        notes.append(
            f"a rate is near 0 or 1 ({fewest} < {near_errors} in a cell): cost-ratio interval from exact "
            "Clopper–Pearson bounds (each at 1 − α/3), no delta-method test"
        )
    return SDTEstimate(
        n_pos,
        n_neg,
        fpr,
        fnr,
        phi,
        t,
        float(np.sqrt(var_t)),
        d,
        float(np.sqrt(var_t + var_z)),
        tau,
        c,
        se_log_c,
        c_lo,
        c_hi,
        corrected,
        "; ".join(notes) or None,
    )


def compare_log_cost_ratio(a: SDTEstimate, b: SDTEstimate) -> tuple[float, float]:
    """z statistic and two-sided p-value of log c_a − log c_b (independent estimates)."""
    se = float(np.hypot(a.se_log_cost_ratio, b.se_log_cost_ratio))
    if not (np.isfinite(se) and se > 0 and a.cost_ratio > 0 and b.cost_ratio > 0):
        return float("nan"), float("nan")
    z = (np.log(a.cost_ratio) - np.log(b.cost_ratio)) / se
    return float(z), float(2 * stats.norm.sf(abs(z)))
