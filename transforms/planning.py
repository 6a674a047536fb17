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
