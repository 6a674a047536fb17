"""The A/B bootstrap's replicates (seed 001 Algorithm 4,
:func:`fairmon.transforms.reo.ab.ab_estimates` method ``bootstrap``): both
arms and the shared random traffic resampled together, and the statistics
of the replicate differences of REO and ΔU_k per metric.

The replicates' utilities are never held as (B, K) arrays: they are divided
out of the replicates' sums a block at a time, each block the same bits as
that block of the whole array (at K = 4,096 groups and
B = 1,000 each whole array was 33 MB of fresh pages a day).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fairmon.transforms.reo.ab_reo import percentile_bounds, percentile_p_value
from fairmon.transforms.reo.bootstrap import ROW_BLOCK, reo_rows, resample_counts, utilities
from fairmon.transforms.reo.cluster import BucketSums, resample_together
from fairmon.transforms.reo.reo_math import reo_log_gradient


def bootstrap_difference_stats(
    samples: tuple[tuple[np.ndarray, int], tuple[np.ndarray, int], tuple[np.ndarray, int]],
    clusters: tuple[BucketSums | None, BucketSums | None, BucketSums | None],
    level: float,
    n_boot: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, ...]:
    """:func:`replicate_block_stats` of ``n_boot`` replicates of the
    treatment, control and random ``samples`` (positives (K,), rows each),
    resampled together: buckets when clustered (``clusters``, per sample),
    the union of the samples' buckets drawn once when they carry bucket ids
    (:func:`fairmon.transforms.reo.cluster.resample_together`, so a cluster
    in several samples is one unit), else multinomial counts
    (:func:`fairmon.transforms.reo.bootstrap.resample_counts`); each
    replicate's two arms share its P̂*; D_REO's interval is the bootstrap-t,
    studentized with each replicate's delta-method SE (:func:`replicate_block_stats`,
    :func:`d_reo_se_rows`). Returns (all finite, sd, p-value, lower, upper) per metric,
    shapes (1 + K,). Raises ValueError when a sample's positives exceed its rows.
    Source: seed 001 Algorithm 4; Efron & Tibshirani (1993) §12.5, §13.3, §16."""

    def draw(c: BucketSums | None, pos: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        return c.resample(n_boot, rng) if c is not None else (resample_counts(pos, n, n_boot, rng), n)

    c_T, c_C, c_R = clusters
    together = resample_together([c_T, c_C, c_R], n_boot, rng, single=True)  # shared units drawn once
    if together is not None:
        (bT, nT), (bC, nC), (bR, nR) = (t if t is not None else draw(None, *x) for t, x in zip(together, samples))
    else:
        (bT, nT), (bC, nC) = draw(c_T, *samples[0]), draw(c_C, *samples[1])
        bR, nR = draw(c_R, *samples[2])  # shared by both arms in each replicate
    ones = np.ones(n_boot)  # a sample drawn without clusters has the same rows in every replicate
    utilities_of = replicate_utilities((bT, bC, bR), (ones * nT, ones * nC, ones * nR))
    (aT, nT0), (aC, nC0), (b, nR0) = samples
    point = utilities(np.asarray(aT)[None], np.array([nT0]), np.asarray(b)[None], np.array([nR0]))
    against = utilities(np.asarray(aC)[None], np.array([nC0]), np.asarray(b)[None], np.array([nR0]))
    d_hat = float(reo_rows(point)[0] - reo_rows(against)[0])
    on_data = (np.asarray(x)[None] for x in (aT, aC, b, nT0, nC0, nR0))
    se_hat = float(d_reo_se_rows(*on_data)[0])

    def se_of(rows: slice) -> np.ndarray:
        return d_reo_se_rows(bT[rows], bC[rows], bR[rows], *(np.broadcast_to(n, n_boot)[rows] for n in (nT, nC, nR)))

    return replicate_block_stats(utilities_of, bT.shape, level, studentized=(d_hat, se_hat, se_of))


def replicate_stats(U_T: np.ndarray, U_C: np.ndarray, level: float, block: int = 256) -> tuple[np.ndarray, ...]:
    """Per metric (REO, then ΔU_k) of the replicate differences d = metric(U_T) −
    metric(U_C), from replicate utilities (B, K) each: (all finite, sd with
    ddof 1, percentile p-value, percentile bounds), shapes (1 + K,).
    :func:`replicate_block_stats` with the arrays' own blocks. Raises nothing; K ≥ 1."""
    return replicate_block_stats(lambda rows, cols: (U_T[rows, cols], U_C[rows, cols]), U_T.shape, level, block)


