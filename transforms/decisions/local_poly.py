"""Tricube-weighted local polynomial fits with heteroskedasticity-robust
covariances, and the interval parts built on them (seed 002 eqs. 10-11;
DESIGN §4.2).

Why apart from :mod:`fairmon.transforms.decisions.threshold`: these are the
numerical building blocks (a WLS fit, its HC covariance, the Wilson score
interval on an effective n), checked against statsmodels on their own;
the threshold module decides which of them an estimate uses and why.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

HC_TYPES = ("HC0", "HC1", "HC3")


@dataclass(frozen=True)
class LocalFit:
    """A tricube-weighted local polynomial fit at t (seed 002 eq. 10 for degree 1).

    ``beta`` (degree + 1,): intercept β0, slope β1, …; ``cov`` (degree + 1,
    degree + 1): the HC covariance; ``weights0`` (n,): the intercept's
    equivalent-kernel weights l (β0 = l·y, Σ l = 1); ``n``: rows with w > 0.
    """

    beta: np.ndarray
    cov: np.ndarray
    weights0: np.ndarray
    n: int

    @property
    def n_eff(self) -> float:
        """Kish effective sample size of the intercept, 1/Σ lᵢ² (rows)."""
        return float(1.0 / np.sum(self.weights0**2))


@dataclass(frozen=True)
class IntervalPart:
    """One estimate behind an interval: ``method`` (``hc_normal`` or
    ``wilson_neff``), the ``estimate`` clipped to [0, 1] (probability), its HC
    ``se`` and effective rows ``n_eff``."""

    method: str
    estimate: float
    se: float
    n_eff: float

    def at(self, level: float) -> tuple[float, float]:
        """(low, high) at confidence ``level``, inside [0, 1]."""
        from scipy import stats  # imported here, not at the top (fairmon.transforms)

        if self.method == "hc_normal":
            z = float(stats.norm.ppf(0.5 + level / 2))
            return float(max(0.0, self.estimate - z * self.se)), float(min(1.0, self.estimate + z * self.se))
        return wilson_interval(self.estimate, self.n_eff, level)

    @property
    def interval_se(self) -> float:
        """The SE behind the interval: the HC SE, or the 95 % Wilson half-width / z."""
        from scipy import stats  # imported here, not at the top (fairmon.transforms)

        if self.method == "hc_normal":
            return self.se
        lo, hi = wilson_interval(self.estimate, self.n_eff, 0.95)
        return float((hi - lo) / (2 * stats.norm.ppf(0.975)))


def tricube(u: np.ndarray) -> np.ndarray:
    """w = (1 − |u|³)³ for |u| < 1, else 0 (seed 002 eq. 11). u = (s − t)/d, any shape."""
    u = np.abs(np.asarray(u, dtype=float))
    return np.where(u < 1, (1 - u**3) ** 3, 0.0)


def local_linear_fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, hc: str = "HC1", degree: int = 1) -> LocalFit:
    """WLS of y on [1, x, …, x^degree] with weights w (seed 002 eq. 10 for
    degree 1) and its heteroskedasticity-robust covariance.

    x = s − t (score units), y outcomes (0/1 or any real), w ≥ 0 weights, all
    shape (n,); rows with w = 0 are dropped. With the whitened design
    X* = √w X, residuals e* = √w e and k = degree + 1 columns the covariance
    is (X*ᵀX*)⁻¹ X*ᵀ diag(ωᵢ e*ᵢ²) X* (X*ᵀX*)⁻¹ with ωᵢ = 1 (HC0), n/(n − k)
    (HC1) or 1/(1 − hᵢ)² (HC3, hᵢ the leverage of row i in X*), as statsmodels'
    ``WLS(...).fit(cov_type=hc)``. HC3 with a row of leverage 1, or HC1 with
    n = k, gives a NaN covariance. Raises ValueError on an unknown ``hc``,
    degree < 0, or a singular design (fewer than degree + 1 distinct x).
    """
    if hc not in HC_TYPES:
        raise ValueError(f"hc must be one of {HC_TYPES}, got {hc!r}")
    if degree < 0:
        raise ValueError(f"degree must be >= 0, got {degree}")
    x, y, w = (np.asarray(a, dtype=float) for a in (x, y, w))
    keep = w > 0
    x, y, w = x[keep], y[keep], w[keep]
    k = degree + 1
    X = np.vander(x, k, increasing=True)
    sw = np.sqrt(w)
    Xs, ys = X * sw[:, None], y * sw
    XtX = Xs.T @ Xs
    if x.size < k or np.unique(x).size < k or np.linalg.matrix_rank(XtX) < k:
        raise ValueError(f"singular design: the window needs at least {k} distinct scores")
    inv = np.linalg.inv(XtX)
    proj = inv @ Xs.T  # (k, n): β = proj @ y*
    beta = proj @ ys
    e = ys - Xs @ beta
    omega = e**2
    if hc == "HC1":
        omega = omega * x.size / (x.size - k) if x.size > k else np.full_like(omega, np.nan)
    elif hc == "HC3":
        h = np.einsum("ij,ji->i", Xs, proj)
        with np.errstate(divide="ignore", invalid="ignore"):
            omega = np.where(h < 1 - 1e-10, omega / (1 - h) ** 2, np.nan)
    cov = (proj * omega) @ proj.T
    return LocalFit(beta, cov, proj[0] * sw, int(x.size))


def local_linear_at(x: np.ndarray, y: np.ndarray, w: np.ndarray, hc: str = "HC1") -> tuple[np.ndarray, np.ndarray]:
    """(β (2,), robust covariance (2, 2)) of the local linear :func:`local_linear_fit`
    (seed 002 eq. 10). Raises ValueError on an unknown hc or a singular design."""
    fit = local_linear_fit(x, y, w, hc)
    return fit.beta, fit.cov


def wilson_interval(p: float, n: float, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion ``p`` ∈ [0, 1] observed on ``n`` > 0
    (possibly fractional, effective) trials at confidence ``level``: inside
    [0, 1] and of positive width for every p (DESIGN §4.2: small and
    all-equal windows). Raises ValueError when p is outside [0, 1] or n ≤ 0."""
    from scipy import stats  # imported here, not at the top (fairmon.transforms)

    if not (0 <= p <= 1 and n > 0):
        raise ValueError(f"need 0 <= p <= 1 and n > 0, got p={p}, n={n}")
    z = float(stats.norm.ppf(0.5 + level / 2))
    z2n = z * z / n
    centre = (p + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * np.sqrt(p * (1 - p) / n + z2n / (4 * n))
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))
