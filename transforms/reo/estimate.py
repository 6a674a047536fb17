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

from fairmon.transforms.reo.cluster import BucketSums

CIMethod = Literal["delta", "delta_paper", "bootstrap_percentile", "bootstrap_normal", "bootstrap_bca"]
CI_METHODS: tuple[str, ...] = ("delta", "delta_paper", "bootstrap_percentile", "bootstrap_normal", "bootstrap_bca")

#: REO of U = (0.8, 1): the 80 % rule expressed as an REO threshold (seed 001 §4.3).
EIGHTY_PERCENT_RULE_REO = 1.0 / 9.0

#: Default ``min_expected_positives``: a group with fewer positives than this in
#: default or random traffic is a small group (DESIGN §4.1).
MIN_EXPECTED_POSITIVES = 30

Verdict = Literal["exceeds", "within", "inconclusive", "undefined"]


@dataclass(frozen=True)
class REOEstimate:
    """Result of :func:`estimate_reo` for one (day, arm, attribute).

    Arrays have shape (K,), ordered like the input groups. Undefined values are
    NaN and ``reason`` says why (``None`` when everything is defined).
    ``reo_bc``, ``parity_*``, ``verdict`` (against ``threshold``) and the
    per-group ``small_group`` flags and reasons are those of DESIGN §4.1.
    ``design_effect``: robust ÷ multinomial variance of REO (of tr Σ_ΔU when
    REO's SE is undefined) when rows are clustered; 1 without clustering.
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
    reo_bc: float = float("nan")
    parity_stat: float = float("nan")
    parity_df: int = 0
    parity_p_value: float = float("nan")
    verdict: str = "undefined"
    threshold: float = EIGHTY_PERCENT_RULE_REO
    small_group: tuple[bool, ...] = field(default_factory=tuple)
    small_group_reasons: tuple[str | None, ...] = field(default_factory=tuple)
    design_effect: float = float("nan")

    @property
    def K(self) -> int:
        """Number of groups."""
        return len(self.groups)


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
    from scipy import stats  # imported here, not at the top (fairmon.transforms)

    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be in (0, 1), got {level}")
    return float(stats.norm.ppf(0.5 + level / 2.0))


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


def parity_test(U: np.ndarray, v: np.ndarray) -> tuple[float, int, float]:
    """Wald test of parity (all U_k equal, i.e. ΔU = 0, REO = 0) on K − 1 df.

    Inputs: U (K,) positive utilities, v (K,) finite variances of log Û_j,
    or V (K, K) a full covariance of log Û (cluster-robust): then the Wald
    statistic of the contrasts log U_k − log U_K with covariance C V Cᵀ.
    The statistic is ΔÛᵀ Σ⁺ ΔÛ (DESIGN §4.1) evaluated on the log scale,
    where the delta method is most accurate: with x = log Û and w = 1/v,
    W = Σ_j w_j (x_j − x̄_w)², x̄_w the w-weighted mean — the Wald statistic of
    the K − 1 contrasts of log U (a contrast-invariant form, so Σ⁺ needs no
    numerical pseudo-inverse). Returns (W, K − 1, p = P(χ²_{K−1} ≥ W)); NaNs
    and df 0 when K < 2 or a U_k or v_j is not positive and finite.
    Source: seed 001 eq. 19 (REO = 0 ⇔ parity) and Algorithm 1's covariance.
    """
    from scipy import stats  # imported here, not at the top (fairmon.transforms)

    U = np.asarray(U, dtype=float)
    v = np.asarray(v, dtype=float)
    K = U.size
    if v.ndim == 2:  # full covariance of log Û: W = (Cx)ᵀ (C V Cᵀ)⁻¹ (Cx), C the K − 1 contrasts with the last group
        if K < 2 or not (np.isfinite(U).all() and (U > 0).all() and np.isfinite(v).all()):
            return float("nan"), 0, float("nan")
        C = np.hstack([np.eye(K - 1), -np.ones((K - 1, 1))])
        d = C @ np.log(U)
        try:
            W = float(d @ np.linalg.solve(C @ v @ C.T, d))
        except np.linalg.LinAlgError:
            return float("nan"), 0, float("nan")
        if not np.isfinite(W) or W < 0:
            return float("nan"), 0, float("nan")
        return W, K - 1, float(stats.chi2.sf(W, K - 1))
    if K < 2 or not (np.isfinite(U).all() and (U > 0).all() and np.isfinite(v).all() and (v > 0).all()):
        return float("nan"), 0, float("nan")
    x, w = np.log(U), 1.0 / v
    W = float(np.sum(w * (x - np.sum(w * x) / w.sum()) ** 2))
    return W, K - 1, float(stats.chi2.sf(W, K - 1))


def quadratic_form_cdf(t: float, cov_eig: np.ndarray, proj: np.ndarray, s: float) -> float:
    """P(‖X‖² ≤ t) for X ~ N(s·u, Σ), by Liu, Tang & Zhang (2009)'s noncentral χ² approximation.

    Inputs: ``cov_eig`` (K,) eigenvalues λ_i of Σ (≥ 0), ``proj`` (K,) the
    squared coordinates (e_iᵀu)² of the unit mean direction u in Σ's
    eigenbasis, the mean's length ``s`` ≥ 0 and the threshold t. Uses the
    cumulants c_k = Σλ_i^k + k s² Σλ_i^(k−1)(e_iᵀu)² (k = 1..4) matched to a
    noncentral χ²_l(δ) by skewness (and kurtosis when possible); exact when
    Σ has one non-zero eigenvalue. Source: Liu, Tang, Zhang, Comput. Stat.
    Data Anal. 53 (2009) 853–856, eqs. for the LTZ approximation.
    """
    from scipy import stats  # imported here, not at the top (fairmon.transforms)

    lam = np.asarray(cov_eig, dtype=float)
    c = [float(np.sum(lam**k) + k * s * s * np.sum(lam ** (k - 1) * proj)) for k in (1, 2, 3, 4)]
    if c[1] <= 0:
        return float(t >= c[0])
    s1, s2 = c[2] / c[1] ** 1.5, c[3] / c[1] ** 2
    if s1 * s1 > s2:
        a = 1.0 / (s1 - np.sqrt(s1 * s1 - s2))
        delta = s1 * a**3 - a * a
        df = a * a - 2 * delta
    else:
        a = 1.0 / s1
        delta = 0.0
        df = 1.0 / (s1 * s1)
    mu_chi, sd_chi = df + delta, np.sqrt(2.0) * a
    x = (t - c[0]) / np.sqrt(2.0 * c[1]) * sd_chi + mu_chi
    if delta <= 1e-12:
        return float(stats.chi2.cdf(x, df))
    return float(stats.ncx2.cdf(x, df, delta))


#: Draws of the fixed-seed Monte Carlo used for lower-tail probabilities of ‖ΔÛ‖².
LOWER_TAIL_DRAWS = 20_000
_NORMALS: dict[int, np.ndarray] = {}
#: Columns up to which the draws are kept between calls (20,000 × 400 doubles = 64 MB).
_NORMALS_CACHED_UP_TO = 400


def _lower_tail_sums(a: np.ndarray, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Z @ a, (Z∘Z) @ lam), shapes (LOWER_TAIL_DRAWS,), for the fixed-seed
    standard normals Z of shape (LOWER_TAIL_DRAWS, m), m = a.size: the same
    draws on every call (intervals are deterministic functions of the
    counts). Few columns are kept between calls; many (a spectrum of
    thousands of groups) are drawn again in row blocks of the same stream,
    so memory stays at one block."""
    m = a.size
    if m <= _NORMALS_CACHED_UP_TO:
        if m not in _NORMALS:
            _NORMALS[m] = np.random.default_rng(20240101 + m).standard_normal((LOWER_TAIL_DRAWS, m))
        Z = _NORMALS[m]
        return Z @ a, (Z * Z) @ lam
    rng, block = np.random.default_rng(20240101 + m), 1000
    A, B = np.empty(LOWER_TAIL_DRAWS), np.empty(LOWER_TAIL_DRAWS)
    for i in range(0, LOWER_TAIL_DRAWS, block):
        Z = rng.standard_normal((min(block, LOWER_TAIL_DRAWS - i), m))
        A[i : i + len(Z)], B[i : i + len(Z)] = Z @ a, (Z * Z) @ lam
    return A, B


