"""REO's delta-method intervals: ``delta`` (full multinomial covariance),
``delta_paper`` (seed 001 Algorithm 1's diagonal Γ) and their
cluster-robust form when rows are clustered (DESIGN §4.1).

Why apart from :func:`fairmon.transforms.reo.estimate.estimate_reo`: the
covariance model of log Û (multinomial, paper diagonal, one or both samples
bucketed) decides everything else, and each choice has its own undefined
cases; here they are in one place. Source: seed 001 Algorithm 1 with the full
multinomial Γ of DESIGN §4.1; the cluster-robust covariance of
transforms/reo/cluster.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fairmon.transforms.reo.cluster import BucketSums, joint_log_factors, sandwich_df
from fairmon.transforms.reo.intervals_near_zero import parity_test, reo_bc_from_trace, reo_interval_near_zero
from fairmon.transforms.reo.reo_math import (
    delta_u_covariance,
    delta_u_factor,
    few_cluster_scale,
    reo_log_gradient,
)


def log_utility_model(
    v: np.ndarray,
    Q: np.ndarray,
    P: np.ndarray,
    n_rec: int,
    n_rand: int,
    ci_method: str,
    clusters_rec: BucketSums | None,
    clusters_rand: BucketSums | None,
    cluster_note: str | None,
) -> tuple[np.ndarray, str | None]:
    """The covariance model of log Û: (v, note).

    Input ``v`` is the per-group variance (K,) of log Û_j under independent
    rows (:func:`fairmon.transforms.reo.reo_math.log_utility_variance` for
    ``ci_method``). The returned ``v`` is that one, or a full covariance
    (K, K) when exactly one sample is bucketed (its cluster sandwich plus the
    other sample's multinomial diagonal). When both samples are bucketed it
    stays the multinomial one (the robust factor is formed by :func:`delta_intervals`).
    ``note`` is the reason every interval is NaN (the caller's
    ``cluster_note``, ``delta_paper`` on clustered rows, fewer than 2
    non-empty buckets), else the ``cluster_note`` given. Never raises.
    """
    clustered = clusters_rec is not None or clusters_rand is not None
    if cluster_note:
        return v, cluster_note
    if clustered and ci_method == "delta_paper":
        return v, "delta_paper assumes independent rows: undefined when rows are clustered"
    if clustered:
        if cl_few := [c.G for c in (clusters_rec, clusters_rand) if c is not None and c.G < 2]:
            return v, f"{min(cl_few)} non-empty cluster bucket(s): the cluster-robust variance is undefined"
        if clusters_rec is None or clusters_rand is None:  # one sample bucketed: V = its sandwich + a diagonal
            K = len(Q)
            with np.errstate(divide="ignore", invalid="ignore"):
                V = np.zeros((K, K))
                for cl, share, n in ((clusters_rec, Q, n_rec), (clusters_rand, P, n_rand)):
                    V = V + (cl.log_share_covariance() if cl is not None else np.diag(1.0 / (share * n)))
            return V, cluster_note
    return v, cluster_note


def both_bucketed_factor(rec: BucketSums, rand: BucketSums) -> tuple[np.ndarray, int]:
    """F (r, K) with FᵀF = the cluster-robust Cov(log Û), log Û = log Q̂ − log P̂,
    when both samples are bucketed, and its rank bound.

    With bucket ids (the count stage's): the joint sandwich over the union of
    buckets, F = Z_Q − Z_P aligned on ids (:func:`fairmon.transforms.reo.cluster.joint_log_factors`),
    which keeps Cov(log Q̂, log P̂) when a cluster id (a user) has rows in
    both traffics (Coat by user, SE 0.0753 without it, 0.0615
    with it); rank ≤ G_u − 1. Without ids, the two sandwiches stacked
    (independent samples); rank ≤ (G_Q − 1) + (G_P − 1).
    Source: Liang & Zeger (1986); Cameron & Miller (2015) §2.3."""
    joint = joint_log_factors([rec, rand])
    if joint is None:
        return np.vstack([rec.log_share_factor(), rand.log_share_factor()]), rec.G - 1 + rand.G - 1
    (Z_q, Z_p), G = joint
    return Z_q - Z_p, G - 1


def alert_interval(
    U: np.ndarray,
    v: np.ndarray,
    F: np.ndarray | None,
    level: float,
    scale: float,
    near_zero: Callable[[float, float], tuple],
) -> tuple[float, float]:
    """REO's interval at the alerts' ``level`` (1 − 2α/H, far in the tail) from positive, finite U (K,).

    K = 2: REO = tanh(|l|/2) exactly, l = log(U_1/U_2), and l̂ = log Q̂_1 − log Q̂_2 − log P̂_1 + log P̂_2
    is a sum of logs of shares, much closer to normal in its tails than REÔ itself; so the interval is
    |l̂| ± q·sd(l̂) (q the two-sided normal quantile at ``level`` times the few-cluster ``scale``, the lower
    end at least 0) mapped through tanh(·/2). ``model`` is the covariance model of log Û: per-group
    variances (K,), a covariance (K, K), or a factor F (r, K) with FᵀF = Cov(log Û) (both samples
    bucketed; :func:`log_utility_model`). Measured at the 80 % line with 20,000 default and 21,000
    random rows: REÔ − z·SE exceeds the line 7 % more often than α/H, this bound 3 % less often
    (bench/README.md). K > 2 has no such exact transform (the smallest REO for a given
    spread of log U falls towards 0 as K grows), so ``near_zero(level, scale)``, the parity-aware
    interval of ΔÛ, is used. Never raises. Source: seed 001 eqs. 4, 19 and Algorithm 1's delta
    method, on the log scale.
    """
    if U.size != 2:
        return near_zero(level, scale)
    from fairmon.transforms.reo.reo_math import z_value

    d = np.array([1.0, -1.0])
    if F is not None:
        var = float(np.sum((F @ d) ** 2))
    else:
        var = float(d @ v @ d) if v.ndim == 2 else float(v[0] + v[1])
    if not (np.isfinite(var) and np.isfinite(scale)):
        return float("nan"), float("nan")
    half = z_value(level) * scale * np.sqrt(var)
    lr = abs(float(np.log(U[0] / U[1])))
    return float(np.tanh(max(lr - half, 0.0) / 2)), float(np.tanh((lr + half) / 2))


@dataclass(frozen=True)
class DeltaIntervals:
    """What the delta method gives for one REO: SEs of ΔÛ (K,), the
    near-parity REO interval, reo_bc, the parity test (W, df, p), REO's SE,
    the design effect and the reasons for anything undefined, in order; then
    the curvature ratio ρ = (tr Σ − ûᵀΣû)/(2‖ΔÛ‖√(ûᵀΣû)), REO's second-order
    bias over its SE (:mod:`fairmon.transforms.reo.ab_reo`; inf at ΔÛ = 0);
    and ``scale``, t_{df}/z of the few-cluster correction that widened the
    intervals (not the SEs; 1 for independent rows)."""

    se_dU: np.ndarray
    ci_low: float
    ci_high: float
    reo_bc: float
    parity: tuple[float, int, float]
    se_reo: float
    design_effect: float
    notes: tuple[str, ...]
    curvature: float = float("nan")
    scale: float = 1.0
    alert: tuple[float, float] = (float("nan"), float("nan"))


def delta_intervals(
    U: np.ndarray,
    dU: np.ndarray,
    reo: float,
    v: np.ndarray,
    v_mult: np.ndarray,
    level: float,
    clusters_rec: BucketSums | None,
    clusters_rand: BucketSums | None,
    alert_level: float | None = None,
    *,
    rand_known: bool = False,
) -> DeltaIntervals:
    """Delta-method SEs and the near-parity interval for REO from positive, finite U (K,).

    ``alert_level``: also the same interval at that level (the alerts'
    1 − 2α/H, :mod:`fairmon.transforms.alerts.horizon`), with its own
    few-cluster scale; None: not formed.

    ``v`` is the covariance model of log Û (:func:`log_utility_model`),
    ``v_mult`` the multinomial one (the design effect's denominator). When
    both samples are bucketed, V = FᵀF of rank ≤ 2(G − 1) and Σ = BᵀB is never
    formed (many groups: O(GK), not O(K³)). The parity test is undefined when
    a bucketed covariance cannot span the K − 1 contrasts; REO's SE when
    REO = 0 (std/mean is not differentiable there). ``rand_known``: the
    second sample's shares are known constants, not a sample (the rsp pool
    table, seed 001 App. H.1), so ``v`` holds default traffic's term alone
    and that sample adds no rank to the covariance. Never raises.
    Source: seed 001 Algorithm 1, DESIGN §4.1.
    """
    K = U.size
    clustered = clusters_rec is not None or clusters_rand is not None
    notes: list[str] = []
    se_reo = float("nan")
    design_effect = 1.0 if not clustered else float("nan")
    parity = (float("nan"), 0, float("nan"))
    F = None
    rank = sum(c.G - 1 if c is not None else K for c in (clusters_rec, clusters_rand)) - (K if rand_known else 0)
    if clusters_rec is not None and clusters_rand is not None:
        F, rank = both_bucketed_factor(clusters_rec, clusters_rand)
    df = sandwich_df([clusters_rec, clusters_rand])
    scale = few_cluster_scale(level, df)  # 1 without clusters
    if F is not None:
        B = delta_u_factor(U, F)
        var_dU = (B * B).sum(axis=0)

        def interval(lvl: float, s: float) -> tuple[float, float]:
            return reo_interval_near_zero(dU, None, lvl, factor=B * s)
    else:
        cov = delta_u_covariance(U, v)
        var_dU = np.diag(cov)

        def interval(lvl: float, s: float) -> tuple[float, float]:
            return reo_interval_near_zero(dU, cov * s**2, lvl)

    alert = (float("nan"), float("nan"))
    if alert_level is not None:  # first, so that the level's shape is the one near_zero_shape kept last (A/B reuse it)
        alert = alert_interval(U, v, F, alert_level, few_cluster_scale(alert_level, df), interval)
    ci_low, ci_high = interval(level, scale)
    se_dU = np.sqrt(var_dU)
    norm = float(np.linalg.norm(dU))
    uSu = float(np.sum((B @ dU) ** 2) if F is not None else dU @ cov @ dU) / norm**2 if reo > 0 else 0.0
    curvature = (var_dU.sum() - uSu) / (2 * norm * np.sqrt(uSu)) if uSu > 0 else float("inf")
    reo_bc = reo_bc_from_trace(reo, float(var_dU.sum()), K)
    if clustered and rank < K - 1:  # Σ of G − 1 df per bucketed sample cannot span K − 1 contrasts
        notes.append(
            f"parity test undefined: the cluster-robust covariance has rank at most {rank} (non-empty "
            f"clusters or buckets − 1, per sample), fewer than the K − 1 = {K - 1} contrasts: too few clusters "
            "(or hash buckets: raise cluster_buckets)"
        )
    else:
        parity = parity_test(U, F.T @ F if F is not None else v, df if clustered else float("inf"))
    g = reo_log_gradient(U)
    if reo == 0:
        notes.append("REO = 0: std/mean is not differentiable there, SE undefined")
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
    return DeltaIntervals(
        se_dU, ci_low, ci_high, reo_bc, parity, se_reo, design_effect, tuple(notes), float(curvature), scale, alert
    )
