"""Ranking-based Equal Opportunity (REO) with missing labels: point estimates and
delta-method confidence intervals.

Source: seed 001 (Dong, Jin, Hu, Liu, "Measuring Fairness in Large-Scale
Recommendation Systems with Missing Labels", 2024). Equation numbers below are
that paper's; ``DESIGN.md §4.1`` fixes the conventions used here.

Notation (per sensitive group k = 1..K):

* ``Q_k = #{Y=1, S=k in D_rec} / |D_rec|``  (default traffic, one day, one arm)
* ``P_k = #{Y=1, S=k in D_rand} / |D_rand|`` (random traffic, trailing window)
* ``U_k = Q_k / P_k``                          RTPR utility, eq. 4 (up to a common
  constant that every reported quantity is invariant to)
* ``ΔU_k = U_k / mean(U) - 1``                 relative utility, eqs. 3 and 7
* ``REO = std(U) / mean(U)`` (population std, ddof = 0), eq. 19

Variance. Q̂ (and P̂) are shares of one multinomial draw, so
``Cov(Q̂_j, Q̂_k) = (δ_jk Q_k - Q_j Q_k) / n``. REO and ΔU are invariant to a
common rescaling of U, so their gradients with respect to ``log U`` sum to zero
and the ``-Q_j Q_k`` term drops out exactly. With ``g_j = ∂REO/∂log U_j``::

    Var(REO)  = Σ_j g_j² (1/(Q_j n_rec) + 1/(P_j n_rand))        # method "delta"

which is Algorithm 1 (Var = HᵀGᵀΓGH) with the full multinomial Γ. The paper's
diagonal Γ uses ``(1-Q_j)/(Q_j n_rec) + (1-P_j)/(P_j n_rand)`` (method
"delta_paper"); that form is right only when Q, P ≪ 1 and undercovers at
engagement rates of 20–40 %.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from scipy import stats

CIMethod = Literal["delta", "delta_paper", "bootstrap_percentile", "bootstrap_normal", "bootstrap_bca"]
CI_METHODS: tuple[str, ...] = ("delta", "delta_paper", "bootstrap_percentile", "bootstrap_normal", "bootstrap_bca")

#: REO of U = (0.8, 1): the 80 % rule expressed as an REO threshold (seed 001 §4.3).
EIGHTY_PERCENT_RULE_REO = 1.0 / 9.0


@dataclass(frozen=True)
class REOEstimate:
    """Result of :func:`estimate_reo` for one (day, arm, attribute).

    Arrays have shape (K,), ordered like the input groups. Undefined values are
    NaN and ``reason`` says why (``None`` when everything is defined).
    """

    groups: tuple[str, ...]
    Q: np.ndarray
    P: np.ndarray
    U: np.ndarray
    delta_U: np.ndarray
    se_delta_U: np.ndarray
    ci_low_delta_U: np.ndarray
    ci_high_delta_U: np.ndarray
    reo: float
    se: float
    ci_low: float
    ci_high: float
    n_rec: int
    n_rand: int
    ci_method: str
    level: float
    reason: str | None = None
    group_reasons: tuple[str | None, ...] = field(default_factory=tuple)

    @property
    def K(self) -> int:
        """Number of groups."""
        return len(self.groups)

    @property
    def exceeds_80pct_rule(self) -> bool:
        """True when REO > 1/9, the REO of the 80 % rule's U = (0.8, 1) (seed 001 §4.3)."""
        return bool(np.isfinite(self.reo) and self.reo > EIGHTY_PERCENT_RULE_REO)


def reo_of_utilities(U: np.ndarray) -> float:
    """REO = std(U)/mean(U) with the population std (ddof = 0).

    Source: seed 001 eq. 19. Input: U, shape (K,), non-negative utilities (any
    common scale). Returns NaN when mean(U) is 0 or U has a NaN.

    Reference values (DESIGN §5): U = (0.8, 1) gives 1/9; U = (1/2, 1) gives
    1/3 (seed 001 Example 3.1, dataset B, prints 2/3, which is |U1-U2|/mean,
    not std/mean; this function keeps the std/mean definition and gives 1/3).
    """
    U = np.asarray(U, dtype=float)
    m = U.mean()
    if not np.isfinite(m) or m == 0:
        return float("nan")
    return float(U.std(ddof=0) / m)


def relative_utilities(U: np.ndarray) -> np.ndarray:
    """ΔU_k = U_k / mean(U) - 1 (seed 001 eqs. 3 and 7). Shape (K,) -> (K,)."""
    U = np.asarray(U, dtype=float)
    return U / U.mean() - 1.0


def reo_log_gradient(U: np.ndarray) -> np.ndarray:
    """g_j = ∂REO/∂log U_j, shape (K,).

    Closed form of ``U_j (G H)_j`` from seed 001 Algorithm 1, with
    G_{j,k} = ∂ΔU_k/∂U_j = K(δ_jk ΣU - U_k)/(ΣU)² and H_j = ΔU_j/(K·REO):
    ``g_j = (1 + ΔU_j)/K · (ΔU_j/REO - REO)``. Sums to zero (scale invariance).
    Raises ZeroDivisionError-free: returns NaN entries when REO = 0 (REO is not
    differentiable there).
    """
    U = np.asarray(U, dtype=float)
    K = U.size
    dU = relative_utilities(U)
    r = reo_of_utilities(U)
    if not np.isfinite(r) or r == 0:
        return np.full(K, np.nan)
    return (1.0 + dU) / K * (dU / r - r)


