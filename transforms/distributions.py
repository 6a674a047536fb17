"""Normal and chi-squared tail probabilities and quantiles that a daily REO
run needs, straight from ``scipy.special``, bit for bit what ``scipy.stats``
returns.

Why not ``scipy.stats`` itself: importing it is a sizeable share of a day's
cost (bench/README "startup.py"), and a day at TikTok size uses four of its
functions (REO's z, the parity test's χ² tail, the interval's noncentral χ²
CDF). ``scipy.stats``' distributions compute these exact ``scipy.special``
calls inside the support (``norm.ppf`` = ``ndtri``, ``chi2.sf`` = ``chdtrc``,
``chi2.cdf`` = ``chdtr``, ``ncx2.cdf`` = ``chndtr`` for nc > 0; scipy 1.17
``_continuous_distns``); the wrappers here take that path only for finite
arguments strictly inside the support and hand everything else (edges, NaN,
bad shapes) to ``scipy.stats``, so every value is the one ``scipy.stats`` gives
(``tests/test_distributions.py`` compares them bit for bit).
"""

from __future__ import annotations

import functools
import math

from scipy import special


def _finite(*xs: float) -> bool:
    return all(isinstance(x, (int, float)) and math.isfinite(x) for x in xs)


def _special_or_stats(inside: bool, fast, dist: str, method: str, *args: float) -> float:
    """``fast()`` (the ``scipy.special`` call) for finite arguments strictly
    inside the support (``inside``), else ``scipy.stats.<dist>.<method>(*args)``,
    which handles edges, NaN and bad shapes (module docstring)."""
    if inside:
        return float(fast())
    return float(getattr(getattr(_stats(), dist), method)(*args))


@functools.cache
def _stats():
    """``scipy.stats``, imported on first need; cached because an import
    statement in a hot path still goes through scipy's module ``__getattr__``
    on every call (py-spy showed it in a K = 4,096 day's bisections)."""
    from scipy import stats

    return stats


def norm_ppf(q: float) -> float:
    """Standard normal quantile Φ⁻¹(q) for a scalar q; ``scipy.stats.norm.ppf``."""
    q = float(q)
    return _special_or_stats(_finite(q) and 0.0 < q < 1.0, lambda: special.ndtri(q), "norm", "ppf", q)


def t_ppf(q: float, df: float) -> float:
    """Student t quantile for scalars q and df > 0; ``scipy.stats.t.ppf``
    (``stdtrit`` inside the support)."""
    q, df = float(q), float(df)
    inside = _finite(q, df) and 0.0 < q < 1.0 and df > 0
    return _special_or_stats(inside, lambda: special.stdtrit(df, q), "t", "ppf", q, df)


def f_sf(x: float, dfn: float, dfd: float) -> float:
    """P(F_{dfn, dfd} ≥ x) for scalars; ``scipy.stats.f.sf`` (``fdtrc`` inside the support)."""
    x, dfn, dfd = float(x), float(dfn), float(dfd)
    inside = _finite(x, dfn, dfd) and x > 0 and dfn > 0 and dfd > 0
    return _special_or_stats(inside, lambda: special.fdtrc(dfn, dfd, x), "f", "sf", x, dfn, dfd)


def chi2_sf(x: float, df: float) -> float:
    """P(χ²_df ≥ x) for scalars; ``scipy.stats.chi2.sf``."""
    x, df = float(x), float(df)
    inside = _finite(x, df) and x > 0.0 and df > 0.0
    return _special_or_stats(inside, lambda: special.chdtrc(df, x), "chi2", "sf", x, df)


def chi2_cdf(x: float, df: float) -> float:
    """P(χ²_df ≤ x) for scalars; ``scipy.stats.chi2.cdf``. At or below 0 with
    df > 0 it is 0.0, as scipy.stats gives (a root search of
    :mod:`fairmon.transforms.reo.intervals_near_zero` starts there, and each
    ``scipy.stats`` call costs ~0.1 ms)."""
    x, df = float(x), float(df)
    if _finite(x, df) and x <= 0.0 and df > 0.0:
        return 0.0
    inside = _finite(x, df) and x > 0.0 and df > 0.0
    return _special_or_stats(inside, lambda: special.chdtr(df, x), "chi2", "cdf", x, df)


def ncx2_cdf(x: float, df: float, nc: float) -> float:
    """P(χ²_df(nc) ≤ x), noncentral, for scalars; ``scipy.stats.ncx2.cdf``."""
    x, df, nc = float(x), float(df), float(nc)
    if _finite(x, df, nc) and x <= 0.0 and df > 0.0 and nc >= 0.0:
        return 0.0  # as scipy.stats: nothing below the support (see :func:`chi2_cdf`)
    inside = _finite(x, df, nc) and x > 0.0 and df > 0.0 and nc > 0.0
    return _special_or_stats(inside, lambda: special.chndtr(x, df, nc), "ncx2", "cdf", x, df, nc)
