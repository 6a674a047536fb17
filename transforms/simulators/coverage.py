"""How often REO's interval covers the truth when every day has a random
pool of its own: the reference the demo prints beside its own days, whose
intervals share one pool and so miss or hit the truth together."""

from __future__ import annotations

import numpy as np

from fairmon.transforms.reo.estimate import estimate_reo
from fairmon.transforms.reo.reo_math import reo_of_utilities
from fairmon.transforms.simulators.impressions import simulate_counts


def independent_pool_coverage(
    Q: np.ndarray,
    P: np.ndarray,
    n_rec: int,
    n_rand: int,
    reps: int,
    rng: np.random.Generator,
    level: float = 0.95,
    ci_method: str = "delta",
) -> tuple[int, int]:
    """(covered, defined): of ``reps`` independent days, each with its own
    default traffic (``n_rec`` rows, positive shares ``Q``, shape (K,)) and
    its own random pool (``n_rand`` rows, shares ``P``), how many REO
    intervals at ``level`` contain the true REO = std(Q/P)/mean(Q/P), and
    how many were defined (finite bounds). Counts are multinomial draws
    (:func:`simulate_counts`); the interval is :func:`estimate_reo`'s.

    Raises ValueError for shares outside [0, 1] or summing above 1, or
    ``reps`` < 1. Source: seed 001 eqs. 4, 19 and Algorithm 1 (the
    estimator), DESIGN §4.1 (the interval)."""
    Q, P = np.asarray(Q, float), np.asarray(P, float)
    if reps < 1:
        raise ValueError("reps must be >= 1")
    if np.any(Q < 0) or np.any(P < 0) or Q.sum() > 1 or P.sum() > 1:
        raise ValueError("Q and P are shares of all rows: each >= 0, summing to at most 1")
    truth = reo_of_utilities(Q / P)
    a, b = simulate_counts(Q, P, n_rec, n_rand, reps, rng)
    groups = [str(k) for k in range(Q.size)]
    covered = defined = 0
    for i in range(reps):
        e = estimate_reo(groups, a[i], n_rec, b[i], n_rand, ci_method=ci_method, level=level)
        if np.isfinite(e.ci_low) and np.isfinite(e.ci_high):
            defined += 1
            covered += int(e.ci_low <= truth <= e.ci_high)
    return covered, defined
