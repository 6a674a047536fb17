"""REO's bootstrap intervals: ``bootstrap_percentile``, ``bootstrap_normal``
and ``bootstrap_bca`` (seed 001 §4.3).

Why apart from :func:`fairmon.transforms.reo.estimate.estimate_reo`: the
bootstrap replaces the delta method's interval and SEs wholesale (REO and
every ΔU_k), and its undefined cases are per resample, not per formula.
The resampling itself is :func:`fairmon.transforms.reo.bootstrap.single_arm_bootstrap`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fairmon.transforms.reo.cluster import BucketSums


@dataclass(frozen=True)
class BootstrapIntervals:
    """REO's interval and SE, ΔU's bounds and SEs (K,) and the reason
    (``None`` when all defined) from one bootstrap."""

    ci_low: float
    ci_high: float
    se_reo: float
    lo_dU: np.ndarray
    hi_dU: np.ndarray
    se_dU: np.ndarray
    undefined: str | None


def bootstrap_intervals(
    a: np.ndarray,
    n_rec: int,
    b: np.ndarray,
    n_rand: int,
    *,
    method: str,
    level: float,
    n_boot: int,
    rng: np.random.Generator | None,
    clusters: tuple[BucketSums | None, BucketSums | None],
) -> BootstrapIntervals:
    """Bootstrap CIs for REO and ΔU from per-group positive counts ``a``, ``b``
    (K,) of default (``n_rec`` rows) and random traffic (``n_rand`` rows).

    ``n_boot`` multinomial resamples of the count tables (bucket resamples
    when ``clusters`` are given), drawn with ``rng`` (a fixed seed 0 when
    None, so a run is reproducible); SE = bootstrap sd. ``undefined`` says
    why bounds are NaN (e.g. resamples with P_k = 0). Raises ValueError for an
    unknown ``method``. Source: seed 001 §4.3.
    """
    from fairmon.transforms.reo.bootstrap import single_arm_bootstrap

    boot = single_arm_bootstrap(
        a,
        int(n_rec),
        b,
        int(n_rand),
        method=method,
        level=level,
        B=n_boot,
        rng=rng if rng is not None else np.random.default_rng(0),
        clusters=clusters,
    )
    ci_low, ci_high, se_reo = boot["reo"]
    lo_dU, hi_dU, se_dU = (np.array(x) for x in zip(*boot["delta_U"]))
    return BootstrapIntervals(ci_low, ci_high, se_reo, lo_dU, hi_dU, se_dU, boot["undefined"])
