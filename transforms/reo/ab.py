"""A/B differences in fairness between experiment arms (seed 001 App. D-G).

For a control arm C and a treatment arm T measured against the same random
traffic (shared P̂), the quantities are D_REO = REO_T − REO_C and
D_k = ΔU_k^T − ΔU_k^C. Methods (DESIGN §4.1):

* ``delta`` (default): joint delta method through the shared P̂,
  Var(D) = Σ g_T²/(Q_T n_T) + Σ g_C²/(Q_C n_C) + Σ (g_T − g_C)²/(P n_rand),
  with g = ∂metric/∂log U (see :mod:`fairmon.transforms.reo.estimate`);
* ``delta_paper``: Algorithm 2 as printed, SE = sqrt(SE_T² + SE_C²) with the
  paper's diagonal single-arm SEs; it ignores that both arms share P̂, so it
  is far too wide when both arms favour the same group and too narrow
  (under-covers, DESIGN §4.1) when a treatment flips which group is favoured —
  kept for comparison with the paper, not as a default;
* ``partition``: Algorithm 3, the rows of each arm and of the random traffic
  split at random into M folds (multivariate hypergeometric on the count
  tables), the metric computed per fold; fold m of both arms uses random
  fold m, so the per-fold differences are paired: a paired t on M − 1
  degrees of freedom (the unpaired Welch form under-covers when a treatment
  flips the favoured group, DESIGN §4.1);
* ``bootstrap``: Algorithm 4, both arms and the shared random traffic
  resampled together (multinomial on the count tables), B replicates;
  percentile CI for D_k; for D_REO the bootstrap-t, studentized by each
  replicate's delta-method SE
  (:func:`fairmon.transforms.reo.ab_bootstrap.replicate_block_stats`);
  SE = bootstrap sd, and the p-value that inverts the interval,
  2·min(F*(0), 1 − F*(0)) of the replicates (for D_REO of D̂ − t*·SE;
  never a normal approximation).

Every method reports the same point estimate (the full-data difference); they
differ in SE, CI and p-value, and each p-value is the smallest level whose
interval excludes 0. Normal CIs use z, paired-t CIs use t_{M−1}.

D_REO by regime (:mod:`fairmon.transforms.reo.ab_reo`): when an
arm is near parity, REO's kink breaks every method above, and D_REO's row of
each (not ``delta_paper``, a comparison method) is the projection of the
arms' parity-aware intervals, with its p-value and a reason naming the
regime; far from parity the ``delta`` interval is centred at the second-order
bias-corrected difference. ``partition`` publishes no D_REO interval (its
per-fold REO misstates the SE; reason in ``PARTITION_WHY`` of that module),
only D_k.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fairmon.transforms.reo.ab_bootstrap import bootstrap_difference_stats
from fairmon.transforms.reo.ab_reo import arm_shapes, reo_rows_by_regime
from fairmon.transforms.reo.bootstrap import delta_u_rows, reo_rows, utilities
from fairmon.transforms.reo.cluster import BucketSums, joint_log_factors, sandwich_df
from fairmon.transforms.reo.estimate import (
    delta_u_factor,
    delta_u_log_jacobian,
    log_utility_variance,
    relative_utilities,
    reo_log_gradient,
    z_value,
)
from fairmon.transforms.reo.reo_math import few_cluster_scale, paired_fold_se, split_counts

AB_METHODS = ("delta", "delta_paper", "partition", "bootstrap")


@dataclass(frozen=True)
class ABEstimate:
    """One row of ``reo_ab``: metric is "reo" or "delta_U:<group>"."""

    metric: str
    diff: float
    se: float
    ci_low: float
    ci_high: float
    p_value: float
    method: str
    df: float = float("nan")
    reason: str | None = None
    design_effect: float = 1.0


#: :class:`ABEstimate`'s fields in order: the columns of ``ab_estimates(..., columns=True)``.
AB_FIELDS = ("metric", "diff", "se", "ci_low", "ci_high", "p_value", "method", "df", "reason", "design_effect")
#: The text columns of a block (lists); the others are float64 arrays.
_TEXT_FIELDS = ("metric", "method", "reason")
_NAN = float("nan")


def _block(names, diff, method, *, se=_NAN, lo=_NAN, hi=_NAN, p=_NAN, df=_NAN, reason=None, effect=1.0) -> dict:
    """One method's rows by column (:data:`AB_FIELDS`): numbers as float64 arrays, text as
    lists, a scalar given for every row. Thousands of rows a pair at K = 4,096: an
    :class:`ABEstimate` each cost ~30 ms a day."""
    n = len(names)

    def col(x) -> np.ndarray:
        return np.array(np.broadcast_to(np.asarray(x, float), (n,)))

    text = {
        "metric": list(names),
        "method": [method] * n,
        "reason": reason if isinstance(reason, list) else [reason] * n,
    }
    nums = {"diff": diff, "se": se, "ci_low": lo, "ci_high": hi, "p_value": p, "df": df, "design_effect": effect}
    return {f: text[f] if f in text else col(nums[f]) for f in AB_FIELDS}


def _estimates(cols: dict) -> list[ABEstimate]:
    """:class:`ABEstimate` rows of a column block (:func:`_block`), numbers as Python floats."""
    return [ABEstimate(*row) for row in zip(*(c if isinstance(c, list) else c.tolist() for c in cols.values()))]


def _metrics(U: np.ndarray) -> np.ndarray:
    """(..., K) utilities -> (..., 1 + K): REO then ΔU_1..ΔU_K."""
    return np.concatenate([reo_rows(U)[..., None], delta_u_rows(U)], axis=-1)


def metric_gradients(U: np.ndarray) -> np.ndarray:
    """Dense gradients of the A/B metrics, shape (1 + K, K) for utilities U (K,):
    rows = ∂metric/∂log U_j for REO, then each ΔU_k (seed 001 Algorithm 1's G).
    For checks and small K: :func:`metric_quad_diag` and
    :func:`metric_quad_factor` never form it."""
    return np.vstack([reo_log_gradient(U)[None, :], delta_u_log_jacobian(U)])


def metric_quad_diag(x: np.ndarray, U_T: np.ndarray, U_C: np.ndarray | None = None) -> np.ndarray:
    """g_m diag(x) g_mᵀ for every metric row g_m of G = metric_gradients(U_T) − metric_gradients(U_C)
    (U_C None: G = metric_gradients(U_T)), shape (1 + K,), in O(K): never the (1 + K) × K G.

    With a = 1 + ΔU, the ΔU rows are A = diag(a) − aaᵀ/K, so row k of A_T − A_C
    is δ_kj d_k − (aT_k aT_j − aC_k aC_j)/K with d = aT − aC, and
    Σ_j (row k)_j² x_j = d_k² x_k − 2 d_k x_k (aT_k² − aC_k²)/K
    + (aT_k² S_TT − 2 aT_k aC_k S_TC + aC_k² S_CC)/K², S_XY = Σ_j aX_j aY_j x_j.
    Inputs: x (K,) per-group variances of log Û (e.g. 1/(Q_k n)), U_T and U_C
    (K,) utilities. Source: seed 001 Algorithms 1-2 (joint delta method,
    DESIGN §4.1)."""
    K = U_T.size
    aT = 1.0 + relative_utilities(U_T)
    aC = 1.0 + relative_utilities(U_C) if U_C is not None else np.zeros(K)
    g = reo_log_gradient(U_T) - (reo_log_gradient(U_C) if U_C is not None else 0.0)
    d = aT - aC
    s_tt, s_tc, s_cc = (aT * aT) @ x, (aT * aC) @ x, (aC * aC) @ x
    du = d * d * x - 2 * d * x * (aT * aT - aC * aC) / K + (aT * aT * s_tt - 2 * aT * aC * s_tc + aC * aC * s_cc) / K**2
    return np.concatenate([[(g * g) @ x], du])


def metric_quad_factor(Z: np.ndarray, U_T: np.ndarray, U_C: np.ndarray | None = None) -> np.ndarray:
    """:func:`metric_quad_diag` for a covariance ZᵀZ of log Û (Z (G, K), the
    buckets' factor, :meth:`BucketSums.log_share_factor`): ‖Z g_mᵀ‖² for
    every metric row, shape (1 + K,), in O(G·K) (:func:`delta_u_factor`).
    Source: the sandwich of transforms/reo/cluster.py in seed 001 Algorithm 2."""
    g = reo_log_gradient(U_T) - (reo_log_gradient(U_C) if U_C is not None else 0.0)
    B = delta_u_factor(U_T, Z) - (delta_u_factor(U_C, Z) if U_C is not None else 0.0)
    return np.concatenate([[float(np.sum((Z @ g) ** 2))], (B * B).sum(axis=0)])


def _normal_rows(
    metrics, diffs: np.ndarray, ses: np.ndarray, level, method, reason=None, df: float = float("inf")
) -> dict:
    """One normal-theory row per metric (diff ± z·se, two-sided p), the
    quantiles and tail probabilities computed once for all metrics (one
    attribute can have thousands of groups). A finite ``df`` (a
    cluster-robust SE over df + 1 units) takes t_{df} in place of the normal
    for both, so the p-value still inverts the interval, and is published
    (Cameron & Miller 2015 §VI.C)."""
    from scipy import stats  # imported here, not at the top (fairmon.transforms)

    diffs, ses = np.asarray(diffs, float), np.asarray(ses, float)
    finite_df = bool(np.isfinite(df))
    z = z_value(level) * few_cluster_scale(level, df)  # NaN below 1 df: those rows are NaN with a reason
    ok = np.isfinite(diffs) & np.isfinite(ses) & (ses > 0) & (df >= 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = 2 * (stats.t.sf(np.abs(diffs) / ses, df) if finite_df else stats.norm.sf(np.abs(diffs) / ses))
    nan = float("nan")
    row_df = float(df) if finite_df else nan
    with np.errstate(invalid="ignore", over="ignore"):
        lo, hi = np.where(ok, diffs - z * ses, nan), np.where(ok, diffs + z * ses, nan)
    why = [reason if good else (reason or "SE undefined") for good in ok.tolist()]
    se, pv, row_dfs = np.where(ok, ses, nan), np.where(ok, p, nan), np.where(ok, row_df, nan)
    return _block(metrics, diffs, method, se=se, lo=lo, hi=hi, p=pv, df=row_dfs, reason=why)


def ab_estimates(
    groups: list[str],
    a_T: np.ndarray,
    n_T: int,
    a_C: np.ndarray,
    n_C: int,
    b: np.ndarray,
    n_rand: int,
    *,
    methods: tuple[str, ...] = ("delta",),
    level: float = 0.95,
    folds: int = 10,
    n_boot: int = 1000,
    rng: np.random.Generator | None = None,
    clusters: tuple[BucketSums | None, BucketSums | None, BucketSums | None] = (None, None, None),
    cluster_note: str | None = None,
    columns: bool = False,
) -> list[ABEstimate] | dict:
    """D_REO and D_k for one (control, treatment) pair with every requested method.

    Inputs: positives per group in the treatment arm ``a_T`` (of n_T default
    rows), the control arm ``a_C`` (of n_C) and the shared random-traffic
    window ``b`` (of n_rand); shapes (K,). Returns one :class:`ABEstimate` per
    method and metric (REO first, then ΔU of each group in ``groups`` order).
    Undefined inputs (P_k = 0, Q_k = 0, K < 2) give NaN rows with a reason.
    Clustered rows (transforms/reo/cluster.py): ``clusters`` = per-bucket sums of
    (treatment, control, random) samples, each or None. ``delta`` then uses
    the cluster-robust covariances, ``partition`` assigns whole buckets to
    folds, ``bootstrap`` resamples buckets, ``delta_paper`` is NaN with a
    reason; every row carries ``design_effect`` = robust ÷ multinomial
    variance of its difference (delta method). ``cluster_note`` (no robust
    variance can be formed) makes every row's interval NaN with that reason.
    ``columns``: the same rows as a dict of columns (:data:`AB_FIELDS`:
    float64 arrays and lists of text), not objects (the ``reo_ab`` table's way).
    Raises ValueError for an unknown method.
    Source: seed 001 Algorithms 2-4; joint delta method per DESIGN §4.1.
    """
    unknown = set(methods) - set(AB_METHODS)
    if unknown:
        raise ValueError(f"unknown A/B method(s) {sorted(unknown)}; expected {AB_METHODS}")
    rng = rng or np.random.default_rng(0)
    a_T, a_C, b = (np.asarray(x, np.int64) for x in (a_T, a_C, b))
    names = ["reo", *[f"delta_U:{g}" for g in groups]]
    K = len(groups)
    U_T = utilities(a_T[None], np.array([n_T]), b[None], np.array([n_rand]))[0]
    U_C = utilities(a_C[None], np.array([n_C]), b[None], np.array([n_rand]))[0]
    reason = _undefined_reason(K, a_T, n_T, a_C, n_C, b, n_rand, U_T, U_C, methods, folds, clusters, cluster_note)
    diff = _metrics(U_T) - _metrics(U_C) if K >= 1 else np.array([])
    if reason:
        d = np.atleast_1d(diff)
        d, effect = np.where(np.isfinite(d), d, np.nan), _NAN if any(c is not None for c in clusters) else 1.0
        blocks = [_block(names[: d.size], d, meth, reason=reason, effect=effect) for meth in methods]
        return _joined(blocks, columns)

    Q_T, Q_C, P = a_T / n_T, a_C / n_C, b / n_rand
    c_T, c_C, c_R = clusters
    clustered = any(c is not None for c in clusters)
    var, deff = _difference_variances((Q_T, Q_C, P), (n_T, n_C, n_rand), U_T, U_C, clusters, len(names))
    out: list[dict] = []  # one block of columns (_block) per method
    for method in methods:
        if method == "delta":
            out.append(_normal_rows(names, diff, np.sqrt(var), level, method, df=sandwich_df(list(clusters))))
        elif method == "delta_paper" and clustered:
            why = "delta_paper assumes independent rows: undefined when rows are clustered"
            out.append(_block(names[: len(diff)], diff[: len(names)], method, reason=why))
        elif method == "delta_paper":
            se_T = np.sqrt(metric_quad_diag(log_utility_variance(Q_T, P, n_T, n_rand, "delta_paper"), U_T))
            se_C = np.sqrt(metric_quad_diag(log_utility_variance(Q_C, P, n_C, n_rand, "delta_paper"), U_C))
            out.append(_normal_rows(names, diff, np.hypot(se_T, se_C), level, method))
        elif method == "partition":
            fT, nT = c_T.folds(folds, rng) if c_T is not None else split_counts(a_T, n_T, folds, rng)
            fC, nC = c_C.folds(folds, rng) if c_C is not None else split_counts(a_C, n_C, folds, rng)
            fR, nR = c_R.folds(folds, rng) if c_R is not None else split_counts(b, n_rand, folds, rng)
            out.append(_partition_rows(names, diff, (fT, nT), (fC, nC), (fR, nR), level, method))
        elif method == "bootstrap":
            out.append(
                _bootstrap_rows(names, diff, (a_T, n_T), (a_C, n_C), (b, n_rand), clusters, level, n_boot, rng, method)
            )
    arms = arm_shapes((Q_T, Q_C, P), (n_T, n_C, n_rand), U_T, U_C, clusters, level)
    # only D_REO's rows (the first of each method) change by regime, in the methods' order as one list
    reo = [_estimates({f: c[:1] for f, c in blk.items()})[0] for blk in out]
    for blk, e in zip(out, reo_rows_by_regime(reo, arms, float(diff[0]), level, n_rand)):
        for f in AB_FIELDS:
            blk[f][0] = getattr(e, f)
    if clustered:  # the design effect is the data's, the same on every method's row of a metric
        by_metric = dict(zip(names, map(float, deff)))
        for blk in out:
            blk["design_effect"] = np.array([by_metric[m] for m in blk["metric"]], float)
    return _joined(out, columns)


def _joined(blocks: list[dict], columns: bool) -> list[ABEstimate] | dict:
    """The methods' blocks one after another: as columns, or as :class:`ABEstimate` rows."""
    if not blocks:
        cols: dict = {f: [] for f in AB_FIELDS}
    else:
        cols = {
            f: [x for b in blocks for x in b[f]] if f in _TEXT_FIELDS else np.concatenate([b[f] for b in blocks])
            for f in AB_FIELDS
        }
    return cols if columns else _estimates(cols)


def _undefined_reason(
    K: int,
    a_T: np.ndarray,
    n_T: int,
    a_C: np.ndarray,
    n_C: int,
    b: np.ndarray,
    n_rand: int,
    U_T: np.ndarray,
    U_C: np.ndarray,
    methods: tuple[str, ...],
    folds: int,
    clusters: tuple[BucketSums | None, BucketSums | None, BucketSums | None],
    cluster_note: str | None,
) -> str | None:
    """Why no A/B interval is defined (the first that applies), else None:
    K < 2, an empty sample or P_k = 0 (U undefined), Q_k = 0 in an arm (no
    delta variance), the caller's
    ``cluster_note``, or fewer cluster buckets than partition folds."""
    if K < 2:
        return "fewer than 2 groups"
    if min(n_T, n_C, n_rand) == 0 or (b == 0).any():
        return "P_k = 0 or an empty sample: U undefined"
    if (a_T == 0).any() or (a_C == 0).any():
        return "Q_k = 0 in an arm: SE undefined"
    if cluster_note:
        return cluster_note
    if any(c is not None and c.G < folds for c in clusters) and "partition" in methods:
        few = min(c.G for c in clusters if c is not None)
        return f"{few} non-empty cluster buckets: fewer than the {folds} partition folds"
    return None


def _difference_variances(
    shares: tuple[np.ndarray, np.ndarray, np.ndarray],
    sizes: tuple[int, int, int],
    U_T: np.ndarray,
    U_C: np.ndarray,
    clusters: tuple[BucketSums | None, BucketSums | None, BucketSums | None],
    n_metrics: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(Var of each difference, design effect), shapes (1 + K,), by the joint
    delta method (DESIGN §4.1): the treatment's, the control's and the shared
    random traffic's terms (the last with gradient G_T − G_C, since both arms
    share P̂). A bucketed sample contributes its cluster-robust quadratic form
    in place of the multinomial one; with bucket ids, the bucketed samples'
    influences are summed per shared bucket before squaring (joint sandwich,
    :func:`fairmon.transforms.reo.cluster.joint_log_factors`: a user in the
    treatment arm and in random traffic moves Q̂_T and P̂ together). The design
    effect is robust ÷ multinomial (1 without clustering). Source: seed 001
    Algorithm 2; Cameron & Miller (2015) §2.3."""
    (Q_T, Q_C, P), (n_T, n_C, n_rand) = shares, sizes
    var_mult = (
        metric_quad_diag(1 / (Q_T * n_T), U_T)
        + metric_quad_diag(1 / (Q_C * n_C), U_C)
        + metric_quad_diag(1 / (P * n_rand), U_T, U_C)
    )
    if not any(c is not None for c in clusters):
        return var_mult, np.ones(n_metrics)

    def quad(c: BucketSums | None, share: np.ndarray, n: int, U: np.ndarray, U_C=None) -> np.ndarray:
        """The rows' quadratic forms in V = ZᵀZ (buckets) or diag(1/(Q n))."""
        if c is None:
            return metric_quad_diag(1 / (share * n), U, U_C)
        return metric_quad_factor(c.log_share_factor(), U, U_C)

    c_T, c_C, c_R = clusters
    joint = joint_log_factors([c for c in clusters if c is not None])
    if joint is None or sum(c is not None for c in clusters) < 2:
        var = quad(c_T, Q_T, n_T, U_T) + quad(c_C, Q_C, n_C, U_C) + quad(c_R, P, n_rand, U_T, U_C)
        return var, var / var_mult
    # joint sandwich over shared buckets: h_g = Σ_samples ∂D/∂log(share)·z_g (cluster.joint_log_factors)
    Zs = iter(joint[0])
    g_T, g_C = reo_log_gradient(U_T), reo_log_gradient(U_C)
    h, H, var = 0.0, 0.0, np.zeros(n_metrics)
    for c, share, n, sign, (U_a, U_b) in (
        (c_T, Q_T, n_T, 1.0, (U_T, None)),
        (c_C, Q_C, n_C, -1.0, (U_C, None)),
        (c_R, P, n_rand, -1.0, (U_T, U_C)),
    ):
        if c is None:
            var = var + quad(None, share, n, U_a, U_b)
            continue
        Z = next(Zs)
        g = (g_T - g_C) if U_b is not None else reo_log_gradient(U_a)
        B = delta_u_factor(U_a, Z) - (delta_u_factor(U_b, Z) if U_b is not None else 0.0)
        h, H = h + sign * (Z @ g), H + sign * B
    var = var + np.concatenate([[float(np.sum(h * h))], (H * H).sum(axis=0)])
    return var, var / var_mult


def _partition_rows(
    names: list[str],
    diff: np.ndarray,
    treatment: tuple[np.ndarray, np.ndarray],
    control: tuple[np.ndarray, np.ndarray],
    random: tuple[np.ndarray, np.ndarray],
    level: float,
    method: str = "partition",
) -> dict:
    """Algorithm 3 (``partition``) from fold counts (positives (M, K), rows
    (M,)) of each arm and of the random traffic: a paired t on the per-fold
    differences, because fold m of both arms shares random fold m (unpaired
    Welch under-covers when a treatment flips the favoured group, DESIGN §4.1).
    A metric with a fold where P_k = 0 is NaN with a reason. Source: seed 001 Algorithm 3."""
    from scipy import stats  # imported here, not at the top (fairmon.transforms)

    (fT, nT), (fC, nC), (fR, nR) = treatment, control, random
    mT, mC = _metrics(utilities(fT, nT, fR, nR)), _metrics(utilities(fC, nC, fR, nR))
    finite = np.isfinite(mT).all(axis=0) & np.isfinite(mC).all(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        se_f, nu = paired_fold_se(mT, mC)  # every metric at once
        p_f = np.where(se_f > 0, 2 * stats.t.sf(np.abs(diff) / se_f, nu), np.nan)
    t = stats.t.ppf(0.5 + level / 2, nu)
    nan, why = float("nan"), "a fold has P_k = 0; use fewer folds"
    se = np.where(finite, se_f, nan)
    with np.errstate(invalid="ignore", over="ignore"):
        lo, hi = np.where(finite, diff - t * se_f, nan), np.where(finite, diff + t * se_f, nan)
    reasons = [None if ok else why for ok in finite.tolist()]
    p, df = np.where(finite, p_f, nan), np.where(finite, nu, nan)
    return _block(names, diff, method, se=se, lo=lo, hi=hi, p=p, df=df, reason=reasons)


def _bootstrap_rows(
    names: list[str],
    diff: np.ndarray,
    treatment: tuple[np.ndarray, int],
    control: tuple[np.ndarray, int],
    random: tuple[np.ndarray, int],
    clusters: tuple[BucketSums | None, BucketSums | None, BucketSums | None],
    level: float,
    n_boot: int,
    rng: np.random.Generator,
    method: str = "bootstrap",
) -> dict:
    """Algorithm 4 (``bootstrap``) as the method's rows: the replicates of
    :func:`fairmon.transforms.reo.ab_bootstrap.bootstrap_difference_stats`
    (both arms and the shared random traffic resampled together, so each
    replicate's two arms see the same P̂); percentile CI (D_REO: bootstrap-t),
    SE = replicate sd, the p-value that inverts the interval
    (:func:`fairmon.transforms.reo.ab_reo.percentile_p_value`), so the two
    agree. A metric with a replicate where P_k = 0 (D_REO: or REO* = 0, where
    its SE* is undefined) is NaN with a reason.
    Source: seed 001 Algorithm 4; Efron & Tibshirani (1993) §12.5, §13.3, §16."""
    finite, se_b, p_b, lo_b, hi_b = bootstrap_difference_stats(
        (treatment, control, random), clusters, level, n_boot, rng
    )
    nan, reasons = float("nan"), [None if ok else "a resample has P_k = 0" for ok in finite.tolist()]
    if not finite[0]:
        reasons[0] = "a resample has P_k = 0 or REO* = 0 (the bootstrap-t's SE* undefined)"
    lo, hi, p = (np.where(finite, x, nan) for x in (lo_b, hi_b, p_b))
    se = np.where(np.isfinite(se_b), se_b, nan)  # the sd of D*, defined while every D* is
    return _block(names, diff, method, se=se, lo=lo, hi=hi, p=p, reason=reasons)
