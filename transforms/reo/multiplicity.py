"""Multiple-comparison control for the families of p-values fairmon writes on a day.

A day's tables hold many tests at once (A/B metrics × attributes × arm pairs,
group pairs, labelers); highlighting every p < 0.05 among dozens of them
would raise false alarms at the rate a fairness monitor must avoid. Every
family therefore also carries Benjamini–Hochberg q-values (DESIGN §4.1).
"""

from __future__ import annotations

import numpy as np


def bh_q_values(p_values) -> np.ndarray:
    """Benjamini–Hochberg q-values of one family, shape (m,) -> (m,).

    NaN p-values (tests that could not be run) are left out of the family and
    get NaN. Uses ``scipy.stats.false_discovery_control(method="bh")``.
    Raises ValueError when a p-value lies outside [0, 1].
    Source: Benjamini & Hochberg (1995), step-up procedure.
    """
    from scipy import stats  # imported here, not at the top (fairmon.transforms)

    p = np.asarray(p_values, dtype=float)
    q = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        if ((p[ok] < 0) | (p[ok] > 1)).any():
            raise ValueError("p-values must lie in [0, 1]")
        # max with p only guards against a rounding ulp: BH q-values are never below their p-values
        q[ok] = np.maximum(stats.false_discovery_control(p[ok], method="bh"), p[ok])
    return q
