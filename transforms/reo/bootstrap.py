"""Vectorised bootstrap for REO and ΔU from count tables (seed 001 §4.3, App. G).

Resampling the rows of a traffic sample with replacement is, for these
statistics, the same as drawing its count vector from a multinomial with the
observed shares: the positives of group k (k = 1..K) plus one "everything
else" cell. So B resamples cost one ``rng.multinomial`` call, never a loop
over rows. The BCa acceleration uses the jackknife grouped by cell (every row
of a cell gives the same leave-one-out value), which equals the row-level
jackknife that ``scipy.stats.bootstrap`` computes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy import special

from fairmon.transforms.reo.cluster import leave_one_out_together, resample_together

BOOTSTRAP_METHODS = ("bootstrap_percentile", "bootstrap_normal", "bootstrap_bca")


def reo_rows(U: np.ndarray) -> np.ndarray:
    """REO = std/mean (ddof = 0) along the last axis: (..., K) -> (...). NaN where mean is 0;
    0 where it is rounding of equal utilities (:data:`fairmon.transforms.reo.reo_math.REO_ROUNDING`)."""
    from fairmon.transforms.reo.reo_math import REO_ROUNDING

    U = np.asarray(U, dtype=float)
    if U.ndim == 2 and U.shape[0] > ROW_BLOCK and U.flags.c_contiguous:  # rows a block at a time: same bits
        return np.concatenate([reo_rows(U[i : i + ROW_BLOCK]) for i in range(0, U.shape[0], ROW_BLOCK)])
    with np.errstate(invalid="ignore", divide="ignore"):
        r = U.std(axis=-1) / U.mean(axis=-1)
    return np.where(r <= REO_ROUNDING, 0.0, r)


#: Replicate rows :func:`reo_rows` takes at a time: std's temporaries stay at
#: (64, K), 2 MB at K = 4,096, reused by the allocator, instead of (B, K)
#: arrays of 33 MB that each cost their page faults. Only a
#: row-major array is split: each contiguous row then sums as in the whole
#: (a column-major one's single-row block would sum in another order).
ROW_BLOCK = 64


def delta_u_rows(U: np.ndarray) -> np.ndarray:
    """ΔU = U/mean(U) − 1 along the last axis: (..., K) -> (..., K)."""
    U = np.asarray(U, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return U / U.mean(axis=-1, keepdims=True) - 1.0


def utilities(a: np.ndarray, n_rec, b: np.ndarray, n_rand) -> np.ndarray:
    """U = (a/n_rec)/(b/n_rand), broadcasting over leading axes; NaN where b = 0."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return (np.asarray(a, float) / np.asarray(n_rec, float)[..., None]) / (
            np.asarray(b, float) / np.asarray(n_rand, float)[..., None]
        )


def resample_counts(pos: np.ndarray, n: int, B: int, rng: np.random.Generator) -> np.ndarray:
    """B bootstrap count vectors of one sample: (K,) positives of n rows -> (B, K).

    Equivalent to resampling the n rows with replacement. Raises ValueError
    when the counts exceed n.
    """
    pos = np.asarray(pos, dtype=np.int64)
    if pos.sum() > n:
        raise ValueError("positive counts exceed the sample size")
    p = np.append(pos, n - pos.sum()) / n
    return rng.multinomial(n, p, size=B)[:, :-1]