def _spectrum(dU: np.ndarray, cov: np.ndarray | None, factor: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Σ's non-zero eigenvalues λ (m,) and the coordinates w (m,) of the unit
    direction u = ΔÛ/‖ΔÛ‖ on their eigenvectors (each oriented so that w ≥ 0), from Σ (K, K) or from a
    factor B (r, K) with Σ = BᵀB (then, when r < K, from the r × r matrix
    BBᵀ: O(r²K), not O(K³)). Eigenvalues below 1e-12 of the largest count as zero."""
    if factor is not None and factor.shape[0] >= factor.shape[1]:  # more factor rows than groups: Σ is smaller
        factor, cov = None, factor.T @ factor
    lam, vec = np.linalg.eigh(factor @ factor.T if factor is not None else (cov + cov.T) / 2)
    lam = np.clip(lam, 0.0, None)
    keep = lam > 1e-12 * lam.max() if lam.max() > 0 else np.zeros(lam.size, bool)
    lam, vec = lam[keep], vec[:, keep]
    if factor is not None:
        vec = factor.T @ vec / np.sqrt(lam)  # Σ's eigenvectors from BBᵀ's: Bᵀ w_i / √λ_i
    norm = float(np.linalg.norm(dU))
    if norm > 0:  # |w|: an eigenvector's sign is arbitrary, and Z ~ N(0, I) is symmetric: same draws either way
        return lam, np.abs(vec.T @ (dU / norm))
    w = np.zeros(lam.size)  # ΔÛ = 0: u along the top eigenvector
    if w.size:
        w[-1] = 1.0
    return lam, w


def reo_interval_near_zero(
    dU: np.ndarray, cov: np.ndarray | None, level: float, *, factor: np.ndarray | None = None
) -> tuple[float, float]:
    """CI for REO = ‖ΔU‖/√K that stays valid at and near parity (DESIGN §4.1).

    Inputs: ΔÛ (K,) and its delta covariance Σ (K, K) (:func:`delta_u_covariance`),
    or ``cov`` None and ``factor`` B (r, K) with Σ = BᵀB (:func:`delta_u_factor`,
    cluster-robust: r ≪ K with many groups, and only Σ's r non-zero
    eigenvalues are computed).
    Model ΔÛ ~ N(μ, Σ) with μ = s·u along the observed direction u = ΔÛ/‖ΔÛ‖;
    the interval inverts the distribution of T = ‖ΔÛ‖² (a quadratic form whose
    mean ‖μ‖² + tr Σ carries the norm's upward bias): the lower bound is the
    s with P_s(T ≥ T_obs) = α/2 (0 when parity is not rejected by T), the
    upper bound the s with P_s(T ≤ T_obs) = α/2. When T_obs is below the
    median of T under parity the upper bound uses that median (conservative:
    a too-good fit never yields a zero-width interval). Far from 0 it reduces
    to the delta interval REO ± z·SE; for K = 2 it is the exact folded-normal
    interval.

    Upper-tail probabilities use :func:`quadratic_form_cdf` (accurate there);
    lower-tail ones, where that approximation fails when one eigenvalue of Σ
    dominates, use T_s = s² + 2s·A + B over a fixed set of 20,000 normal draws
    (A = Σ_i w_i √λ_i Z_i, B = Σ_i λ_i Z_i², w = Σ's eigenbasis coordinates of
    u; the upper bound is then a quantile of the draws' roots), except when Σ
    has rank 1 (K = 2), where the approximation is exact.
    Returns (low, high) in REO units; NaNs when the inputs are not finite.
    Raises ValueError for level outside (0, 1).
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be in (0, 1), got {level}")
    dU = np.asarray(dU, dtype=float)
    given = np.asarray(factor if factor is not None else cov, dtype=float)
    K = dU.size
    if K < 2 or not (np.isfinite(dU).all() and np.isfinite(given).all()):
        return float("nan"), float("nan")
    from scipy.optimize import brentq

    lam_nz, w = _spectrum(dU, None if factor is not None else given, given if factor is not None else None)
    norm = float(np.linalg.norm(dU))
    # Σ's null space enters the cumulants only through its share of u (λ⁰ in c_1): one zero eigenvalue carries it
    lam = np.append(lam_nz, 0.0)
    proj = np.append(w**2, max(0.0, 1.0 - float(np.sum(w**2))))
    alpha = 1.0 - level
    T = norm * norm
    scale = float(np.sqrt(lam.max())) if lam.max() > 0 else 1.0
    rank_one = lam_nz.size <= 1

    def upper_tail(s: float) -> float:  # P_s(T >= T_obs)
        return 1.0 - quadratic_form_cdf(T, lam, proj, s)

    def solve(f, target: float) -> float:
        # f decreases from f(0) > target as s grows: find f(s) = target
        hi = norm + scale
        while f(hi) > target:
            hi = 2 * hi + scale
        return float(brentq(lambda s: f(s) - target, 0.0, hi, xtol=1e-10 * (hi + 1), rtol=1e-10))

    lo = 0.0 if upper_tail(0.0) >= alpha / 2 else solve(lambda s: -upper_tail(s), -alpha / 2)
    t_up = T
    if quadratic_form_cdf(T, lam, proj, 0.0) < 0.5:  # T_obs below parity's median: use the median
        t_up = _median_at_zero(lam, proj)
    if rank_one:
        hi = solve(lambda s: quadratic_form_cdf(t_up, lam, proj, s), alpha / 2)
    else:
        # Draw j has T_s <= t_up exactly for s in [l_j, r_j], the roots of s² + 2sA_j + B_j = t_up;
        # P_s(T <= t_up) = α/2 at the upper bound, i.e. s_hi = the (1 − α/2) quantile of r_j
        # (a draw with l_j > s_hi is counted as covering: conservative, and rare there).
        A, B = _lower_tail_sums(w * np.sqrt(lam_nz), lam_nz)
        disc = A * A - B + t_up
        r = np.where(disc >= 0, -A + np.sqrt(np.clip(disc, 0.0, None)), -np.inf)
        hi = max(float(np.quantile(r, 1.0 - alpha / 2)), 0.0)
    return lo / np.sqrt(K), hi / np.sqrt(K)


def _median_at_zero(lam: np.ndarray, proj: np.ndarray) -> float:
    from scipy.optimize import brentq

    top = float(np.sum(lam)) * 10 + 1e-300
    while quadratic_form_cdf(top, lam, proj, 0.0) < 0.5:
        top *= 2
    return float(brentq(lambda t: quadratic_form_cdf(t, lam, proj, 0.0) - 0.5, 0.0, top))


def reo_bias_corrected(reo: float, cov: np.ndarray) -> float:
    """reo_bc = sqrt(max(0, REO² − (1/K) Σ_k Var̂(ΔÛ_k))) (DESIGN §4.1).

    E‖ΔÛ‖² = ‖ΔU‖² + tr Σ, and REO² = ‖ΔU‖²/K, so subtracting tr Σ / K removes
    the plug-in's upward bias to first order. Inputs: REO (ratio), Σ (K, K).
    NaN when either is not finite.
    """
    cov = np.asarray(cov, dtype=float)
    if not np.isfinite(cov).all():
        return float("nan")
    return _reo_bc(reo, float(np.trace(cov)), cov.shape[0])


def _reo_bc(reo: float, trace: float, K: int) -> float:
    """:func:`reo_bias_corrected` from tr Σ."""
    if not (np.isfinite(reo) and np.isfinite(trace)):
        return float("nan")
    return float(np.sqrt(max(0.0, reo * reo - trace / K)))


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
    (flags, reasons) per group; at ~10 expected positives per group the
    delta intervals cover only 0.89–0.92 and REO is biased up."""
    flags, reasons = [], []
    for g, a, b in zip(groups, np.asarray(n_pos_rec), np.asarray(n_pos_rand)):
        small = bool(a < minimum or b < minimum)
        flags.append(small)
        reasons.append(
            f"small group {g!r}: {int(a)} positives in default, {int(b)} in random traffic "
            f"(min_expected_positives = {minimum:g})"
            if small
            else None
        )
    return tuple(flags), tuple(reasons)


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
    threshold: float = EIGHTY_PERCENT_RULE_REO,
    min_expected_positives: float = MIN_EXPECTED_POSITIVES,
    clusters_rec: BucketSums | None = None,
    clusters_rand: BucketSums | None = None,
    cluster_note: str | None = None,
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

    Near parity (DESIGN §4.1): ``reo_bc`` (bias-corrected REO), the parity
    Wald test (:func:`parity_test`), and for the delta methods a REO interval
    that inverts the distribution of ‖ΔÛ‖² (:func:`reo_interval_near_zero`);
    with every method the lower bound is 0 when parity is not rejected at
    1 − ``level``. ``verdict`` compares the CI with ``threshold`` (1/9, the
    80 % rule, for K = 2; config ``reo_threshold`` for K > 2); groups with
    fewer than ``min_expected_positives`` positives in either traffic are
    ``small_group`` and make the verdict ``inconclusive`` at best.

    Clustered rows (DESIGN §4.1, transforms/reo/cluster.py): ``clusters_rec`` /
    ``clusters_rand`` are the per-bucket sums of the default / random sample
    (their totals must equal the counts). The delta method then uses the
    cluster-robust covariance of log Q̂ and log P̂ in place of the
    multinomial one, the bootstraps resample buckets, and ``delta_paper``
    (independent rows by construction) is NaN with a reason. ``cluster_note``
    (the robust variance cannot be formed, e.g. some rows lack the cluster id)
    makes every interval NaN with that reason rather than fall back to the
    multinomial model.

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
    for name, cl, pos, n in (("clusters_rec", clusters_rec, a, n_rec), ("clusters_rand", clusters_rand, b, n_rand)):
        if cl is not None and (cl.pos.shape[1] != K or not np.allclose(cl.pos.sum(axis=0), pos) or cl.n != n):
            raise ValueError(f"{name}: bucket sums do not add up to the counts")
    z = z_value(level)

    nan_k = np.full(K, np.nan)
    reasons: list[str] = []
    with np.errstate(divide="ignore", invalid="ignore"):
        Q = a / n_rec if n_rec > 0 else nan_k.copy()
        P = b / n_rand if n_rand > 0 else nan_k.copy()
        U = np.where(P > 0, Q / P, np.nan)
    small, small_reasons = small_groups(groups, a, b, min_expected_positives)
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
        overall = "; ".join(reasons) or "undefined"
        group_reasons = [r or overall for r in group_reasons]
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
            overall,
            tuple(group_reasons),
            threshold=threshold,
            small_group=small,
            small_group_reasons=small_reasons,
        )

    dU = relative_utilities(U)
    reo = reo_of_utilities(U)
    v = log_utility_variance(Q, P, n_rec, n_rand, "delta_paper" if ci_method == "delta_paper" else "delta")
    clustered = clusters_rec is not None or clusters_rand is not None
    v_mult = v
    if cluster_note:
        reasons.append(cluster_note)
    elif clustered and ci_method == "delta_paper":
        cluster_note = "delta_paper assumes independent rows: undefined when rows are clustered"
        reasons.append(cluster_note)
    elif clustered:
        if cl_few := [c.G for c in (clusters_rec, clusters_rand) if c is not None and c.G < 2]:
            cluster_note = f"{min(cl_few)} non-empty cluster bucket(s): the cluster-robust variance is undefined"
            reasons.append(cluster_note)
        elif clusters_rec is None or clusters_rand is None:  # one sample bucketed: V = its sandwich + a diagonal
            with np.errstate(divide="ignore", invalid="ignore"):
                V = np.zeros((K, K))
                for cl, share, n in ((clusters_rec, Q, n_rec), (clusters_rand, P, n_rand)):
                    V = V + (cl.log_share_covariance() if cl is not None else np.diag(1.0 / (share * n)))
            v = V

    se_reo = float("nan")
    design_effect = 1.0 if not clustered else float("nan")
    zero_q = [g for g, q in zip(groups, Q) if q == 0]
    se_dU = nan_k.copy()
    reo_bc = ci_low = ci_high = float("nan")
    parity = (float("nan"), 0, float("nan"))
    if zero_q:
        reasons.append(f"Q_k = 0 for group(s) {', '.join(zero_q)}: delta-method SE undefined")
        for i, q in enumerate(Q):
            if q == 0:
                group_reasons[i] = "Q_k = 0"
    elif not cluster_note:
        # Both samples bucketed: V = FᵀF of rank ≤ 2(G − 1), and Σ = BᵀB is never formed (many groups: O(GK), not O(K³))
        F = None
        if clusters_rec is not None and clusters_rand is not None:
            F = np.vstack([clusters_rec.log_share_factor(), clusters_rand.log_share_factor()])
        if F is not None:
            B = delta_u_factor(U, F)
            var_dU = (B * B).sum(axis=0)
            ci_low, ci_high = reo_interval_near_zero(dU, None, level, factor=B)
        else:
            cov = delta_u_covariance(U, v)
            var_dU = np.diag(cov)
            ci_low, ci_high = reo_interval_near_zero(dU, cov, level)
        se_dU = np.sqrt(var_dU)
        reo_bc = _reo_bc(reo, float(var_dU.sum()), K)
        rank = sum(c.G - 1 if c is not None else K for c in (clusters_rec, clusters_rand))
        if clustered and rank < K - 1:  # Σ of G − 1 df per bucketed sample cannot span K − 1 contrasts
            reasons.append(
                f"parity test undefined: the cluster-robust covariance has rank at most {rank} (non-empty "
                f"buckets − 1, per sample), fewer than the K − 1 = {K - 1} contrasts; raise cluster_buckets"
            )
        else:
            parity = parity_test(U, F.T @ F if F is not None else v)
        g = reo_log_gradient(U)
        if reo == 0:
            reasons.append("REO = 0: std/mean is not differentiable there, SE undefined")
        elif F is not None:
            se_reo = float(np.linalg.norm(F @ g))
        else:
            se_reo = float(np.sqrt(g @ v @ g if v.ndim == 2 else np.sum(g**2 * v)))
        if clustered:
            design_effect = (
                float(se_reo**2 / np.sum(g**2 * v_mult))
                if reo > 0
                else float(var_dU.sum() / np.trace(delta_u_covariance(U, v_mult)))
            )
    lo_dU, hi_dU = dU - z * se_dU, dU + z * se_dU
    if ci_method.startswith("bootstrap") and not zero_q and not cluster_note:
        from fairmon.transforms.reo.bootstrap import single_arm_bootstrap

        boot = single_arm_bootstrap(
            a,
            int(n_rec),
            b,
            int(n_rand),
            method=ci_method,
            level=level,
            B=n_boot,
            rng=rng if rng is not None else np.random.default_rng(0),
            clusters=(clusters_rec, clusters_rand),
        )
        ci_low, ci_high, se_reo = boot["reo"]
        lo_dU, hi_dU, se_dU = (np.array(x) for x in zip(*boot["delta_U"]))
        if boot["undefined"]:
            reasons.append(boot["undefined"])
            for i in range(K):
                if not np.isfinite(lo_dU[i]):
                    group_reasons[i] = "; ".join(r for r in (group_reasons[i], "bootstrap undefined") if r)
    if np.isfinite(ci_low) and np.isfinite(parity[2]) and parity[2] >= 1.0 - level:
        ci_low = 0.0  # parity not rejected: the interval reaches REO = 0
    if reo > ci_high:  # many groups: tr Σ / K, the plug-in's bias, exceeds the interval's reach (DESIGN §4.1)
        reasons.append(
            f"the plug-in REO {reo:.4g} lies above its interval: its upward bias (tr Var(ΔÛ)/K in REO²) "
            f"is larger than the interval's width; reo_bc {reo_bc:.4g} is the bias-corrected estimate"
        )
    if any(small):
        names = [gr for gr, f in zip(groups, small) if f]
        reasons.append(
            f"small group(s) {', '.join(names)} (< {min_expected_positives:g} positives in default or random "
            "traffic): intervals may under-cover, verdict inconclusive at best"
        )
    verdict = verdict_80pct(ci_low, ci_high, threshold, small=any(small))
    for i in range(K):  # a group's NaN always carries a reason: its own, else the REO's
        if group_reasons[i] is None and not (np.isfinite(se_dU[i]) and np.isfinite(lo_dU[i])):
            group_reasons[i] = "; ".join(reasons) or "undefined"
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
        reo_bc=reo_bc,
        parity_stat=parity[0],
        parity_df=parity[1],
        parity_p_value=parity[2],
        verdict=verdict,
        threshold=threshold,
        small_group=small,
        small_group_reasons=small_reasons,
        design_effect=design_effect,
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
