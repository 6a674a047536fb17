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


def default_traffic_required(q_k: float | np.ndarray, epsilon: float, delta: float) -> np.ndarray:
    """|D_rec| = ⌈3 q_k⁻¹ ε⁻² ln(2/δ)⌉: default-traffic rows that estimate Q_k
    within relative error ε with probability at least 1 − δ.

    Source: seed 001 App. E, Thm E.1, the default-traffic half (the same
    multiplicative Chernoff bound as :func:`random_traffic_required`, applied to
    Q̂_k, the share of default rows that are positives of group k). Shape () or
    (K,); inf where q_k = 0. Raises ValueError unless 0 < ε and 0 < δ < 1.
    Reference: q_k = 0.1, ε = 0.1, δ = 0.05 -> ⌈3000 · ln 40⌉ = 11,067.
    """
    return random_traffic_required(q_k, epsilon, delta)


def eq13_check(U: np.ndarray) -> dict:
    """Whether seed 001 eq. 13's bound |Σ_kk| ≤ 4K²/(ΣU)² holds at the observed U.

    The exact middle term of eq. 13 (the Jacobian of eq. 10 with ς² ≤ 2 from
    eq. 12) is 2K²((S − U_k)² + (K − 1)U_k²)/S⁴ with S = Σ_i U_i; it is at most
    4K²/S² iff (S − U_k)² + (K − 1)U_k² ≤ 2S², i.e. iff the share
    x_k = U_k/S satisfies K x_k² − 2 x_k − 1 ≤ 0, x_k ≤ (1 + √(K + 1))/K. For
    K ≤ 3 that bound is ≥ 1, so eq. 13 always holds; for K ≥ 4 it fails when
    one group's share is above it (K = 4: 0.809; K = 8: 0.5). Thms E.3/E.4
    (eqs. 14, 16, 21) rest on it. U may be on any scale (only U_k/S enters).

    Returns {"holds": bool | None (None when some U_k is not finite or S ≤ 0),
    "max_share", "share_bound" (floats or None), "reason" (str)}.
    """
    U = np.asarray(U, float)
    K = U.size
    bound = (1 + math.sqrt(K + 1)) / K
    S = float(U.sum())
    if not np.all(np.isfinite(U)) or not S > 0:
        return {"holds": None, "max_share": None, "share_bound": bound, "reason": "eq. 13 not checked: U_k not finite"}
    lhs = (S - U) ** 2 + (K - 1) * U**2
    x = float(U.max() / S)  # the condition binds at the largest share (small shares satisfy K x² − 2x − 1 ≤ 0)
    holds = bool(np.all(lhs <= 2 * S * S * (1 + 1e-12)))
    rel = "≤" if holds else ">"
    reason = (
        f"eq. 13 {'holds' if holds else 'fails'} at the observed U: max_k U_k/ΣU = {x:.3f} {rel} "
        f"(1 + √(K + 1))/K = {bound:.3f} (K = {K})"
    )
    if not holds:
        reason += "; its bound 4K²/(ΣU)² understates Var(ΔU_k), so E.3/E.4 are indicative only"
    return {"holds": holds, "max_share": x, "share_bound": bound, "reason": reason}


def _ceil_int(x: float) -> int | None:
    """⌈x⌉ as an int, None where x is not finite (a group without positives)."""
    return int(math.ceil(x)) if np.isfinite(x) else None


