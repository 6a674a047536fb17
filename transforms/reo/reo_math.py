"""REO's algebra on per-group utilities: the point estimate, relative
utilities, their log-scale gradients and delta-method covariances, the
verdict rule and the small-group rule.

These are the pieces every interval method shares (delta, cluster-robust,
bootstrap, A/B, planning), kept apart from :func:`fairmon.transforms.reo.estimate.estimate_reo`
so that the interval modules import them without importing each other.

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

from typing import Literal

import numpy as np

CIMethod = Literal["delta", "delta_paper", "bootstrap_percentile", "bootstrap_normal", "bootstrap_bca"]
CI_METHODS: tuple[str, ...] = ("delta", "delta_paper", "bootstrap_percentile", "bootstrap_normal", "bootstrap_bca")

#: REO of U = (0.8, 1): the 80 % rule expressed as an REO threshold (seed 001 §4.3).
EIGHTY_PERCENT_RULE_REO = 1.0 / 9.0

#: Default ``min_expected_positives``: a group with fewer positives than this in
#: default or random traffic is a small group (DESIGN §4.1).
MIN_EXPECTED_POSITIVES = 30

#: REO values at or below this are rounding of equal utilities, i.e. REO = 0: U_k
#: = Q_k/P_k carries a few ulps (1e-16) of relative error, far below any
#: sampling variation that a count table can express.
REO_ROUNDING = 1e-12

Verdict = Literal["exceeds", "within", "inconclusive", "undefined"]


def reo_of_utilities(U: np.ndarray) -> float:
    """REO = std(U)/mean(U) with the population std (ddof = 0).

    Source: seed 001 eq. 19. Input: U, shape (K,), non-negative utilities (any
    common scale). Returns NaN when mean(U) is 0 or U has a NaN.

    An REO at or below :data:`REO_ROUNDING` is floating-point rounding of
    equal utilities (counts 8/12 and 6/9 give U_1 = U_2 up to an ulp): it is
    returned as exactly 0, i.e. parity.

    Reference values (DESIGN §5): U = (0.8, 1) gives 1/9; U = (1/2, 1) gives
    1/3 (seed 001 Example 3.1, dataset B, prints 2/3, which is |U1-U2|/mean,
    not std/mean; this function keeps the std/mean definition and gives 1/3).
    """
    U = np.asarray(U, dtype=float)
    m = U.mean()
    if not np.isfinite(m) or m == 0:
        return float("nan")
    r = float(U.std(ddof=0) / m)
    return 0.0 if r <= REO_ROUNDING else r


def relative_utilities(U: np.ndarray) -> np.ndarray:
    """ΔU_k = U_k / mean(U) - 1 (seed 001 eqs. 3 and 7). Shape (K,) -> (K,)."""
    U = np.asarray(U, dtype=float)
    return U / U.mean() - 1.0


def reo_log_gradient(U: np.ndarray) -> np.ndarray:
    """g_j = ∂REO/∂log U_j along the last axis: (..., K) -> (..., K), e.g. one
    utility vector (K,) or a bootstrap's replicates (B, K).

    Closed form of ``U_j (G H)_j`` from seed 001 Algorithm 1, with
    G_{j,k} = ∂ΔU_k/∂U_j = K(δ_jk ΣU - U_k)/(ΣU)² and H_j = ΔU_j/(K·REO):
    ``g_j = (1 + ΔU_j)/K · (ΔU_j/REO - REO)``. Sums to zero (scale invariance).
    Raises nothing: a row whose REO is 0 (at or below :data:`REO_ROUNDING`, as
    :func:`reo_of_utilities` takes it) or undefined is NaN (REO is not
    differentiable there).
    """
    U = np.asarray(U, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = U.mean(axis=-1, keepdims=True)
        dU = U / m - 1.0
        r = U.std(axis=-1, keepdims=True) / m
    r = np.where(np.isfinite(r) & (r > REO_ROUNDING), r, np.nan)
    return (1.0 + dU) / U.shape[-1] * (dU / r - r)


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


def few_cluster_scale(level: float, df: float) -> float:
    """t_{df}(1 − α/2) / z(1 − α/2), α = 1 − ``level``: how much wider a
    cluster-robust interval is than its normal one when the sandwich has
    ``df`` = units − 1 degrees of freedom. The sandwich over G clusters is an
    average of G cross products, so its Wald statistic is closer to t_{G−1}
    than to N(0, 1); with the G/(G−1) factor this is the usual few-cluster
    correction (Cameron & Miller 2015 §VI.C; Stata's CR1 with t(G−1)). 1 for
    df = inf (independent rows); 20 units: 1.068; 128: 1.010. NaN for
    df < 1 or NaN (fewer than 2 units: the sandwich itself is undefined), so
    callers need no guard. Raises ValueError for a level outside (0, 1)."""
    if not df >= 1:
        return float("nan")
    if not np.isfinite(df):
        return 1.0
    from fairmon.transforms.distributions import t_ppf

    return t_ppf(0.5 + level / 2.0, df) / z_value(level)


def z_value(level: float) -> float:
    """Two-sided normal quantile for a confidence level in (0, 1)."""
    from fairmon.transforms.distributions import norm_ppf

    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be in (0, 1), got {level}")
    return norm_ppf(0.5 + level / 2.0)


def delta_u_covariance(U: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Σ = A diag(v) Aᵀ, the delta-method covariance of ΔÛ, shape (K, K).

    Inputs: utilities U (K,) and the per-group variances v (K,) of log Û_j
    (:func:`log_utility_variance`), or a full covariance V (K, K) of log Û
    (the cluster-robust one, giving A V Aᵀ); A is :func:`delta_u_log_jacobian`. Rank
    K − 1 (ΔU sums to zero). Source: seed 001 Algorithm 1 (Σ = GᵀΓG) with the
    full multinomial Γ of DESIGN §4.1.
    """
    A = delta_u_log_jacobian(U)
    v = np.asarray(v, dtype=float)
    if v.ndim == 2:  # a full covariance of log Û (cluster-robust, transforms/reo/cluster.py)
        return A @ v @ A.T
    return (A * v) @ A.T


def delta_u_factor(U: np.ndarray, F: np.ndarray) -> np.ndarray:
    """B = F Aᵀ, shape (r, K), with Σ = BᵀB the delta covariance of ΔÛ when
    the covariance of log Û is V = FᵀF (F (r, K), e.g. the stacked
    cluster-robust factors of default and random traffic,
    :meth:`fairmon.transforms.reo.cluster.BucketSums.log_share_factor`). A
    (:func:`delta_u_log_jacobian`) is diag(a) − aaᵀ/K with a = 1 + ΔU, so B
    costs O(rK) and Σ is never formed: diag Σ, tr Σ and its spectrum come
    from B. Source: seed 001 Algorithm 1 (Σ = GᵀΓG) with a factored Γ."""
    U = np.asarray(U, dtype=float)
    F = np.asarray(F, dtype=float)
    a = 1.0 + relative_utilities(U)
    return F * a - np.outer(F @ a, a) / U.size


def verdict_80pct(
    ci_low: float, ci_high: float, threshold: float = EIGHTY_PERCENT_RULE_REO, *, small: bool = False
) -> str:
    """The verdict against the REO line from the CI, never the point estimate (DESIGN §4.1).

    ``exceeds`` when ci_low > threshold, ``within`` when ci_high ≤ threshold,
    otherwise ``inconclusive``; ``undefined`` when a bound is NaN. A day with a
    small group (``small``) is ``inconclusive`` at best. The default threshold
    1/9 is the 80 % rule for K = 2 (seed 001 §4.3); for K > 2 it is the
    configured ``reo_threshold``.
    """
    if not (np.isfinite(ci_low) and np.isfinite(ci_high)):
        return "undefined"
    if small:
        return "inconclusive"
    if ci_low > threshold:
        return "exceeds"
    if ci_high <= threshold:
        return "within"
    return "inconclusive"


def small_groups(
    groups: tuple[str, ...], n_pos_rec: np.ndarray, n_pos_rand: np.ndarray, minimum: float
) -> tuple[tuple[bool, ...], tuple[str | None, ...]]:
    """Which groups are small: expected positives n_rec·Q̂_k (= positives in
    default traffic) or n_rand·P̂_k (in random traffic) below ``minimum``
    (config ``min_expected_positives``, DESIGN §4.1). Shapes (K,). Returns
    (flags, reasons) per group: with few expected positives the delta
    intervals under-cover and REO is biased up (figures in bench/README.md)."""
    a_all, b_all = np.asarray(n_pos_rec), np.asarray(n_pos_rand)
    flags = ((a_all < minimum) | (b_all < minimum)).tolist()  # compared by array: thousands of groups
    reasons = [
        f"small group {g!r}: {int(a)} positives in default, {int(b)} in random traffic "
        f"(min_expected_positives = {minimum:g})"
        if small
        else None
        for g, a, b, small in zip(groups, a_all.tolist(), b_all.tolist(), flags)
    ]
    return tuple(flags), tuple(reasons)


#: Groups a reason names before it counts the rest (each group's own row says it in full).
NAMED_GROUPS = 10


def named_groups(groups: list[str]) -> str:
    """The groups a reason names, as "group(s) a, b": the first :data:`NAMED_GROUPS` named and
    the rest counted ("group(s) a, …, j and 602 more (each group's row says
    which)"), so a day of thousands of thin groups keeps a readable reason."""
    head = ", ".join(groups[:NAMED_GROUPS])
    more = len(groups) - NAMED_GROUPS
    return f"group(s) {head}" + (f" and {more} more (each group's row says which)" if more > 0 else "")


def paired_fold_se(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """SE of the full-data difference from M paired folds, and its degrees of freedom.

    Fold m of the treatment (x_m) and of the control (y_m) share random-traffic
    fold m, so d_m = x_m − y_m are M independent replicates of a difference
    estimated on 1/M of the data: SE = sd(d)/√M (ddof = 1), df = M − 1 — a
    paired t (DESIGN §4.1; seed 001 Algorithm 3 with the folds paired). The
    unpaired Welch form ignores the shared P̂ and under-covers when a
    treatment flips the favoured group (figures in DESIGN §4.1). Shapes (M,), M ≥ 2,
    or (M, J) for J metrics at once (then SE has shape (J,)).
    """
    d = np.asarray(x, float) - np.asarray(y, float)
    se = d.std(axis=0, ddof=1) / np.sqrt(d.shape[0])
    return (float(se) if d.ndim == 1 else se), float(d.shape[0] - 1)


def split_counts(pos: np.ndarray, n: int, M: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Split n rows (positives per group ``pos``) at random into M near-equal folds.

    Returns (fold positives (M, K), fold sizes (M,)), exactly the counts of a
    random partition of the rows (sequential multivariate hypergeometric draws).
    """
    cells = np.append(np.asarray(pos, np.int64), n - int(np.sum(pos)))
    folds = np.zeros((M, cells.size), np.int64)
    left = cells.copy()
    for m in range(M - 1):
        size = int(left.sum()) // (M - m)
        folds[m] = rng.multivariate_hypergeometric(left, size)
        left -= folds[m]
    folds[M - 1] = left
    return folds[:, :-1], folds.sum(axis=1)
