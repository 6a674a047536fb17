"""Envy audits' confidence bounds (seed 004 Lemmas 4 and 5) and the
utilities they bound (eq. 1).

Why apart from :mod:`fairmon.transforms.envy.certify`: OCEF's stopping
rules, AUDIT and the group envy tables all rest on these bounds, and they are
checked on their own against the paper's reference values (DESIGN §5).
"""

from __future__ import annotations

import math

import numpy as np

#: Rewards in [0, 1] are 1/2-subgaussian (seed 004 App. E, before Lemma 4).
SIGMA = 0.5
#: ω of Lemma 4. Any ω in (0, 1) is valid; 0.01 gives the narrowest bounds at
#: the sample sizes an audit reaches (β at N = 1000, 10 arms, δ = 0.05:
#: 0.106 at ω = 0.01, 0.113 at 0.1, 0.144 at 0.5).
OMEGA = 0.01


def check_delta(delta: float) -> None:
    """Raise ValueError unless δ, the audit's error probability, lies in (0, 1)."""
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got {delta}")


def utilities(rho: np.ndarray, pi: np.ndarray, q: np.ndarray | None = None) -> np.ndarray:
    """u^m(π^n) for every pair of users (seed 004 eq. 1).

    ``rho``: expected rewards ρ^m(a|x), shape (M, A) or (M, X, A), in [0, 1].
    ``pi``: policies π^n(a|x), shape (N, A) or (N, X, A), rows summing to 1
    over actions. ``q``: context distributions q^m(x), shape (M, X); uniform
    when omitted (ignored without contexts). Returns U of shape (M, N) with
    U[m, n] = Σ_x q^m(x) Σ_a π^n(a|x) ρ^m(a|x), so the diagonal is each user's
    own utility when M = N and row m of ``pi`` is user m's policy.
    Raises ValueError on mismatched shapes or policies that do not sum to 1.
    """
    rho = np.asarray(rho, dtype=float)
    pi = np.asarray(pi, dtype=float)
    if rho.ndim == 2:
        rho, pi = rho[:, None, :], pi[:, None, :] if pi.ndim == 2 else pi
    if rho.ndim != 3 or pi.ndim != 3 or rho.shape[1:] != pi.shape[1:]:
        raise ValueError(f"rho {rho.shape} and pi {pi.shape} must share (contexts, actions)")
    if not np.allclose(pi.sum(axis=2), 1.0, atol=1e-9):
        raise ValueError("every policy must sum to 1 over actions in every context")
    X = rho.shape[1]
    q = np.full((rho.shape[0], X), 1.0 / X) if q is None else np.asarray(q, dtype=float)
    if q.shape != (rho.shape[0], X):
        raise ValueError(f"q must have shape {(rho.shape[0], X)}, got {q.shape}")
    return np.einsum("mx,mxa,nxa->mn", q, rho, pi)


def lil_beta(
    n: np.ndarray | float, n_arms: np.ndarray | int, delta: float, *, sigma: float = SIGMA, omega: float = OMEGA
) -> np.ndarray:
    """Half-width β_k(t) of the anytime confidence sequence (seed 004 Lemma 4).

    ``n``: pulls N_k(t) of the arm (≥ 0; any shape). ``n_arms``: K + 1, the
    number of arms the union bound covers (the baseline included), broadcast
    against ``n``. ``delta``: Lemma 4 holds with probability 1 − δ/2 for every
    t and arm at once. β = sqrt(2σ²(1+√ω)²(1+ω)/N) · sqrt(log(2(K+1)/θ ·
    log((1+ω)N))) with θ = log(1+ω)·(ωδ/(2(2+ω)))^{1/(1+ω)}. At N = 0 the
    value is β at N = 1 plus one (the seed's convention: larger than at
    N = 1, so β decreases in N; with μ̂ = 0 the interval still covers [0, 1]).
    Raises ValueError for δ or ω outside (0, 1) or negative counts.
    """
    check_delta(delta)
    if not 0 < omega < 1:
        raise ValueError(f"omega must lie in (0, 1), got {omega}")
    n = np.asarray(n, dtype=float)
    if (n < 0).any():
        raise ValueError("pull counts must be >= 0")
    arms = np.asarray(n_arms, dtype=float)
    theta = math.log1p(omega) * (omega * delta / (2 * (2 + omega))) ** (1 / (1 + omega))
    scale = 2 * sigma**2 * (1 + math.sqrt(omega)) ** 2 * (1 + omega)

    def at(m):
        return np.sqrt(scale / m * np.log(2 * arms / theta * np.log((1 + omega) * m)))

    m = np.maximum(n, 1.0)
    return np.where(n >= 1, at(m), at(np.ones_like(m)) + 1.0)


def confidence_bounds(
    n: np.ndarray, reward_sum: np.ndarray, n_arms: np.ndarray | int, delta: float, *, omega: float = OMEGA
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(μ̂, lower, upper) of Lemma 4 for arms with ``n`` pulls and reward sums
    ``reward_sum`` (rewards in [0, 1]; same shapes). μ̂ = 0 where n = 0.
    Source: seed 004 Lemma 4. Raises as :func:`lil_beta`."""
    n = np.asarray(n, dtype=float)
    s = np.asarray(reward_sum, dtype=float)
    mean = np.divide(s, n, out=np.zeros_like(s), where=n > 0)
    beta = lil_beta(n, n_arms, delta, omega=omega)
    return mean, mean - beta, mean + beta


def freedman_phi(n_explore: np.ndarray | float, delta: float, *, sigma: float = SIGMA) -> np.ndarray:
    """φ(t) bounding |Σ_{s∈A_{t−1}} (μ_{k_s} − r_s)| (seed 004 Lemma 5, used in eq. 4).

    ``n_explore``: |A_{t−1}|, the rounds so far that pulled a non-baseline arm.
    Freedman's inequality in its usual form: σ·sqrt(2|A|L) + (2/3)L with
    L = log(6|A|²/δ); the printed Lemma 5 puts (2/3)L under the root, which
    is smaller than Freedman's bound (DESIGN §4.7). 0 when |A| = 0.
    """
    check_delta(delta)
    a = np.asarray(n_explore, dtype=float)
    safe = np.maximum(a, 1.0)
    L = np.log(6 * safe**2 / delta)
    return np.where(a > 0, sigma * np.sqrt(2 * safe * L) + (2.0 / 3.0) * L, 0.0)
