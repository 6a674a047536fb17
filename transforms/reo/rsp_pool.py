"""RSP with a known candidate pool (seed 001 App. H.1, eqs. 24–26): the pool
table's per-group item counts, and RSP's delta-method interval when the pool
shares are constants rather than estimates (pure Polars/NumPy).

Why a pool table. RSP's utility (eq. 24) is U_k = Σ_D 1{R = 1, S = s_k} /
Σ_D 1{S = s_k} over all user-item pairs D = users × items, so its
denominator is |users| · N_k with N_k the number of items of group k in the
candidate pool; App. H.1 notes the platform gets it by tracking what
creators post, without delivering anything. Only the shares
π_k = N_k / N matter (RSP and the additive ΔU of eq. 25 on the U/mean(U)
scale are invariant to a common factor), so the table needs a count of items
per group, not the items' users. Without the table fairmon estimates π_k
from random traffic's rows (:func:`fairmon.transforms.reo.stage.rsp_table`).

Variance with known shares. Write Q̂_k = n_k/n (group k's share of the n
default-traffic rows of an arm, a multinomial share) and Û_k = Q̂_k/π_k, so
log Û_k = log Q̂_k − log π_k and, by the delta method,
Cov(log Q̂) = diag(1/(n Q_k)) − 11ᵀ/n. With g = ∂RSP/∂log U (eq. 26 on the
log scale, :func:`fairmon.transforms.reo.reo_math.reo_log_gradient`), Σ g_k = 0
(scale invariance), so the common 1/n term cancels::

    Var(RSP̂) = Σ_k g_k² / (n Q_k)                 (π known)
    Var(RSP̂) = Σ_k g_k² (1/(n Q_k) + 1/(m P_k))   (π estimated by P̂ from m random rows)

i.e. the pool share's term drops out, and likewise for ΔÛ (Σ = A diag(v) Aᵀ
with v_k = 1/(n Q_k), :func:`fairmon.transforms.reo.reo_math.delta_u_covariance`).
With clustered rows the covariance of log Q̂ is default traffic's
cluster-robust sandwich alone (:meth:`fairmon.transforms.reo.cluster.BucketSums.log_share_covariance`).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from fairmon.transforms.contract import INTERSECTION_SEP, InputContractError, attribute_text, parse_float
from fairmon.transforms.reo.cluster import BucketSums
from fairmon.transforms.reo.estimate import REOEstimate, named_groups, z_value
from fairmon.transforms.reo.intervals_delta import delta_intervals
from fairmon.transforms.reo.reo_math import relative_utilities, reo_of_utilities

#: Column of a pool table counting the items a row stands for (absent: each row is one item).
POOL_COUNT = "n_items"
#: Optional id column of a pool table of one row per item (must not repeat).
POOL_ID = "item_id"
#: The group of an item whose attribute value is null (as the count stage names it).
MISSING = "(missing)"
#: Columns of :func:`pool_item_counts`'s frame.
POOL_SCHEMA = {"attribute": pl.String, "group": pl.String, "n_items": pl.Int64, "source": pl.String}


def pool_item_counts(
    raw: pl.DataFrame, *, file: str, attributes: list[str], intersections: list[list[str]] = ()
) -> pl.DataFrame:
    """N_k of seed 001 eq. 24's denominator per attribute and group, from a
    pool table (config ``[estimation] rsp_pool``; App. H.1).

    Input ``raw``: the table as read (CSV text or Parquet), one row per item
    or per combination of attribute values: item attribute columns (any of
    ``attributes``, at least one), optionally ``n_items`` (a non-negative
    whole number: the items the row stands for; absent, 1) and ``item_id``
    (not repeated). An intersection of ``intersections`` whose attributes
    are all present is counted too (its group ``a×b``, as the count stage
    spells it). A null value is the group ``(missing)``; values are spelled as the count stage spells the
    logs' (:func:`fairmon.transforms.contract.attribute_text`, not stripped). ``file``
    names the table in errors and in the returned ``source``.

    Returns a frame of :data:`POOL_SCHEMA`: attribute, group, n_items (the
    group's items), source. Raises :class:`InputContractError` naming the
    file, and the column and the 1-based data row where one is at fault: an
    empty table, a column that is none of those, no attribute column, an
    ``n_items`` that is not a non-negative whole number, an empty or
    repeated ``item_id``, a value of an intersected attribute holding ``×``,
    an attribute whose items add up to 0.
    """
    if raw.width == 0 or raw.height == 0:
        raise InputContractError("the pool table has no rows", file=file)
    allowed = {*attributes, POOL_COUNT, POOL_ID}
    for c in raw.columns:
        if c not in allowed:
            raise InputContractError(
                f"not a pool-table column: it holds item attribute columns (any of {list(attributes)}), "
                f"{POOL_COUNT} and {POOL_ID}",
                file=file,
                column=c,
            )
    attrs = [a for a in attributes if a in raw.columns]
    if not attrs:
        raise InputContractError(f"no item attribute column (any of {list(attributes)})", file=file)
    n = _item_counts(raw, file)
    if POOL_ID in raw.columns:
        ids = raw.get_column(POOL_ID).cast(pl.String).str.strip_chars().fill_null("")
        for bad, why in ((ids == "", "item_id is empty"), (~ids.is_first_distinct(), "item_id repeated")):
            if bad.any():
                raise InputContractError(why, file=file, column=POOL_ID, row=int(bad.arg_true()[0]) + 1)
    # spelled exactly as the count stage spells the logs' groups (no stripping), so the same value is one group
    text = pl.DataFrame([attribute_text(raw.get_column(a), file=file, column=a) for a in attrs])
    groupings = {a: pl.col(a) for a in attrs}
    for names in (x for x in intersections if all(a in attrs for a in x)):
        for a in names:
            bad = text.get_column(a).str.contains(INTERSECTION_SEP, literal=True).fill_null(False)
            if bad.any():
                raise InputContractError(
                    f"value contains {INTERSECTION_SEP!r}, the separator of the intersection "
                    f"{INTERSECTION_SEP.join(names)}: two cells could read the same",
                    file=file,
                    column=a,
                    row=int(bad.arg_true()[0]) + 1,
                )
        groupings[INTERSECTION_SEP.join(names)] = pl.concat_str([pl.col(a) for a in names], separator=INTERSECTION_SEP)
    frames = []
    for name, expr in groupings.items():
        f = text.select(group=expr.fill_null(MISSING), n_items=n).group_by("group").agg(pl.col("n_items").sum())
        if int(f.get_column("n_items").sum()) == 0:
            raise InputContractError(f"the pool table counts no items for attribute {name!r}", file=file, column=name)
        frames.append(f.with_columns(attribute=pl.lit(name), source=pl.lit(file)))
    return pl.concat(frames).select(list(POOL_SCHEMA)).cast(POOL_SCHEMA).sort("attribute", "group")


def _item_counts(raw: pl.DataFrame, file: str) -> pl.Series:
    """The items each row stands for, Int64 (1 without an ``n_items`` column).
    Raises :class:`InputContractError` at the first row whose count is empty,
    not a number, negative or not whole."""
    if POOL_COUNT not in raw.columns:
        return pl.Series(POOL_COUNT, np.ones(raw.height, np.int64))
    x = parse_float(raw.get_column(POOL_COUNT), file=file, column=POOL_COUNT)
    bad = (x.is_null() | x.is_nan() | (x < 0) | (x != x.floor()) | (x > 2.0**53)).fill_null(True)
    if bad.any():
        i = int(bad.arg_true()[0])
        raise InputContractError(
            f"expected a non-negative whole number of items, got {raw.get_column(POOL_COUNT)[i]!r}",
            file=file,
            column=POOL_COUNT,
            row=i + 1,
        )
    return x.cast(pl.Int64)


def pool_counts_for(pool: pl.DataFrame | None, attribute: str, groups: list[str]) -> tuple[np.ndarray, int, str] | None:
    """(N_k for ``groups`` (K,), N of every item incl. ``(missing)``, the
    source file) of ``attribute`` in a :func:`pool_item_counts` frame; None
    when there is no pool table or it does not describe ``attribute`` (its
    shares then come from random traffic)."""
    if pool is None:
        return None
    rows = pool.filter(pl.col("attribute") == attribute)
    if rows.is_empty():
        return None
    m = dict(rows.select("group", "n_items").iter_rows())
    return np.array([m.get(g, 0) for g in groups], np.int64), int(rows.get_column("n_items").sum()), rows["source"][0]


def pool_groups(pool: pl.DataFrame | None, attribute: str) -> list[str]:
    """The groups (but ``(missing)``) a pool table lists for ``attribute``: an
    empty group of the pool is one RSP compares too ([] without a table)."""
    if pool is None:
        return []
    rows = pool.filter((pl.col("attribute") == attribute) & (pl.col("group") != MISSING))
    return rows.get_column("group").to_list()


def rsp_known_pool(
    groups: list[str],
    n_k: np.ndarray,
    n_rec: int,
    pool_k: np.ndarray,
    pool_total: int,
    *,
    level: float = 0.95,
    clusters_rec: BucketSums | None = None,
    cluster_note: str | None = None,
) -> REOEstimate:
    """RSP (eq. 26), U and ΔU (eq. 25) with delta-method SEs and intervals
    when the pool shares π_k = ``pool_k``/``pool_total`` are known (App. H.1):
    the variance of the module docstring, without the pool's term.

    Inputs: ``n_k`` (K,) default-traffic rows of group k of one arm,
    ``n_rec`` all its rows (incl. groups not listed); ``pool_k`` (K,) the
    pool's items of group k, ``pool_total`` all its items. ``clusters_rec``:
    default traffic's per-bucket rows (then the cluster-robust covariance
    and a t_{G−1} quantile); ``cluster_note``: a reason every interval is NaN.
    REO's interval is the parity-aware one (its lower end 0 when the parity
    test does not reject; DESIGN §4.1), as for the estimated pool.

    Returns an :class:`REOEstimate` (``P`` = π, ``n_rand`` = ``pool_total``;
    the verdict fields unset). Never raises for degenerate counts: NaN with
    a reason (no default rows, K < 2, a group with no items in the pool,
    U all 0; Q_k = 0 or REO = 0 keep the point and leave the SE NaN).
    """
    groups = tuple(groups)
    K = len(groups)
    a, pool = np.asarray(n_k, float), np.asarray(pool_k, float)
    nan_k = np.full(K, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        Q = a / n_rec if n_rec > 0 else nan_k.copy()
        P = pool / pool_total if pool_total > 0 else nan_k.copy()
        U = np.where(P > 0, Q / P, np.nan)
    reasons: list[str] = []
    group_reasons: list[str | None] = [None] * K
    if n_rec == 0:
        reasons.append("no default traffic")
    if K < 2:
        reasons.append(f"K = {K}: RSP needs at least 2 groups")
    if empty := [g for g, p in zip(groups, P) if p == 0]:
        reasons.append(f"no items in the pool table for {named_groups(empty)}: U_k undefined")
        group_reasons = [r if p != 0 else "no items in the pool table" for r, p in zip(group_reasons, P)]
    head = dict(groups=groups, Q=Q, P=P, U=U, n_rec=int(n_rec), n_rand=int(pool_total), ci_method="delta", level=level)
    if not (K >= 2 and np.isfinite(U).all() and U.sum() > 0):
        if K >= 2 and np.isfinite(U).all():
            reasons.append("all U_k = 0 (no default traffic in the listed groups): RSP undefined")
        why = "; ".join(reasons) or "undefined"
        nans = dict(delta_U=nan_k, se_delta_U=nan_k, ci_low_delta_U=nan_k, ci_high_delta_U=nan_k)
        undefined = dict(reo=np.nan, se=np.nan, ci_low=np.nan, ci_high=np.nan, reason=why)
        return REOEstimate(**head, **nans, **undefined, group_reasons=tuple(r or why for r in group_reasons))
    dU, reo = relative_utilities(U), reo_of_utilities(U)
    with np.errstate(divide="ignore"):
        v = 1.0 / (Q * n_rec)
    if clusters_rec is not None and not cluster_note and clusters_rec.G < 2:
        cluster_note = f"{clusters_rec.G} non-empty cluster bucket(s): the cluster-robust variance is undefined"
    if zero := [g for g, q in zip(groups, Q) if q == 0]:
        reasons.append(f"Q_k = 0 for {named_groups(zero)}: delta-method SE undefined")
        group_reasons = [r if q != 0 else "Q_k = 0" for r, q in zip(group_reasons, Q)]
    elif cluster_note:
        reasons.append(cluster_note)
    else:
        V = clusters_rec.log_share_covariance() if clusters_rec is not None else v
        d = delta_intervals(U, dU, reo, V, v, level, clusters_rec, None, rand_known=True)
        reasons.extend(d.notes)
        ci_low = 0.0 if np.isfinite(d.ci_low) and d.parity[2] >= 1.0 - level else d.ci_low
        if reo > d.ci_high:
            reasons.append(f"the plug-in RSP {reo:.4g} lies above its interval (its upward bias exceeds the width)")
        half = z_value(level) * d.scale * d.se_dU
        why = "; ".join(reasons) or None
        gr = tuple(r if np.isfinite(s) else (r or why or "undefined") for r, s in zip(group_reasons, d.se_dU))
        W, df, p = d.parity
        return REOEstimate(
            **head, delta_U=dU, se_delta_U=d.se_dU, ci_low_delta_U=dU - half, ci_high_delta_U=dU + half,
            reo=reo, se=d.se_reo, ci_low=ci_low, ci_high=d.ci_high, reason=why, group_reasons=gr,
            reo_bc=d.reo_bc, parity_stat=W, parity_df=df, parity_p_value=p, design_effect=d.design_effect,
        )  # fmt: skip
    why = "; ".join(reasons)
    out = dict(delta_U=dU, se_delta_U=nan_k, ci_low_delta_U=nan_k, ci_high_delta_U=nan_k, se=np.nan)
    return REOEstimate(
        **head,
        **out,
        reo=reo,
        ci_low=np.nan,
        ci_high=np.nan,
        reason=why,
        group_reasons=tuple(r or why for r in group_reasons),
    )
