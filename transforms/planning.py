"""Random-traffic volume needed for a given accuracy (seed 001, App. E)."""

from __future__ import annotations

import math

import numpy as np


def random_traffic_required(p_k: float | np.ndarray, epsilon: float, delta: float) -> np.ndarray:
    """|D_rand| = ⌈3 p_k⁻¹ ε⁻² ln(2/δ)⌉: random-traffic rows that estimate P_k
    within relative error ε with probability at least 1 − δ.

    Source: seed 001 Thm E.1 (a multiplicative Chernoff bound). ``p_k`` is the
    share of random-traffic rows that are positives of group k (P_k); shape
    () or (K,). Returns integers (as float array; inf where p_k = 0).
    Raises ValueError unless 0 < ε and 0 < δ < 1.
    Reference (DESIGN §5 form): p_k = 0.01, ε = 0.1, δ = 0.05 -> 110,667.
    """
    if not epsilon > 0 or not 0 < delta < 1:
        raise ValueError(f"need epsilon > 0 and 0 < delta < 1, got {epsilon}, {delta}")
    p = np.asarray(p_k, dtype=float)
    with np.errstate(divide="ignore"):
        return np.ceil(3.0 / p * epsilon**-2 * math.log(2.0 / delta))


def joint_volumes(P: np.ndarray, Q: np.ndarray, eps_u: float, delta: float) -> dict:
    """Random and default traffic needed so that every U_k = Q_k/P_k is within
    relative error ``eps_u`` of the truth, for all groups at once, with
    probability at least 1 − δ.

    Derivation (a union-bound consequence of Thm E.1, our reading of seed 001
    Thm E.3-E.4 and Remark E.5): if each of the 2K shares P̂_k, Q̂_k is within
    relative error ε' = eps_u/(2 + eps_u) — so that (1 + ε')/(1 − ε') ≤ 1 + eps_u —
    with failure probability δ/(2K) each, all K ratios are within eps_u
    together. Then every 1 + ΔU_k = U_k/mean(U) is within a factor
    (1 + eps_u)/(1 − eps_u) of its truth.

    Inputs: P, Q shape (K,) joint shares (positives of group k per row).
    Returns {"n_rand", "n_rec" (ints), "per_group_rand", "per_group_rec" (K,),
    "eps_share", "delta_share", "delta_u_factor"}. Raises ValueError on bad ε, δ.
    """
    P, Q = np.asarray(P, float), np.asarray(Q, float)
    K = P.size
    eps_s = eps_u / (2 + eps_u)
    d_s = delta / (2 * K)
    r = random_traffic_required(P, eps_s, d_s)
    d = random_traffic_required(Q, eps_s, d_s)
    return {
        "n_rand": int(r.max()),
        "n_rec": int(d.max()),
        "per_group_rand": r,
        "per_group_rec": d,
        "eps_share": eps_s,
        "delta_share": d_s,
        "delta_u_factor": (1 + eps_u) / (1 - eps_u),
    }


def reo_se_for_volume(Q: np.ndarray, P: np.ndarray, n_rec: float, n_rand: float) -> tuple[float, np.ndarray]:
    """Delta-method SE of REO and of each ΔU_k that volumes n_rec, n_rand would
    give at shares Q, P (seed 001 Algorithm 1 with the full multinomial Γ;
    :func:`fairmon.transforms.reo.estimate_reo`)."""
    from fairmon.transforms.reo import delta_u_log_jacobian, reo_log_gradient

    Q, P = np.asarray(Q, float), np.asarray(P, float)
    U = Q / P
    v = 1 / (Q * n_rec) + 1 / (P * n_rand)
    return float(np.sqrt(np.sum(reo_log_gradient(U) ** 2 * v))), np.sqrt((delta_u_log_jacobian(U) ** 2) @ v)


def random_volume_for_reo_se(Q: np.ndarray, P: np.ndarray, n_rec: float, target_se: float) -> float:
    """Random-traffic rows needed for SE(REO) = ``target_se`` given n_rec default
    rows: inverts Var = Σ g²/(Q n_rec) + Σ g²/(P n_rand). Returns inf when the
    default-traffic term alone exceeds the target (more random traffic cannot help)."""
    from fairmon.transforms.reo import reo_log_gradient

    Q, P = np.asarray(Q, float), np.asarray(P, float)
    g2 = reo_log_gradient(Q / P) ** 2
    rest = target_se**2 - np.sum(g2 / Q) / n_rec
    return float(np.ceil(np.sum(g2 / P) / rest)) if rest > 0 else float("inf")