def replicate_block_stats(
    utilities_of: Callable[[slice, slice], tuple[np.ndarray, np.ndarray]],
    shape: tuple[int, int],
    level: float,
    block: int = 256,
    studentized: tuple[float, float, Callable[[slice], np.ndarray]] | None = None,
) -> tuple[np.ndarray, ...]:
    """:func:`replicate_stats` of the replicate utilities (U_T, U_C) of
    ``shape`` (B, K) that ``utilities_of(rows, cols)`` gives a block at a
    time (float64, each the same bits as that block of the whole array).
    Each replicate's mean and REO are taken ``ROW_BLOCK`` rows at a time
    (a row reduces as in the whole array); then the metrics ``block``
    columns at a time (REO with the first ΔU columns, so every block is a
    (B, ≥ 2) matrix whose column reductions add as the whole (B, 1 + K)
    one does: the same bits). Each block is worked in two halves when the
    second has ≥ 2 columns (at B = 1,000, (B, 128) pieces stay in cache),
    the same sums; a one-column block stays alone (its sd sums pairwise).
    No (B, K) array is made: at K = 4,096 each would be 33 MB of fresh
    pages a day. With ``studentized`` = (D̂, SE, SE*(rows)) — D_REO of the
    data, its delta-method SE and that of a block of replicates — the D_REO
    row is the bootstrap-t (Efron & Tibshirani 1993 §12.5): t* = (D* − D̂)/SE*,
    and the percentile bounds and p-value are taken of D̂ − t*·SE, so the
    interval is [D̂ − t*₍₁₋α/₂₎·SE, D̂ − t*₍α/₂₎·SE] and the p-value inverts it.
    REO is biased upward, most in the arm nearer parity, and its spread grows
    with its level: the plain percentile interval of D* missed on one side.
    The sd stays that of D*. A replicate whose SE* is not a positive number
    (REO* = 0, REO's kink, or a P* = 0) leaves the row's bounds and p-value
    without a finite set; its sd is kept while every D* is finite.
    Raises nothing; K ≥ 1."""
    B, K = shape
    mean_T, mean_C, reo_d = np.empty((B, 1)), np.empty((B, 1)), np.empty(B)
    for i in range(0, B, ROW_BLOCK):
        rows = slice(i, min(i + ROW_BLOCK, B))
        T, C = utilities_of(rows, slice(None))
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_T[rows], mean_C[rows] = T.mean(axis=-1, keepdims=True), C.mean(axis=-1, keepdims=True)
            reo_d[rows] = reo_rows(T) - reo_rows(C)
    reo_sd = None
    if studentized is not None:
        d_hat, se_hat, se_of = studentized
        reo_sd = reo_d.std(ddof=1)
        se_b = np.concatenate([se_of(slice(i, min(i + ROW_BLOCK, B))) for i in range(0, B, ROW_BLOCK)])
        with np.errstate(invalid="ignore", divide="ignore"):
            reo_d = d_hat - (reo_d - d_hat) / np.where(se_b > 0, se_b, np.nan) * se_hat
    parts, pieces = [], []
    for lo in range(0, K, block):
        hi, mid = min(lo + block, K), lo + block // 2
        pieces += [(lo, mid), (mid, hi)] if hi - mid >= 2 else [(lo, hi)]
    for lo, hi in pieces:
        T, C = utilities_of(slice(None), slice(lo, hi))
        with np.errstate(invalid="ignore", divide="ignore"):
            d = (T / mean_T - 1.0) - (C / mean_C - 1.0)
            if lo == 0:
                d = np.concatenate([reo_d[:, None], d], axis=1)
            se = d.std(axis=0, ddof=1)
            p = np.where(se > 0, percentile_p_value(d), np.nan)
            if lo == 0 and reo_sd is not None:  # the sd of D* itself, not of the studentized values
                se[0] = reo_sd
        parts.append((np.isfinite(d).all(axis=0), se, p, *percentile_bounds(d, level)))
    return tuple(np.concatenate(x) for x in zip(*parts))


