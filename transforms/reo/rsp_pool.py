"""RSP with a known candidate pool (seed 001 App. H.1, eqs. 24–26): the pool
table's per-group item counts (pure Polars/NumPy), and why RSP's delta-method
interval drops the pool's variance term when the shares are constants.

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
Both are :func:`fairmon.transforms.reo.estimate.estimate_reo`'s with
``known_pool``: the estimated pool's delta path with its pool term 0.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from fairmon.transforms.contract import INTERSECTION_SEP
from fairmon.transforms.contract_values import InputContractError, attribute_text, parse_float

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
    logs' (:func:`fairmon.transforms.contract_values.attribute_text`, not stripped). ``file``
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