def union_bound_volumes(P: np.ndarray, Q: np.ndarray, eps_u: float, delta: float) -> dict:
    """fairmon's own non-asymptotic bound (not one of seed 001's theorems): random
    and default traffic so that every U_k = Q_k/P_k is within relative error
    ``eps_u`` of the truth, for all groups at once, with probability ≥ 1 − δ.

    Derivation: Thm E.1 (multiplicative Chernoff) for each of the 2K shares
    P̂_k, Q̂_k at relative error ε' = eps_u/(2 + eps_u) — so that
    (1 + ε')/(1 − ε') ≤ 1 + eps_u — and failure probability δ/(2K) each, then a
    union bound. Every 1 + ΔU_k is then within a factor (1 + eps_u)/(1 − eps_u).
    Its ε is a *relative* error on U_k, not the absolute ε of Thms E.2–E.4.

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
        "n_rand": _ceil_int(r.max()),
        "n_rec": _ceil_int(d.max()),
        "per_group_rand": r,
        "per_group_rec": d,
        "eps_share": eps_s,
        "delta_share": d_s,
        "delta_u_factor": (1 + eps_u) / (1 - eps_u),
    }


def _check(epsilon: float, delta: float) -> None:
    if not epsilon > 0 or not 0 < delta < 1:
        raise ValueError(f"need epsilon > 0 and 0 < delta < 1, got {epsilon}, {delta}")


def eq8_volumes(n: float, U: np.ndarray, P: np.ndarray, Q: np.ndarray) -> tuple[int | None, int | None]:
    """Traffic sizes from the sample-size parameter n by seed 001 eq. 8:
    |D_rec| = n · max_k U_k² (1 − q_k)/q_k and |D_rand| = n · max_k U_k² (1 − p_k)/p_k
    (each term of Var(Û_k) = U_k²((1−q)/(q|D_rec|) + (1−p)/(p|D_rand|)) then is
    at most 1/n). Shapes (K,). Returns (n_rec, n_rand), rounded up (None where not finite)."""
    U, P, Q = (np.asarray(x, float) for x in (U, P, Q))

    def up(x: float) -> int | None:  # round up, ignoring a last-bit excess (1199 · 9.000000000000002)
        return _ceil_int(x * (1 - 1e-12))

    return up(n * np.max(U**2 * (1 - Q) / Q)), up(n * np.max(U**2 * (1 - P) / P))


def thm_e2_volumes(P: np.ndarray, Q: np.ndarray, epsilon: float, delta: float, rec_rate: float) -> dict:
    """Seed 001 Thm E.2 as printed: n = ⌈4 ε⁻² ln(1/δ)⌉ so that Û_k (rescaled)
    is within absolute ε of the RTPR U_k with probability ≥ 1 − δ; volumes by
    eq. 8. U_k = P(R = 1 | Y = 1, S = k) = C·Q_k/P_k needs the overall
    recommendation rate C = P(R = 1) (``rec_rate``, in (0, 1]). Shapes (K,).
    Returns {"n", "n_rec", "n_rand"}. Raises ValueError on bad ε, δ or C.
    """
    _check(epsilon, delta)
    if not 0 < rec_rate <= 1:
        raise ValueError(f"rec_rate must be in (0, 1], got {rec_rate}")
    P, Q = np.asarray(P, float), np.asarray(Q, float)
    n = math.ceil(4 / epsilon**2 * math.log(1 / delta))
    n_rec, n_rand = eq8_volumes(n, rec_rate * Q / P, P, Q)
    return {"n": n, "n_rec": n_rec, "n_rand": n_rand}


def thm_e34_volumes(
    P: np.ndarray, Q: np.ndarray, epsilon: float, delta: float, theorem: str, constant: float = 4.0
) -> dict:
    """Seed 001 Thm E.3 (every ΔU_k within absolute ε) or E.4 (REO within ε):
    n = c·K²/((Σ_k U_k)² ε²) · ln(K/δ) (E.3) or ln(1/δ) (E.4), volumes by eq. 8.

    ``constant`` c = 4 is the theorems as printed; the paper's own Gaussian
    tail argument (P(|Z| ≥ x) ≤ exp(−x²/2) applied to Var = 2/n) gives 8, so
    c = 8 is the corrected constant (DESIGN §4.5). n·U_k² depends only on the
    ratios U_k/ΣU, so U = Q/P at any scale serves. Both rest on eq. 13's
    covariance bound, which :func:`eq13_check` tests at the observed U (it can
    fail for K ≥ 4 with a dominant group). Shapes (K,). Returns {"n", "n_rec", "n_rand"}.
    Raises ValueError on bad ε, δ or theorem.
    """
    _check(epsilon, delta)
    if theorem not in ("E.3", "E.4"):
        raise ValueError(f"theorem must be 'E.3' or 'E.4', got {theorem!r}")
    P, Q = np.asarray(P, float), np.asarray(Q, float)
    U = Q / P
    K = U.size
    log_term = math.log(K / delta) if theorem == "E.3" else math.log(1 / delta)
    n = constant * K**2 / (U.sum() ** 2 * epsilon**2) * log_term
    n_rec, n_rand = eq8_volumes(n, U, P, Q)
    return {"n": n, "n_rec": n_rec, "n_rand": n_rand}


PLAN_METHODS = ("thm_e1", "thm_e2", "thm_e3", "thm_e4", "thm_e3_corrected", "thm_e4_corrected", "union_bound")


def plan_volumes(
    P: np.ndarray, Q: np.ndarray, epsilon: float, delta: float, rec_rate: float | None = None
) -> list[dict]:
    """Every planner's volumes for shares P, Q (shapes (K,)): one dict per
    method of :data:`PLAN_METHODS` with keys method, n_rec, n_rand (ints, or
    None where the method does not size that traffic or cannot be computed),
    target (what ε bounds), note (why a value is missing, or a caveat: for
    E.3/E.4 eq. 13's failure, only where it fails at U = Q/P), eq13_holds and
    eq13_reason (:func:`eq13_check`; None for the methods that do not use it).
    ``thm_e1`` sizes both traffics (Thm E.1: P_k and Q_k each within relative ε).
    Sources: seed 001 Thms E.1–E.4 and eq. 8; ``union_bound`` is
    :func:`union_bound_volumes` (fairmon's own). Raises ValueError on bad ε, δ.
    """
    _check(epsilon, delta)
    P, Q = np.asarray(P, float), np.asarray(Q, float)
    out = [
        {
            "method": "thm_e1",
            "n_rec": _ceil_int(default_traffic_required(Q, epsilon, delta).max()),
            "n_rand": _ceil_int(random_traffic_required(P, epsilon, delta).max()),
            "target": "each P_k and Q_k within relative ε",
            "note": "3 p_k⁻¹ ε⁻² ln(2/δ) random, 3 q_k⁻¹ ε⁻² ln(2/δ) default rows",
        }
    ]
    if rec_rate is None:
        out.append(
            {
                "method": "thm_e2",
                "n_rec": None,
                "n_rand": None,
                "target": "each U_k within absolute ε",
                "note": "needs the overall recommendation rate P(R = 1) (--rec-rate)",
            }
        )
    else:
        e2 = thm_e2_volumes(P, Q, epsilon, delta, rec_rate)
        out.append(
            {
                "method": "thm_e2",
                "n_rec": e2["n_rec"],
                "n_rand": e2["n_rand"],
                "target": "each U_k within absolute ε",
                "note": f"n = {e2['n']}",
            }
        )
    eq13 = eq13_check(Q / P)
    fails = "; eq. 13 fails at the observed U (see eq13_reason)" if eq13["holds"] is False else ""
    for thm, target in (("E.3", "every ΔU_k within absolute ε"), ("E.4", "REO within absolute ε")):
        for suffix, c, note in (
            ("", 4.0, "as printed (constant 4)"),
            ("_corrected", 8.0, "constant 8 from the paper's own tail bound"),
        ):
            v = thm_e34_volumes(P, Q, epsilon, delta, thm, c)
            out.append(
                {
                    "method": f"thm_e{thm[-1]}{suffix}",
                    "n_rec": v["n_rec"],
                    "n_rand": v["n_rand"],
                    "target": target,
                    "note": note + fails,
                    "eq13_holds": eq13["holds"],
                    "eq13_reason": eq13["reason"],
                }
            )
    u = union_bound_volumes(P, Q, epsilon, delta)
    out.append(
        {
            "method": "union_bound",
            "n_rec": u["n_rec"],
            "n_rand": u["n_rand"],
            "target": "every U_k within relative ε (fairmon's union bound over Thm E.1)",
            "note": "",
        }
    )
    for r in out:  # eq. 13 concerns only E.3/E.4; null elsewhere
        r.setdefault("eq13_holds", None)
        r.setdefault("eq13_reason", None)
    order = {m: i for i, m in enumerate(PLAN_METHODS)}
    return sorted(out, key=lambda r: order[r["method"]])


def reo_se_for_volume(Q: np.ndarray, P: np.ndarray, n_rec: float, n_rand: float) -> tuple[float, np.ndarray]:
    """Delta-method SE of REO and of each ΔU_k that volumes n_rec, n_rand would
    give at shares Q, P (seed 001 Algorithm 1 with the full multinomial Γ;
    :func:`fairmon.transforms.reo.estimate.estimate_reo`)."""
    from fairmon.transforms.reo.estimate import delta_u_log_jacobian, reo_log_gradient

    Q, P = np.asarray(Q, float), np.asarray(P, float)
    U = Q / P
    v = 1 / (Q * n_rec) + 1 / (P * n_rand)
    return float(np.sqrt(np.sum(reo_log_gradient(U) ** 2 * v))), np.sqrt((delta_u_log_jacobian(U) ** 2) @ v)


def random_volume_for_reo_se(Q: np.ndarray, P: np.ndarray, n_rec: float, target_se: float) -> float:
    """Random-traffic rows needed for SE(REO) = ``target_se`` given n_rec default
    rows: inverts Var = Σ g²/(Q n_rec) + Σ g²/(P n_rand). Returns inf when the
    default-traffic term alone exceeds the target (more random traffic cannot help)."""
    from fairmon.transforms.reo.estimate import reo_log_gradient

    Q, P = np.asarray(Q, float), np.asarray(P, float)
    g2 = reo_log_gradient(Q / P) ** 2
    rest = target_se**2 - np.sum(g2 / Q) / n_rec
    return float(np.ceil(np.sum(g2 / P) / rest)) if rest > 0 else float("inf")