def grouped_jackknife(
    stat: Callable[..., np.ndarray], samples: Sequence[tuple[np.ndarray, int]]
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Leave-one-row-out values of ``stat`` for each sample, grouped by cell.

    ``samples``: [(positives (K,), n rows), ...]; ``stat(*pos_arrays, *ns)``
    takes arrays with a leading axis (vectorised) and returns one value each.
    Returns per sample (values (C,), weights (C,)): the statistic with one row
    of cell c removed and how many rows cell c holds (C = K + 1 cells).
    """
    out = []
    for j, (pos_j, n_j) in enumerate(samples):
        K = len(pos_j)
        cells = np.vstack([np.asarray(pos_j) - np.eye(K, dtype=np.int64), np.asarray(pos_j)[None, :]])
        weights = np.append(np.asarray(pos_j), n_j - np.sum(pos_j)).astype(float)
        args_pos, args_n = [], []
        for i, (p, n) in enumerate(samples):
            if i == j:
                args_pos.append(cells)
                args_n.append(np.full(K + 1, n_j - 1))
            else:
                args_pos.append(np.repeat(np.asarray(p)[None, :], K + 1, axis=0))
                args_n.append(np.full(K + 1, n))
        keep = weights > 0
        out.append((np.asarray(stat(*args_pos, *args_n), float)[keep], weights[keep]))
    return out


def bca_acceleration(jack: list[tuple[np.ndarray, np.ndarray]]) -> float:
    """â of BCa from grouped jackknife values (Efron & Tibshirani eq. 14.15,
    summed over samples as in scipy.stats.bootstrap)."""
    nums, dens = 0.0, 0.0
    for values, w in jack:
        n = w.sum()
        u = (n - 1) * (np.sum(w * values) / n - values)
        nums += np.sum(w * u**3) / n**3
        dens += np.sum(w * u**2) / n**2
    return float(nums / 6.0 / dens**1.5) if dens > 0 else 0.0


def bca_levels(theta_hat: float, theta_b: np.ndarray, a_hat: float, level: float) -> tuple[float, float]:
    """The BCa quantile levels (α₁, α₂) (Efron & Tibshirani eq. 14.9-14.10).

    ẑ₀ = Φ⁻¹ of the share of bootstrap values below θ̂ (ties count half,
    as in scipy). Returns NaNs when the bootstrap distribution is degenerate.
    """
    B = theta_b.size
    pct = (np.count_nonzero(theta_b < theta_hat) + np.count_nonzero(theta_b <= theta_hat)) / (2 * B)
    if pct in (0.0, 1.0):  # every replicate on one side: ẑ₀ = ±inf, the levels are undefined
        return float("nan"), float("nan")
    z0 = special.ndtri(pct)
    z_a = special.ndtri((1 - level) / 2)
    out = []
    for z in (z_a, -z_a):
        num = z0 + z
        out.append(float(special.ndtr(z0 + num / (1 - a_hat * num))))
    return out[0], out[1]


def bootstrap_interval(
    theta_hat: float, theta_b: np.ndarray, method: str, level: float, a_hat: float = 0.0
) -> tuple[float, float, float]:
    """(ci_low, ci_high, se) from a bootstrap distribution.

    ``percentile``: quantiles (1−level)/2 and (1+level)/2; ``normal``:
    θ̂ ± z·se; ``bca``: quantiles at the BCa levels (needs ``a_hat``). se is
    the bootstrap standard deviation (ddof = 1). NaN values in ``theta_b``
    (undefined resamples) make everything NaN. Raises ValueError on an
    unknown method.
    """
    from scipy import stats  # imported here, not at the top (fairmon.transforms)

    theta_b = np.asarray(theta_b, dtype=float)
    if np.isnan(theta_b).any() or not np.isfinite(theta_hat):
        return float("nan"), float("nan"), float("nan")
    se = float(theta_b.std(ddof=1))
    method = method.removeprefix("bootstrap_")
    if method == "percentile":
        lo, hi = np.quantile(theta_b, [(1 - level) / 2, (1 + level) / 2])
    elif method == "normal":
        z = stats.norm.ppf(0.5 + level / 2)
        lo, hi = theta_hat - z * se, theta_hat + z * se
    elif method == "bca":
        a1, a2 = bca_levels(theta_hat, theta_b, a_hat, level)
        if not (np.isfinite(a1) and np.isfinite(a2)):
            return float("nan"), float("nan"), se
        lo, hi = np.quantile(theta_b, [a1, a2])
    else:
        raise ValueError(f"unknown bootstrap interval {method!r}")
    return float(lo), float(hi), se


def single_arm_bootstrap(
    a: np.ndarray,
    n_rec: int,
    b: np.ndarray,
    n_rand: int,
    *,
    method: str,
    level: float,
    B: int,
    rng: np.random.Generator,
    clusters: tuple = (None, None),
) -> dict:
    """Bootstrap CIs of REO and every ΔU_k for one arm (seed 001 §4.3, Fig. 7).

    Resamples default and random traffic independently (multinomial on the
    count tables). ``clusters``: the (default, random) per-bucket sums
    (:class:`fairmon.transforms.reo.cluster.BucketSums`, or None): a clustered
    sample is resampled by whole buckets, and BCa's acceleration takes its
    leave-one-bucket-out jackknife; when both carry bucket ids, the union of
    their buckets is drawn once per replicate and left out one unit at a time
    from both (:func:`fairmon.transforms.reo.cluster.resample_together`), so a
    cluster with rows in both traffics is one unit, as in the joint sandwich.
    Returns {"reo": (lo, hi, se), "delta_U": [(lo, hi, se)] * K,
    "undefined": reason or None}; the intervals are NaN when some resample is
    undefined (a P_k = 0 draw), and "undefined" says how many.
    Raises ValueError on an unknown method.
    """
    if method not in BOOTSTRAP_METHODS:
        raise ValueError(f"unknown bootstrap method {method!r}; expected one of {BOOTSTRAP_METHODS}")
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    c_rec, c_rand = clusters
    together = resample_together([c_rec, c_rand], B, rng)  # one draw of the shared units, when keyed
    if together is not None:
        (ab, nb_rec), (bb, nb_rand) = together
    else:
        ab, nb_rec = (
            c_rec.resample(B, rng) if c_rec is not None else (resample_counts(a, n_rec, B, rng), np.full(B, n_rec))
        )
        bb, nb_rand = (
            c_rand.resample(B, rng) if c_rand is not None else (resample_counts(b, n_rand, B, rng), np.full(B, n_rand))
        )
    U_b = utilities(ab, nb_rec, bb, nb_rand)
    U = utilities(a[None], np.array([n_rec]), b[None], np.array([n_rand]))[0]
    samples = [(a, n_rec), (b, n_rand)]

    def jackknife(stat):
        if c_rec is None and c_rand is None:
            return grouped_jackknife(stat, samples)
        joint = leave_one_out_together([c_rec, c_rand])
        if joint is not None:  # one unit out of both samples at once
            (pos_q, n_q), (pos_p, n_p) = joint
            return [(np.asarray(stat(pos_q, pos_p, n_q, n_p), float), np.ones(n_q.size))]
        out = []  # leave one bucket (clustered sample) or one row (else) out of each sample in turn
        for j, cl in enumerate((c_rec, c_rand)):
            if cl is None:
                out.append(grouped_jackknife(stat, samples)[j])
                continue
            pos, n = cl.leave_one_out()
            other_pos, other_n = samples[1 - j]
            rep_pos = np.repeat(np.asarray(other_pos)[None, :], cl.G, axis=0)
            rep_n = np.full(cl.G, other_n)
            args = (pos, rep_pos, n, rep_n) if j == 0 else (rep_pos, pos, rep_n, n)
            out.append((np.asarray(stat(*args), float), np.ones(cl.G)))
        return out

    def interval(theta_hat, theta_b, stat):
        acc = bca_acceleration(jackknife(stat)) if method == "bootstrap_bca" else 0.0
        return bootstrap_interval(theta_hat, theta_b, method, level, acc)

    bad = int(np.count_nonzero(~np.isfinite(reo_rows(U_b))))
    out: dict = {
        "undefined": f"{bad} of {B} bootstrap resamples have P_k = 0 or no default positives (U or REO undefined): "
        "bootstrap interval undefined"
        if bad
        else None
    }
    out["reo"] = interval(float(reo_rows(U)), reo_rows(U_b), lambda p, q, n, m: reo_rows(utilities(p, n, q, m)))
    dU, dU_b = delta_u_rows(U), delta_u_rows(U_b)
    out["delta_U"] = [
        interval(float(dU[k]), dU_b[:, k], lambda p, q, n, m, k=k: delta_u_rows(utilities(p, n, q, m))[:, k])
        for k in range(len(a))
    ]
    # BCa's ẑ₀ = Φ⁻¹(share of replicates below θ̂) is ±inf when every replicate lies on one side
    which = (["REO"] if not np.isfinite(out["reo"][0]) else []) + [
        f"ΔU of group {k}" for k, x in enumerate(out["delta_U"]) if not np.isfinite(x[0])
    ]
    if out["undefined"] is None and which:
        out["undefined"] = (
            f"BCa undefined for {', '.join(which)}: every bootstrap replicate lies on one side of the estimate "
            "(bias correction ẑ₀ infinite; near parity REO's replicates all exceed it)"
        )
    return out
