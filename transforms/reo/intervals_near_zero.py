"""REO near parity: the parity Wald test, the interval for REO that stays
valid at and near REO = 0, and the bias-corrected REO (DESIGN §4.1).

Why a module of its own: the delta interval REO ± z·SE is invalid at REO = 0
and the plug-in REO is biased upwards with many groups (it is a norm), so
every method of :func:`fairmon.transforms.reo.estimate.estimate_reo` reports
these alongside its own interval. Source: seed 001 eq. 19 and Algorithm 1;
Liu, Tang & Zhang (2009) for the quadratic-form distribution.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np


def parity_test(U: np.ndarray, v: np.ndarray, denom_df: float = float("inf")) -> tuple[float, int, float]:
    """Wald test of parity (all U_k equal, i.e. ΔU = 0, REO = 0) on K − 1 df.

    Inputs: U (K,) positive utilities, v (K,) finite variances of log Û_j,
    or V (K, K) a full covariance of log Û (cluster-robust): then the Wald
    statistic of the contrasts log U_k − log U_K with covariance C V Cᵀ.
    The statistic is ΔÛᵀ Σ⁺ ΔÛ (DESIGN §4.1) evaluated on the log scale,
    where the delta method is most accurate: with x = log Û and w = 1/v,
    W = Σ_j w_j (x_j − x̄_w)², x̄_w the w-weighted mean — the Wald statistic of
    the K − 1 contrasts of log U (a contrast-invariant form, so Σ⁺ needs no
    numerical pseudo-inverse). Returns (W, K − 1, p = P(χ²_{K−1} ≥ W)); with
    a finite ``denom_df`` (a cluster-robust V over denom_df + 1 units) p =
    P(F_{K−1, denom_df} ≥ W/(K − 1)), the few-cluster Wald reference
    (Cameron & Miller 2015 §VI.C; Stata's test after vce(cluster)). NaNs
    and df 0 when K < 2 or a U_k or v_j is not positive and finite.
    Source: seed 001 eq. 19 (REO = 0 ⇔ parity) and Algorithm 1's covariance.
    """
    from fairmon.transforms.distributions import chi2_sf, f_sf

    def p_value(W: float, q: int) -> float:
        return chi2_sf(W, q) if not np.isfinite(denom_df) else f_sf(W / q, q, denom_df)

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
        return W, K - 1, p_value(W, K - 1)
    if K < 2 or not (np.isfinite(U).all() and (U > 0).all() and np.isfinite(v).all() and (v > 0).all()):
        return float("nan"), 0, float("nan")
    x, w = np.log(U), 1.0 / v
    W = float(np.sum(w * (x - np.sum(w * x) / w.sum()) ** 2))
    return W, K - 1, p_value(W, K - 1)


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
    from fairmon.transforms.distributions import chi2_cdf, ncx2_cdf

    lam = np.asarray(cov_eig, dtype=float)
    proj = np.asarray(proj, dtype=float)
    pos = lam > 0
    if np.count_nonzero(pos) == 1:  # rank one: T = (s√p₁ + √λ Z)² + s²p₀ exactly, a folded normal (fast, exact)
        from scipy.special import ndtr

        lam1, p1 = float(lam[pos][0]), float(proj[pos][0])
        rest = t - s * s * float(np.sum(proj[~pos]))
        if rest < 0:
            return 0.0
        m, r, sd = s * np.sqrt(p1), np.sqrt(rest), np.sqrt(lam1)
        return float(ndtr((r - m) / sd) - ndtr((-r - m) / sd))
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
        return chi2_cdf(x, df)
    return ncx2_cdf(x, df, delta)


#: Draws of the fixed-seed Monte Carlo used for lower-tail probabilities of ‖ΔÛ‖².
LOWER_TAIL_DRAWS = 20_000
#: Columns up to which the draws are kept between calls (20,000 × 400 doubles = 64 MB).
_NORMALS_CACHED_UP_TO = 400


@functools.lru_cache(maxsize=4)
def _normals(m: int) -> np.ndarray:
    """The fixed-seed draws of shape (LOWER_TAIL_DRAWS, m), kept for the four
    widths used last (a day's arms and attributes share a few ranks; a
    backfill with many would otherwise keep up to 64 MB for each)."""
    return np.random.default_rng(20240101 + m).standard_normal((LOWER_TAIL_DRAWS, m))


def _lower_tail_sums(a: np.ndarray, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Z @ a, (Z∘Z) @ lam), shapes (LOWER_TAIL_DRAWS,), for the fixed-seed
    standard normals Z of shape (LOWER_TAIL_DRAWS, m), m = a.size: the same
    draws on every call (intervals are deterministic functions of the
    counts). Few columns are kept between calls; many (a spectrum of
    thousands of groups) are drawn again in row blocks of the same stream,
    so memory stays at one block."""
    m = a.size
    if m <= _NORMALS_CACHED_UP_TO:
        Z = _normals(m)
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
    A ΔÛ whose REO is rounding (≤ REO_ROUNDING, :mod:`fairmon.transforms.reo.reo_math`)
    is taken as exactly 0: its direction is noise of the last ulp, not data.
    Returns (low, high) in REO units; NaNs when the inputs are not finite.
    Raises ValueError for level outside (0, 1).
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be in (0, 1), got {level}")
    shape = near_zero_shape(dU, cov, factor=factor)
    return (float("nan"), float("nan")) if shape is None else shape.interval(level)


@dataclass(frozen=True)
class NearZeroShape:
    """What :func:`reo_interval_near_zero` needs of one ΔÛ and Σ at any level,
    formed once by :func:`near_zero_shape`: K, ‖ΔÛ‖, Σ's eigenvalues λ with a
    zero one for its null space (shape (m + 1,)) and u's squared coordinates
    on them, the search scale √max λ, the threshold t_up of the upper bound
    (T_obs, or parity's median when T_obs is below it) and, for rank > 1,
    the fixed draws' roots r_j (20,000,). An A/B projection's p-value asks
    for ~30 levels of the same arm (:mod:`fairmon.transforms.reo.ab_reo`)."""

    K: int
    norm: float
    lam: np.ndarray
    proj: np.ndarray
    scale: float
    t_up: float
    roots: np.ndarray | None

    def interval(self, level: float) -> tuple[float, float]:
        """(low, high) in REO units at ``level`` (:func:`reo_interval_near_zero`).
        Raises ValueError for level outside (0, 1)."""
        if not 0.0 < level < 1.0:
            raise ValueError(f"confidence level must be in (0, 1), got {level}")
        from scipy.optimize import brentq

        lam, proj, norm, scale = self.lam, self.proj, self.norm, self.scale
        alpha, T = 1.0 - level, norm * norm

        def upper_tail(s: float) -> float:  # P_s(T >= T_obs)
            return 1.0 - quadratic_form_cdf(T, lam, proj, s)

        def solve(f, target: float) -> float:
            # f decreases from f(0) > target as s grows: find f(s) = target
            hi = norm + scale
            while f(hi) > target:
                hi = 2 * hi + scale
            return float(brentq(lambda s: f(s) - target, 0.0, hi, xtol=1e-10 * (hi + 1), rtol=1e-10))

        lo = 0.0 if upper_tail(0.0) >= alpha / 2 else solve(lambda s: -upper_tail(s), -alpha / 2)
        if self.roots is None:  # rank one: the folded normal is exact
            hi = solve(lambda s: quadratic_form_cdf(self.t_up, lam, proj, s), alpha / 2)
        else:  # P_s(T <= t_up) = α/2 at the upper bound: the (1 − α/2) quantile of the roots
            hi = max(float(np.quantile(self.roots, 1.0 - alpha / 2)), 0.0)
        return lo / np.sqrt(self.K), hi / np.sqrt(self.K)


#: The last few shapes formed, as [(ΔÛ, Σ or B, which, shape)]: the ``reo`` table and the
#: A/B projection rows of ``reo_ab`` ask for the same arms' shapes (~10 ms each at K = 4,096).
_SHAPES: list[tuple[np.ndarray, np.ndarray, bool, NearZeroShape | None]] = []
NEAR_ZERO_SHAPES_KEPT, _SHAPES_MAX_BYTES = 4, 8 * 2**20


def near_zero_shape(
    dU: np.ndarray, cov: np.ndarray | None, *, factor: np.ndarray | None = None
) -> NearZeroShape | None:
    """The level-free part of :func:`reo_interval_near_zero` for ΔÛ (K,) and
    Σ (K, K) or its factor B (r, K); None (the interval is NaN) for K < 2 or
    inputs that are not finite. A call with the same values as one of the
    last four (arrays up to 8 MB, compared bit for bit, copies kept)
    returns that call's shape (read-only arrays) instead of forming it again:
    a deterministic function of its inputs, so the same bits."""
    dU = np.asarray(dU, dtype=float)
    given = np.asarray(factor if factor is not None else cov, dtype=float)
    is_factor = factor is not None
    for old_dU, old_given, old_is_factor, shape in _SHAPES:
        if (
            old_is_factor == is_factor
            and old_dU.shape == dU.shape
            and old_given.shape == given.shape
            and old_dU.tobytes() == dU.tobytes()  # bit for bit: -0.0 and 0.0 may give other bits
            and old_given.tobytes() == given.tobytes()
        ):
            return shape
    shape = _near_zero_shape(dU, given, is_factor)
    if given.nbytes <= _SHAPES_MAX_BYTES:
        if shape is not None:
            for arr in (shape.lam, shape.proj, shape.roots):
                if arr is not None:
                    arr.flags.writeable = False
        _SHAPES.insert(0, (dU.copy(), given.copy(), is_factor, shape))
        del _SHAPES[NEAR_ZERO_SHAPES_KEPT:]
    return shape


def _near_zero_shape(dU: np.ndarray, given: np.ndarray, is_factor: bool) -> NearZeroShape | None:
    """:func:`near_zero_shape` formed anew (``given``: B when ``is_factor``, else Σ)."""
    from fairmon.transforms.reo.reo_math import REO_ROUNDING

    factor = given if is_factor else None
    K = dU.size
    if K < 2 or not (np.isfinite(dU).all() and np.isfinite(given).all()):
        return None
    if np.linalg.norm(dU) <= REO_ROUNDING * np.sqrt(K):  # REO = 0 up to rounding: exactly parity
        dU = np.zeros(K)
    lam_nz, w = _spectrum(dU, None if factor is not None else given, given if factor is not None else None)
    norm = float(np.linalg.norm(dU))
    # Σ's null space enters the cumulants only through its share of u (λ⁰ in c_1): one zero eigenvalue carries it
    lam = np.append(lam_nz, 0.0)
    proj = np.append(w**2, max(0.0, 1.0 - float(np.sum(w**2))))
    T = norm * norm
    scale = float(np.sqrt(lam.max())) if lam.max() > 0 else 1.0
    t_up = T
    if quadratic_form_cdf(T, lam, proj, 0.0) < 0.5:  # T_obs below parity's median: use the median
        t_up = _median_at_zero(lam, proj)
    roots = None
    if lam_nz.size > 1:
        # Draw j has T_s <= t_up exactly for s in [l_j, r_j], the roots of s² + 2sA_j + B_j = t_up
        # (a draw with l_j > s_hi is counted as covering: conservative, and rare there).
        A, B = _lower_tail_sums(w * np.sqrt(lam_nz), lam_nz)
        disc = A * A - B + t_up
        roots = np.where(disc >= 0, -A + np.sqrt(np.clip(disc, 0.0, None)), -np.inf)
    return NearZeroShape(K, norm, lam, proj, scale, t_up, roots)


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
    return reo_bc_from_trace(reo, float(np.trace(cov)), cov.shape[0])


def reo_bc_from_trace(reo: float, trace: float, K: int) -> float:
    """:func:`reo_bias_corrected` from tr Σ."""
    if not (np.isfinite(reo) and np.isfinite(trace)):
        return float("nan")
    return float(np.sqrt(max(0.0, reo * reo - trace / K)))
