"""Cluster-robust (sandwich) covariance of the positive shares Q̂ and P̂ when
logged rows share a request or a user (DESIGN §4.1 "Clustered rows").

The multinomial model of DESIGN §4.1 treats the n logged user–item pairs of
one traffic as independent. A request shows several items to one user and a
user returns all day, so positives cluster and the multinomial variance is too
small by the design effect. With clusters c = 1..C, a_{c,k} positives of group
k and n_c rows in cluster c, Q̂_k = Σ_c a_{c,k} / Σ_c n_c is a ratio estimator;
linearised, Q̂_k − Q_k ≈ (1/n) Σ_c (a_{c,k} − Q_k n_c), so the sandwich
(Liang & Zeger 1986; Cameron & Miller 2015 §2.3) is::

    Ĉov(Q̂_j, Q̂_k) = C/(C−1) · (1/n²) Σ_c e_{c,j} e_{c,k},  e_{c,k} = a_{c,k} − Q̂_k n_c

It needs only Σ_c a_{c,j} a_{c,k} (K×K), Σ_c a_{c,k} n_c (K) and Σ_c n_c².
fairmon's count stage sums rows and positives per cluster key and group in
the same scan that profiles the file (:mod:`fairmon.transforms.reo.cluster_keys`):
one key per cluster on a day of at most ``[estimation] cluster_exact_max``
clusters, so the sums and the sandwich are the exact per-cluster ones; on a
larger day one of G hash buckets (``cluster_buckets``), so the engine returns
at most G×K numbers per traffic, arm and attribute. Buckets are unions of
whole clusters, so the sum over buckets of e_b e_bᵀ adds only cross products
of distinct independent clusters, whose expectation is zero: the bucketed
sandwich is unbiased to first order with G − 1 degrees of freedom, and
G/(G−1) is its small-sample factor.

With one row per cluster (n_c = 1, a_{c,k} ∈ {0, 1}, one group per row) the
sandwich is (diag(Q) − QQᵀ)/n times n/(n−1): the multinomial covariance.

The cluster bootstrap resamples buckets with replacement (Davison & Hinkley
1997 §3.8), the union of several samples' buckets at once when they share
keys (:func:`resample_together`); the partition method of the A/B test assigns whole buckets to
folds; the BCa acceleration takes the leave-one-bucket-out jackknife.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass

import numpy as np
import polars as pl


@dataclass(frozen=True)
class BucketSums:
    """Per-bucket sums of one sample (one traffic × arm × attribute).

    ``pos``: shape (G, K), positives of group k among the rows whose cluster
    hashed to bucket g; ``rows``: shape (G,), rows in bucket g (all groups,
    so ``rows.sum()`` is the sample's n); ``ids`` (G,) the bucket labels
    (the count stage's ``cbucket``), or None. Only non-empty buckets are kept.
    Raises ValueError on shape mismatch or negative counts.
    """

    pos: np.ndarray
    rows: np.ndarray
    ids: np.ndarray | None = None

    def __post_init__(self) -> None:
        pos = np.asarray(self.pos, dtype=float)
        rows = np.asarray(self.rows, dtype=float)
        if pos.ndim != 2 or rows.shape != (pos.shape[0],):
            raise ValueError(f"pos must be (G, K) and rows (G,), got {pos.shape} and {rows.shape}")
        if (pos < 0).any() or (rows < 0).any() or (pos.sum(axis=1) > rows + 1e-9).any():
            raise ValueError("bucket sums must be non-negative with positives ≤ rows")
        ids = None if self.ids is None else np.asarray(self.ids)
        if ids is not None and (ids.shape != rows.shape or np.unique(ids).size != ids.size):
            raise ValueError(f"ids must be {rows.shape} distinct bucket labels, got shape {ids.shape}")
        keep = rows > 0
        object.__setattr__(self, "pos", pos[keep])
        object.__setattr__(self, "rows", rows[keep])
        object.__setattr__(self, "ids", None if ids is None else ids[keep])

    def log_share_influence(self) -> np.ndarray:
        """z, shape (G, K): bucket g's linearised contribution to log Q̂,
        z_{g,k} = e_{g,k}/(n Q̂_k) (module docstring), without the small-sample
        factor; :func:`joint_log_factors` aligns several samples' on bucket ids."""
        share, e = self._residuals()
        with np.errstate(divide="ignore", invalid="ignore"):
            return e / (self.n * share)

    @property
    def G(self) -> int:
        """Number of non-empty buckets."""
        return int(self.rows.size)

    @property
    def n(self) -> float:
        """Rows in the sample."""
        return float(self.rows.sum())

    def share_covariance(self) -> np.ndarray:
        """Cluster-robust Ĉov(Q̂) of the positive shares, shape (K, K) (module
        docstring). NaN when fewer than 2 buckets are non-empty."""
        K = self.pos.shape[1]
        if self.G < 2 or self.n == 0:
            return np.full((K, K), np.nan)
        share, e = self._residuals()
        return self.G / (self.G - 1) * (e.T @ e) / self.n**2

    def _residuals(self) -> tuple[np.ndarray, np.ndarray]:
        """(Q̂ (K,), e (G, K)) with e_{g,k} = a_{g,k} − Q̂_k n_g (module docstring)."""
        share = self.pos.sum(axis=0) / self.n
        return share, self.pos - np.outer(self.rows, share)

    def log_share_covariance(self) -> np.ndarray:
        """Ĉov(log Q̂) = D⁻¹ Ĉov(Q̂) D⁻¹ with D = diag(Q̂), shape (K, K); inf/NaN
        entries where a Q̂_k is 0 (the delta method is undefined there)."""
        share = self.pos.sum(axis=0) / self.n if self.n else np.full(self.pos.shape[1], np.nan)
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.share_covariance() / np.outer(share, share)

    def log_share_factor(self) -> np.ndarray:
        """Z, shape (G, K), with Zᵀ Z = :meth:`log_share_covariance`:
        Z_{g,k} = √(G/(G−1)) · e_{g,k} / (n Q̂_k). A quadratic form gᵀ Ĉov(log Q̂) g
        is then ‖Z g‖², O(G·K) instead of O(K²) per form (G ≪ K with many
        groups). NaN when fewer than 2 buckets are non-empty; inf/NaN columns
        where a Q̂_k is 0."""
        K = self.pos.shape[1]
        if self.G < 2 or self.n == 0:
            return np.full((max(self.G, 1), K), np.nan)
        share, e = self._residuals()
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.sqrt(self.G / (self.G - 1)) * e / (self.n * share)

    def resample(self, B: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """B cluster-bootstrap replicates: buckets drawn with replacement.
        Returns (positives (B, K), rows (B,))."""
        times = _draw_times(self.G, B, rng)
        return replicate_sums(times, self.pos), times @ self.rows

    def folds(self, M: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Whole buckets split at random into M folds of near-equal bucket
        count (the A/B partition method on clustered rows). Returns
        (positives (M, K), rows (M,)). Raises ValueError when G < M."""
        if self.G < M:
            raise ValueError(f"{self.G} non-empty buckets cannot fill {M} folds")
        fold = rng.permutation(self.G) % M
        pos = np.zeros((M, self.pos.shape[1]))
        for g, m in enumerate(fold.tolist()):  # each bucket added to its fold in bucket order, as np.add.at
            pos[m] += self.pos[g]  # does (the same bits), a row at a time: ~10x its speed
        return pos, np.bincount(fold, weights=self.rows, minlength=M).astype(float)

    def leave_one_out(self) -> tuple[np.ndarray, np.ndarray]:
        """Leave-one-bucket-out totals for the jackknife: (positives (G, K), rows (G,))."""
        return self.pos.sum(axis=0)[None, :] - self.pos, self.n - self.rows


def replicate_sums(times: np.ndarray, pos: np.ndarray, single: bool = False) -> np.ndarray:
    """``times @ pos``: the replicates' sums (B, K) from the draw counts
    (B, G) and the units' sums (G, K). In single precision when that is
    exact (float32 holds every integer below 2²⁴ exactly, and every partial
    sum of these non-negative integer products is at most the total over
    the draws of a replicate, ≤ (its draws) · max(pos)), so the result is the
    same bits as the double product at about half its cost; in double
    precision otherwise. Float64, unless ``single``: then an exact product
    stays float32 (the same integers), for a caller whose next operation
    casts it anyway (a division into float64 reads it once instead of a
    cast and then the division)."""
    draws = float(times.sum(axis=1).max(initial=0)) if times.size else 0.0
    small = pos.size and draws * float(pos.max(initial=0.0)) < 2**24 and (times >= 0).all()
    if small and np.array_equal(pos, np.round(pos)) and (pos >= 0).all():
        product = times.astype(np.float32) @ pos.astype(np.float32)
        return product if single else product.astype(np.float64)
    return times @ pos


def _draw_times(G: int, B: int, rng: np.random.Generator) -> np.ndarray:
    """How often each of G units is drawn in each of B resamples of G draws
    with replacement, shape (B, G); one product with it then gives the
    replicates' sums, never a (B, G, K) array (4 GB at K = 4,096)."""
    idx = rng.integers(0, G, size=(B, G))
    return np.bincount((idx + G * np.arange(B)[:, None]).ravel(), minlength=B * G).reshape(B, G)


def _aligned(samples: list[BucketSums | None]) -> tuple[list[tuple[np.ndarray, np.ndarray] | None], int] | None:
    """Each sample's (positives (G_u, K), rows (G_u,)) on the union of the
    samples' bucket ids (zeros where a sample has no row in a unit; None for
    an absent sample) and G_u; None unless at least two samples are present
    and all present ones carry ids."""
    present = [s for s in samples if s is not None]
    if len(present) < 2 or any(s.ids is None for s in present):
        return None
    union = np.unique(np.concatenate([s.ids for s in present]))
    out: list[tuple[np.ndarray, np.ndarray] | None] = []
    for s in samples:
        if s is None:
            out.append(None)
            continue
        at = np.searchsorted(union, s.ids)
        pos, rows = np.zeros((union.size, s.pos.shape[1])), np.zeros(union.size)
        pos[at], rows[at] = s.pos, s.rows
        out.append((pos, rows))
    return out, int(union.size)


def resample_together(
    samples: list[BucketSums | None], B: int, rng: np.random.Generator, single: bool = False
) -> list[tuple[np.ndarray, np.ndarray] | None] | None:
    """B cluster-bootstrap replicates of several samples that share cluster
    keys (default and random traffic, both arms of an A/B test): units of the
    union of their bucket ids are drawn with replacement once per replicate,
    and each sample takes its own rows of every drawn unit, so a user with
    rows in both traffics moves both in the same replicate, as the joint
    sandwich has it (:func:`joint_log_factors`; Davison & Hinkley 1997 §3.8,
    resampling the cluster, not the sample). Returns per sample
    (positives (B, K), rows (B,)), None for an absent sample; None when
    fewer than two samples are present or one lacks ids (resample each
    alone then, :meth:`BucketSums.resample`). ``single``: positives as
    :func:`replicate_sums` gives them with ``single``."""
    joint = _aligned(samples)
    if joint is None:
        return None
    parts, G = joint
    times = _draw_times(G, B, rng)
    return [None if p is None else (replicate_sums(times, p[0], single), times @ p[1]) for p in parts]


def leave_one_out_together(
    samples: list[BucketSums | None],
) -> list[tuple[np.ndarray, np.ndarray] | None] | None:
    """Leave-one-unit-out totals of samples sharing cluster keys, the same
    unit left out of every sample (BCa's jackknife for
    :func:`resample_together`): per sample (positives (G_u, K), rows
    (G_u,)), None for an absent sample; None as :func:`resample_together`."""
    joint = _aligned(samples)
    if joint is None:
        return None
    return [None if p is None else (p[0].sum(axis=0)[None, :] - p[0], p[1].sum() - p[1]) for p in joint[0]]


def cluster_units(samples: list[BucketSums | None]) -> tuple[int | None, str]:
    """The units a cluster-robust variance over ``samples`` sums over, and
    how they were formed (the ``n_clusters`` and ``cluster_sums`` columns):
    (distinct keys over the samples, ``"exact"``) when every sample carries
    per-cluster keys (negative ids, sql/impressions_bucket.sql), (non-empty
    hash buckets of whole clusters, ``"hashed"``) otherwise, (None,
    ``"none"``) when no sample is clustered. Keys shared by samples count
    once (a user in both traffics is one unit, :func:`joint_log_factors`);
    without ids, the samples' units add up. Its variance has units − 1
    degrees of freedom (Cameron & Miller 2015 §2.3)."""
    present = [s for s in samples if s is not None]
    if not present:
        return None, "none"
    if any(s.ids is None for s in present):
        return sum(s.G for s in present), "hashed"
    ids = np.unique(np.concatenate([s.ids for s in present]))
    return int(ids.size), "exact" if ids.size and (ids < 0).all() else "hashed"


def sandwich_df(samples: list[BucketSums | None]) -> float:
    """Degrees of freedom of the cluster-robust variance over ``samples``
    (for the few-cluster t quantile, :func:`fairmon.transforms.reo.reo_math.few_cluster_scale`):
    units − 1 of the joint sandwich when every present sample carries ids
    (:func:`cluster_units`), the sum of each sample's G − 1 otherwise (one
    clustered sample beside multinomial ones: its own G − 1, conservative);
    inf when no sample is clustered (normal quantiles)."""
    present = [s for s in samples if s is not None]
    if not present:
        return float("inf")
    if all(s.ids is not None for s in present):
        return float(cluster_units(present)[0] - 1)
    return float(sum(s.G - 1 for s in present))


def joint_log_factors(samples: list[BucketSums]) -> tuple[list[np.ndarray], int] | None:
    """The samples' bucket influences aligned on bucket ids, for a sandwich
    that keeps the covariance between samples.

    A cluster (a user) with rows in default and in random traffic moves Q̂
    and P̂ together, so log Û = log Q̂ − log P̂ has Cov = V_Q + V_P − C − Cᵀ
    with C = Σ_c z^Q_c z^Pᵀ_c ≠ 0. The count stage hashes a cluster id to the
    same bucket in every traffic, so the bucket is the unit: the joint
    sandwich is G_u/(G_u − 1) Σ_g h_g h_gᵀ with h_g the bucket's summed
    influence on the statistic over all samples (Liang & Zeger 1986; Cameron
    & Miller 2015 §2.3, clustering shared by the equations of a system).
    Buckets holding no common cluster add cross products of independent
    clusters, of mean zero, so the form stays unbiased when ids do not span
    traffics. Returns ([√(G_u/(G_u−1))·z_s aligned to the union of bucket ids,
    shape (G_u, K)] per sample, G_u), or None when a sample lacks ids or G_u < 2.
    """
    if not samples or any(s.ids is None for s in samples):
        return None
    union = np.unique(np.concatenate([s.ids for s in samples]))
    G = union.size
    if G < 2:
        return None
    out = []
    for s in samples:
        Z = np.zeros((G, s.pos.shape[1]))
        Z[np.searchsorted(union, s.ids)] = s.log_share_influence()
        out.append(np.sqrt(G / (G - 1)) * Z)
    return out, G


def ratio_log_covariance(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """Cluster-robust Ĉov(log r̂) of per-group ratios r̂_k = Σ_b num_{b,k} / Σ_b den_{b,k}
    (e.g. user-side precision n_pos_k / n_k, seed 001 App. H.2), shape (G, K)
    per-bucket sums in, (K, K) out. Linearised r̂_k − r_k ≈ Σ_b e_{b,k}/D_k with
    e_{b,k} = num_{b,k} − r̂_k den_{b,k}, so (same sandwich as the module's)::

        Ĉov(log r̂_j, log r̂_k) = G/(G−1) Σ_b e_{b,j} e_{b,k} / (N_j N_k),  N = Σ_b num_b

    With one row per cluster this is the binomial (1 − r_k)/(r_k n_k) on the
    diagonal and 0 off it. NaN when fewer than 2 buckets; inf where N_k = 0.
    Raises ValueError when the shapes differ."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if num.shape != den.shape or num.ndim != 2:
        raise ValueError(f"num and den must both be (G, K), got {num.shape} and {den.shape}")
    keep = den.sum(axis=1) > 0
    num, den = num[keep], den[keep]
    G, K = num.shape
    if G < 2:
        return np.full((K, K), np.nan)
    N, D = num.sum(axis=0), den.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = num - den * (N / D)
        return G / (G - 1) * (e.T @ e) / np.outer(N, N)


def sums_from_rows(bucket: np.ndarray, group: np.ndarray, y: np.ndarray, K: int) -> BucketSums:
    """:class:`BucketSums` of row-level data, the sums the count stage makes in
    SQL (tests and benches). Inputs, shape (n,): ``bucket`` non-negative
    integer bucket of each row's cluster, ``group`` in 0..K−1 (−1: a row of
    no listed group, counted in the bucket's rows only), ``y`` the 0/1 label."""
    bucket, group, y = (np.asarray(x) for x in (bucket, group, y))
    ids, inv = np.unique(bucket, return_inverse=True)
    rows = np.bincount(inv, minlength=ids.size).astype(float)
    pos = np.zeros((ids.size, K))
    hit = (y.astype(bool)) & (group >= 0)
    np.add.at(pos, (inv[hit], group[hit]), 1.0)
    return BucketSums(pos, rows, ids)


def bucket_sums(
    buckets: pl.DataFrame | None,
    traffic: str,
    arm: str,
    attribute: str,
    groups: list[str],
    n_total: int,
    value: str = "n_pos",
) -> tuple[BucketSums | None, str | None]:
    """The per-bucket sums of one sample (this module) from the
    per-bucket counts of the count stage (columns traffic, arm, attribute,
    group, cbucket, n, n_pos; one day). ``groups`` orders the columns of
    ``pos`` ('(missing)' counts in the bucket rows only); ``n_total`` is the
    sample's row count from group_counts. ``value``: the per-group column
    summed into ``pos`` (``n_pos``; ``n`` for exposure shares, RSP).

    Returns (sums, None); (None, None) when the sample's rows carry no cluster
    bucket (independent rows); (None, reason) when only some do (some input
    files lack the cluster id): no robust variance can be formed then.
    """
    if buckets is None or buckets.is_empty():
        return None, None
    key = (id(buckets), traffic, arm, attribute, tuple(groups), n_total, value)
    with _SUMS_LOCK:
        hit = _SUMS.get(key)
    if hit is not None and hit[0]() is buckets:
        return hit[1]
    out = _bucket_sums(buckets, traffic, arm, attribute, groups, n_total, value)
    with _SUMS_LOCK:  # days may estimate in threads (a batch's concurrency)
        while len(_SUMS) >= 16:
            _SUMS.pop(next(iter(_SUMS)))
        _SUMS[key] = (weakref.ref(buckets), out)
    return out


#: The last samples' :func:`bucket_sums` (immutable results), keyed by the
#: day's bucket frame (held weakly: a freed frame's id may come back) and the
#: sample: REO per arm and the A/B pairs ask for the same samples of one day
#: (random traffic three times), ~40 ms a day each at K = 4,096.
_SUMS: dict[tuple, tuple[weakref.ref, tuple[BucketSums | None, str | None]]] = {}
_SUMS_LOCK = threading.Lock()


def _bucket_sums(
    buckets: pl.DataFrame,
    traffic: str,
    arm: str,
    attribute: str,
    groups: list[str],
    n_total: int,
    value: str,
) -> tuple[BucketSums | None, str | None]:
    """:func:`bucket_sums` computed."""
    sel = buckets.filter((pl.col("traffic") == traffic) & (pl.col("arm") == arm) & (pl.col("attribute") == attribute))
    if sel.is_empty():
        return None, None
    ids, inv = keys_and_index(sel.get_column("cbucket").to_numpy())
    rows = np.bincount(inv, weights=sel.get_column("n").to_numpy(), minlength=ids.size)
    if int(round(rows.sum())) != n_total:
        return None, (
            f"{traffic} traffic: {int(rows.sum())} of {n_total} rows carry a cluster id (some input files lack it): "
            "the cluster-robust variance is undefined"
        )
    k = _group_index(sel.get_column("group"), groups)
    keep = k >= 0
    K = len(groups)
    # one bincount over the flat (bucket, group) cell, not np.add.at (much slower at thousands of
    # groups); integer counts, so the sums are exact in any order
    cells = inv[keep].astype(np.int64) * K + k[keep]
    pos = np.bincount(cells, weights=sel.get_column(value).to_numpy()[keep], minlength=ids.size * K)
    return BucketSums(pos.reshape(ids.size, K), rows, ids), None


def keys_and_index(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_inverse=True)`` for integer cluster keys
    (n,): the sorted distinct keys and each row's position among them. Keys
    within a range of a few times their count (hash buckets 0..G−1, or the
    per-cluster keys of few clusters) are found by one count over the range,
    O(n) instead of a sort (the same arrays); others, and keys of another
    type, by ``np.unique``. Raises nothing."""
    if keys.size == 0 or keys.dtype.kind not in "iu" or keys.dtype == np.uint64:
        return np.unique(keys, return_inverse=True)
    lo = int(keys.min())
    span = int(keys.max()) - lo + 1
    if span > 4 * keys.size + 1024:
        return np.unique(keys, return_inverse=True)
    offset = keys.astype(np.int64) - lo  # in 64 bits: no wrap-around for narrow integer types
    present = np.bincount(offset, minlength=span) > 0
    return (np.flatnonzero(present) + lo).astype(keys.dtype), (np.cumsum(present) - 1)[offset]


def group_arrays(frame: pl.DataFrame, groups: list[str]) -> tuple[np.ndarray, np.ndarray, int]:
    """Rows n_k and positives (K,) int64 of each of ``groups`` (0 without a row) from one sample's
    group counts (columns group, n, n_pos; a row per group), and the sample's total rows ('(missing)'
    included). By column: thousands of groups a sample. Raises ValueError on a repeated or null entry."""
    n, pos = np.zeros(len(groups), np.int64), np.zeros(len(groups), np.int64)
    if frame.height == 0:
        return n, pos, 0
    if len(set(groups)) < len(groups) or frame.get_column("group").is_duplicated().any():
        raise ValueError("group counts must have one row per group, and groups be distinct")
    if frame.select(pl.col("n").is_null().any() | pl.col("n_pos").is_null().any()).item():
        raise ValueError("group counts have a null n or n_pos")
    k = _group_index(frame.get_column("group"), groups)
    keep, n_all = k >= 0, frame.get_column("n").to_numpy().astype(np.int64)
    n[k[keep]], pos[k[keep]] = n_all[keep], frame.get_column("n_pos").to_numpy().astype(np.int64)[keep]
    return n, pos, int(n_all.sum())


def _group_index(group: pl.Series, groups: list[str]) -> np.ndarray:
    """Each row's position in ``groups`` (int64), -1 for a group not listed or null.
    Distinct ``groups`` (every caller's) are the categories of an Enum the
    rows are cast to, whose codes are the positions (cheaper than a replace
    or a dict at many groups: bench/README.md); with a repeated group it takes its
    last position, as a dict has it."""
    if len(set(groups)) < len(groups):
        index = dict(zip(groups, range(len(groups))))
        return group.replace_strict(index, default=-1, return_dtype=pl.Int64).fill_null(-1).to_numpy()
    codes = group.cast(pl.String).cast(pl.Enum(groups), strict=False).to_physical()
    return codes.cast(pl.Int64).fill_null(-1).to_numpy()