def d_reo_se_rows(
    a_T: np.ndarray, a_C: np.ndarray, b: np.ndarray, n_T: np.ndarray, n_C: np.ndarray, n_R: np.ndarray
) -> np.ndarray:
    """The delta-method SE of D_REO = REO(U_T) − REO(U_C) per row, rows
    independent: positives (R, K) of each arm and of the shared random
    traffic, their rows (R,) -> (R,). With g_X = ∂REO/∂log U_X (Σ_k g_k = 0,
    REO being scale-free, so the multinomial's −1/n covariances cancel),
    Var = Σ g_T²/(Q_T n_T) + Σ g_C²/(Q_C n_C) + Σ (g_T − g_C)²/(P n_R): the
    ``delta`` method's variance without clustering (:mod:`fairmon.transforms.reo.ab`).
    The bootstrap-t's studentizer: with clustered rows it is the SE of
    independent rows on the data and on each bucket-resampled replicate alike,
    so their ratio still tracks how D_REO's spread moves with its level, while
    the buckets carry the clustering into D*. A group with Q_k = 0 in an arm
    adds 0 for that arm (g_k ∝ Q_k, so g_k²/(Q_k n) → 0 with Q_k); NaN where
    a P_k is 0 or an arm's REO is 0. Raises nothing. Source: seed 001
    Algorithm 1 (g), App. F."""
    n_T, n_C, n_R = (np.asarray(x, float)[:, None] for x in (n_T, n_C, n_R))
    with np.errstate(invalid="ignore", divide="ignore"):
        Q_T, Q_C, P = np.asarray(a_T, float) / n_T, np.asarray(a_C, float) / n_C, np.asarray(b, float) / n_R
        g_T, g_C = (reo_log_gradient(Q / P) for Q in (Q_T, Q_C))
        arm_T, arm_C = (np.where(Q > 0, g**2 / (Q * n), 0.0) for Q, g, n in ((Q_T, g_T, n_T), (Q_C, g_C, n_C)))
        var = arm_T.sum(-1) + arm_C.sum(-1) + ((g_T - g_C) ** 2 / (P * n_R)).sum(-1)
    return np.sqrt(var)


def _quotient(a: np.ndarray, by: np.ndarray) -> np.ndarray:
    """a / by in a new float64 array (``by`` (B,) per row, or like ``a``),
    the cast done by the division (the same values as casting first);
    ``a`` is left as it is. NaN or ±inf where ``by`` is 0 (the metric's
    reason then says so)."""
    by = by[:, None] if by.ndim == 1 else by
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.divide(np.asarray(a), by, dtype=np.float64)


def replicate_utilities(
    sums: tuple[np.ndarray, np.ndarray, np.ndarray], rows: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> Callable[[slice, slice], tuple[np.ndarray, np.ndarray]]:
    """For :func:`replicate_block_stats`: the replicates' utilities
    U*_X = (a*_X/n*_X)/(b*/n*_rand) of both arms (X = T, C) for a block of
    replicates and groups, from the positives ``sums`` (treatment, control,
    random; (B, K) each, exact integers in any float or integer dtype) and
    the ``rows`` of each replicate ((B,) each). Each block divides as the
    whole (B, K) arrays would, element by element (the same bits), and the
    sums are only read."""
    (a_T, a_C, b), (n_T, n_C, n_rand) = sums, rows

    def block(r: slice, c: slice) -> tuple[np.ndarray, np.ndarray]:
        P = _quotient(b[r, c], n_rand[r])  # the shared random traffic's P̂*, once for both arms
        U_T, U_C = _quotient(a_T[r, c], n_T[r]), _quotient(a_C[r, c], n_C[r])
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.divide(U_T, P, out=U_T), np.divide(U_C, P, out=U_C)

    return block