def delta_u_log_jacobian(U: np.ndarray) -> np.ndarray:
    """A_{k,j} = ∂ΔU_k/∂log U_j, shape (K, K).

    From G of seed 001 Algorithm 1: ``A_{k,j} = δ_kj (1+ΔU_k) - (1+ΔU_j)(1+ΔU_k)/K``.
    Each row sums to zero (scale invariance).
    """
    U = np.asarray(U, dtype=float)
    K = U.size
    a = 1.0 + relative_utilities(U)
    return np.diag(a) - np.outer(a, a) / K


def log_utility_variance(
    Q: np.ndarray, P: np.ndarray, n_rec: float, n_rand: float, method: CIMethod = "delta"
) -> np.ndarray:
    """Per-group variance term v_j of log Û_j used by both REO and ΔU, shape (K,).

    ``delta``: 1/(Q_j n_rec) + 1/(P_j n_rand), the diagonal left after the
    common multinomial term cancels (DESIGN §4.1). ``delta_paper``:
    (1-Q_j)/(Q_j n_rec) + (1-P_j)/(P_j n_rand), seed 001 Algorithm 1's
    diagonal Γ divided by U_j². Raises ValueError on an unknown method.
    Entries are inf where Q_j or P_j is 0.
    """
    Q = np.asarray(Q, dtype=float)
    P = np.asarray(P, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        if method == "delta":
            return 1.0 / (Q * n_rec) + 1.0 / (P * n_rand)
        if method == "delta_paper":
            return (1.0 - Q) / (Q * n_rec) + (1.0 - P) / (P * n_rand)
    raise ValueError(f"unknown ci_method {method!r}; expected one of {CI_METHODS}")


def z_value(level: float) -> float:
    """Two-sided normal quantile for a confidence level in (0, 1)."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be in (0, 1), got {level}")
    return float(stats.norm.ppf(0.5 + level / 2.0))


def estimate_reo(
    groups: list[str] | tuple[str, ...],
    n_pos_rec: np.ndarray,
    n_rec: int,
    n_pos_rand: np.ndarray,
    n_rand: int,
    *,
    ci_method: CIMethod = "delta",
    level: float = 0.95,
    n_boot: int = 1000,
    rng: np.random.Generator | None = None,
) -> REOEstimate:
    """REO, U, ΔU and their standard errors and CIs from per-group counts.

    Inputs: ``n_pos_rec[k]`` = #{Y=1, S=k} in default traffic (one day, one
    arm), ``n_rec`` = |D_rec| (all rows, including rows of groups not listed);
    ``n_pos_rand[k]`` and ``n_rand`` likewise for the random-traffic window.
    Shapes (K,) with K >= 1; counts are non-negative integers.

    ``ci_method``: "delta" (full multinomial covariance), "delta_paper"
    (Algorithm 1's diagonal Γ), or "bootstrap_percentile" / "bootstrap_normal"
    / "bootstrap_bca" (seed 001 §4.3: ``n_boot`` multinomial resamples of the
    count tables drawn with ``rng``; SE = bootstrap sd).

    Returns an :class:`REOEstimate`. Never raises for degenerate data: P_k = 0
    makes U_k (and REO) NaN; Q_k = 0 or REO = 0 keep the point estimate but make
    the SE NaN (the delta method is undefined there); each with a reason.
    Raises ValueError for malformed input (shape mismatch, negative counts,
    counts above their totals, unknown ci_method, level outside (0, 1)).

    Source: seed 001 eqs. 3, 4, 7, 19 and Algorithm 1, with the full
    multinomial covariance (DESIGN §4.1).
    """
    groups = tuple(str(g) for g in groups)
    a = np.asarray(n_pos_rec, dtype=float)
    b = np.asarray(n_pos_rand, dtype=float)
    K = len(groups)
    if a.shape != (K,) or b.shape != (K,):
        raise ValueError(f"counts must have shape ({K},), got {a.shape} and {b.shape}")
    if (a < 0).any() or (b < 0).any() or n_rec < 0 or n_rand < 0:
        raise ValueError("counts must be non-negative")
    if a.sum() > n_rec or b.sum() > n_rand:
        raise ValueError("positive counts exceed the traffic totals")
    if ci_method not in CI_METHODS:
        raise ValueError(f"unknown ci_method {ci_method!r}; expected one of {CI_METHODS}")
    z = z_value(level)

    nan_k = np.full(K, np.nan)
    reasons: list[str] = []
    with np.errstate(divide="ignore", invalid="ignore"):
        Q = a / n_rec if n_rec > 0 else nan_k.copy()
        P = b / n_rand if n_rand > 0 else nan_k.copy()
        U = np.where(P > 0, Q / P, np.nan)
    group_reasons: list[str | None] = [None] * K
    if n_rec == 0:
        reasons.append("no default traffic")
    if n_rand == 0:
        reasons.append("no random traffic in the window")
    if K < 2:
        reasons.append(f"K = {K}: REO needs at least 2 groups")
    zero_p = [g for g, p in zip(groups, P) if p == 0]
    if zero_p and n_rand > 0:
        reasons.append(f"P_k = 0 (no positives in random traffic) for group(s) {', '.join(zero_p)}: U_k undefined")
        for i, p in enumerate(P):
            if p == 0:
                group_reasons[i] = "P_k = 0"

    U_defined = bool(K >= 2 and np.isfinite(U).all())
    if U_defined and U.sum() == 0:
        reasons.append("all U_k = 0 (no positives in default traffic): REO undefined")
        U_defined = False

    if not U_defined:
        return REOEstimate(
            groups,
            Q,
            P,
            U,
            nan_k.copy(),
            nan_k.copy(),
            nan_k.copy(),
            nan_k.copy(),
            float("nan"),
            float("nan"),
            float("nan"),
            float("nan"),
            int(n_rec),
            int(n_rand),
            ci_method,
            level,
            "; ".join(reasons) or "undefined",
            tuple(group_reasons),
        )

    dU = relative_utilities(U)
    reo = reo_of_utilities(U)
    v = log_utility_variance(Q, P, n_rec, n_rand, "delta_paper" if ci_method == "delta_paper" else "delta")

    se_reo = float("nan")
    zero_q = [g for g, q in zip(groups, Q) if q == 0]
    se_dU = nan_k.copy()
    if zero_q:
        reasons.append(f"Q_k = 0 for group(s) {', '.join(zero_q)}: delta-method SE undefined")
        for i, q in enumerate(Q):
            if q == 0:
                group_reasons[i] = "Q_k = 0"
    else:
        A = delta_u_log_jacobian(U)
        se_dU = np.sqrt((A**2) @ v)
        if reo == 0:
            reasons.append("REO = 0: std/mean is not differentiable there, SE undefined")
        else:
            g = reo_log_gradient(U)
            se_reo = float(np.sqrt(np.sum(g**2 * v)))

    ci_low = max(0.0, reo - z * se_reo) if np.isfinite(se_reo) else float("nan")
    ci_high = reo + z * se_reo if np.isfinite(se_reo) else float("nan")
    lo_dU, hi_dU = dU - z * se_dU, dU + z * se_dU
    if ci_method.startswith("bootstrap") and not zero_q:
        from fairmon.transforms.bootstrap import single_arm_bootstrap

        boot = single_arm_bootstrap(
            a,
            int(n_rec),
            b,
            int(n_rand),
            method=ci_method,
            level=level,
            B=n_boot,
            rng=rng if rng is not None else np.random.default_rng(0),
        )
        ci_low, ci_high, se_reo = boot["reo"]
        lo_dU, hi_dU, se_dU = (np.array(x) for x in zip(*boot["delta_U"]))
    return REOEstimate(
        groups,
        Q,
        P,
        U,
        dU,
        se_dU,
        lo_dU,
        hi_dU,
        reo,
        se_reo,
        ci_low,
        ci_high,
        int(n_rec),
        int(n_rand),
        ci_method,
        level,
        "; ".join(reasons) or None,
        tuple(group_reasons),
    )


def naive_reo_recommended_only(n_pos_rec: np.ndarray, n_group_rec: np.ndarray) -> float:
    """Diagnostic only: REO of per-group positive rates inside default traffic.

    Uses the recommended subset alone, U_k^naive = #{Y=1,S=k in D_rec}/#{S=k in D_rec},
    i.e. P(Y=1 | R=1, S=k), which is not the RTPR P(R=1 | Y=1, S=k) of eq. 4:
    the preferences of unshown items never enter. Seed 001 §1 warns against it.
    Shapes (K,). NaN when a group has no default rows.
    """
    a = np.asarray(n_pos_rec, dtype=float)
    n = np.asarray(n_group_rec, dtype=float)
    if (n <= 0).any():
        return float("nan")
    return reo_of_utilities(a / n)


def naive_reo_missing_as_negative(n_pos_rec: np.ndarray, n_rec: int, n_group_rand: np.ndarray, n_rand: int) -> float:
    """Diagnostic only: REO when labels of unshown pairs are taken as negative.

    The only known positives are those default traffic revealed, so group k's
    positive mass is replaced by its exposure share in the candidate pool
    (random traffic), U_k^naive = Q_k / (#{S=k in D_rand}/|D_rand|). This is the
    estimator of eq. 4 with every group's unknown positive rate set equal,
    which seed 001 §1 shows can deviate far from the truth. Shapes (K,).
    """
    a = np.asarray(n_pos_rec, dtype=float)
    m = np.asarray(n_group_rand, dtype=float)
    if n_rec <= 0 or n_rand <= 0 or (m <= 0).any():
        return float("nan")
    return reo_of_utilities((a / n_rec) / (m / n_rand))
