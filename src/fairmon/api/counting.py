"""The count stage on a frame of rows: per traffic × arm × attribute × group,
the rows ``n`` and the positives ``n_pos``, as the pipeline's
``sql/group_counts.sql`` counts staged rows (DESIGN §2, §3 ``group_counts``).

The rows go through the pipeline's own input contract, as a profile of them
(:func:`profile`: one row per distinct combination of the columns counted,
as the pipeline's scan hands a file to it), so the contract parses each
distinct value once and still names the first bad row
(:func:`fairmon.transforms.contract.normalize_impressions`: booleans as
true/false or 0/1, label = any (or all) of the label columns, attribute values
as text, traffic values checked), so the conventions are the pipeline's: a
null group is the group ``(missing)`` (it counts in the traffic totals, not
as a group of the REO), and random traffic is shared by all arms (arm
``all``). The aggregation is the pipeline's own statement too
(``sql/count_frame.sql``, which includes ``sql/count_keys.sql``), on DuckDB.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Sequence
from typing import Any

import narwhals as nw
import polars as pl

from fairmon.api.frames import as_caller, eager, names, polars_columns, reject_reserved, require_columns
from fairmon.pipelines.core.config_sections import CLUSTER_EXACT
from fairmon.transforms.contract import (
    ATTR_PREFIX,
    BASE_TRAFFIC,
    CLUSTER_BUCKET,
    PROFILE_N,
    PROFILE_ROW,
    InputContractError,
    normalize_impressions,
)
from fairmon.transforms.contract_values import parse_date
from fairmon.transforms.reo.cluster_keys import cluster_key_params
from fairmon.transforms.reo.reo_tables import MISSING_GROUP

#: Day given to rows without one: the facade counts the rows it is handed as one unit.
UNDATED = dt.date(1970, 1, 1)
#: Columns of :func:`group_counts`' result.
COUNT_COLUMNS = ("traffic", "arm", "attribute", "group", "n", "n_pos")
_ROLES = ("traffic", "arm", "ds", PROFILE_N, PROFILE_ROW, CLUSTER_BUCKET)  # the last three: the profile's own
#: Hash buckets of cluster ids, as the pipeline's default ``[estimation] cluster_buckets``.
CLUSTER_BUCKETS = 128


def count_rows(
    frame: pl.DataFrame | nw.DataFrame,
    *,
    group: str | Sequence[str],
    label: str | Sequence[str],
    traffic: str = "traffic",
    arm: str | None = None,
    label_rule: str = "any",
    traffic_stages: Sequence[str] = (),
    cluster: str | None = None,
    cluster_buckets: int = CLUSTER_BUCKETS,
    cluster_exact_max: int = CLUSTER_EXACT,
) -> pl.DataFrame:
    """:func:`group_counts` on a Polars frame or a caller's frame seen through Narwhals
    (:func:`fairmon.api.frames.eager`; only the columns counted are converted); returns Polars, columns
    :data:`COUNT_COLUMNS` and ``cbucket``: with ``cluster`` (a column of cluster ids), one row per cluster
    key (:func:`cluster_bucket`: per cluster when the frame has at most ``cluster_exact_max`` ids, else per
    hash bucket), else null."""
    groups, labels = names(group, "group"), names(label, "label")
    if label_rule not in ("any", "all"):
        raise ValueError(f"label_rule {label_rule!r}: choose 'any' or 'all'")
    arm_col = arm if arm is not None else ("arm" if "arm" in frame.columns else None)
    used = [traffic, *([arm_col] if arm_col else []), *labels, *groups, *([cluster] if cluster else [])]
    require_columns(frame, used)
    reject_reserved([*labels, *groups], _ROLES, "group/label")
    frame = polars_columns(frame, used)
    raw = frame.select(
        pl.col(traffic).alias("traffic"),
        *([pl.col(arm_col).alias("arm")] if arm_col else []),
        *dict.fromkeys([*labels, *groups]),
    )
    for column in labels:  # a missing label is not a negative one: the pipeline refuses it too (not null)
        values = frame.get_column(column)
        missing = values.is_null() | (values.is_nan() if values.dtype.is_float() else False)
        why = "the label is missing (null or NaN); drop such rows or fill them with true/false"
        _refuse_first(missing, column, why)
    if cluster is not None:
        ids = frame.get_column(cluster)
        empty = ids.is_null() | (ids.cast(pl.String).str.strip_chars() == "")
        _refuse_first(empty, cluster, "the cluster id is empty; give every row one")
        raw = raw.with_columns(
            cluster_bucket(frame.get_column(cluster), cluster_buckets, cluster_exact_max).alias(CLUSTER_BUCKET)
        )
    staged = normalize_impressions(
        profile(raw),
        file="rows",
        signals=labels,
        attributes=groups,
        label_rule=label_rule,
        traffic_stages=list(traffic_stages),
        ds=UNDATED,
        ordered=False,  # summed at once, in no order
    )
    return _count_staged(staged, [ATTR_PREFIX + g for g in groups], cluster_buckets)


def _refuse_first(bad: pl.Series, column: str, why: str) -> None:
    """Raise :class:`InputContractError` ``why`` at the first (1-based) row of ``column`` that ``bad`` marks."""
    if bad.any():
        raise InputContractError(why, file="rows", column=column, row=int(bad.arg_true()[0]) + 1)


def profile(raw: pl.DataFrame) -> pl.DataFrame:
    """``raw``'s rows summed to one row per distinct combination of its
    columns, with the rows it stands for (``__n``) and its first 1-based row
    (``__first_row``), sorted by that row: the profile the pipeline's scan
    computes of a file (sql/impressions_profile.sql), which the input
    contract takes in place of the rows
    (:func:`fairmon.transforms.contract.normalize_impressions`). The contract
    then parses and checks each distinct value once rather than each row
    (a few dozen rows for 10^7), and still names the first row holding a bad
    value: a bad row's combination is bad, and its first row is at or
    before it. One Polars group-by, the single pass over the rows besides
    their conversion. A frame with an Object column (Python objects, which
    Polars cannot group) is returned as it is, for the contract to reject
    or parse row by row."""
    if any(dtype == pl.Object for dtype in raw.dtypes):
        return raw
    return (
        raw.lazy()
        .with_row_index(PROFILE_ROW, offset=1)
        .group_by(raw.columns)
        .agg(pl.len().cast(pl.Int64).alias(PROFILE_N), pl.col(PROFILE_ROW).min().cast(pl.Int64))
        .sort(PROFILE_ROW)
        .collect()
    )


def _count_staged(staged: pl.DataFrame, attrs: list[str], buckets: int) -> pl.DataFrame:
    """The pipeline's own count statement (``sql/count_frame.sql``, through
    ``sql/count_keys.sql``) on rows through the input contract, on DuckDB:
    columns :data:`COUNT_COLUMNS` and ``cbucket``, sorted by them. The attr__
    columns are counted under positional names (``attr__0``, …), so any
    column name a caller's frame has (spaces, case-only differences) counts,
    and the result is read as NumPy arrays (no PyArrow: the core install has none)."""
    from fairmon.pipelines.ingest.range_counts import count_sql

    plain = [f"{ATTR_PREFIX}{i}" for i in range(len(attrs))]
    back = {str(i): a.removeprefix(ATTR_PREFIX) for i, a in enumerate(attrs)}
    con = _connection()
    try:
        con.register("rows_in", _ArrowStream(staged.rename(dict(zip(attrs, plain, strict=True)))))
        scan = con.sql(count_sql("count_frame", plain), params={"ds": UNDATED, "buckets": buckets})
        counted = pl.DataFrame([pl.Series(k, v) for k, v in scan.fetchnumpy().items()])  # nulls come masked
    finally:
        con.unregister("rows_in")
    return (
        counted.with_columns(pl.col("attribute").replace_strict(back))
        .sort("traffic", "arm", "attribute", "group", "cbucket")
        .select(*COUNT_COLUMNS, "cbucket")
    )


_local = threading.local()  # per thread by nature: a DuckDB connection holding no tables, no state


def _connection():
    """This thread's in-memory DuckDB connection for the count statements: opening one and its first
    statement cost more CPU than counting a profile's few dozen rows, so every call of a thread reuses
    it. It holds no tables; a statement's frame is registered for that statement only."""
    if getattr(_local, "con", None) is None:
        import duckdb

        _local.con = duckdb.connect()
    return _local.con


class _ArrowStream:
    """A Polars frame seen only through the Arrow C stream interface, which DuckDB scans without PyArrow
    (an extra, ``fairmon[pipeline]``; the core install has none)."""

    def __init__(self, frame: pl.DataFrame):
        self.frame = frame

    def __arrow_c_stream__(self, requested_schema=None):
        return self.frame.__arrow_c_stream__(requested_schema)


def cluster_bucket(ids: pl.Series, buckets: int = CLUSTER_BUCKETS, exact: int = CLUSTER_EXACT) -> pl.Series:
    """The cluster key (int32) of each cluster id, computed by the pipeline's own statement
    ``sql/impressions_bucket.sql`` (rendered as its DuckDB engine renders it) on DuckDB, the ids taken as
    one file, so an id gets the key it gets when ``fairmon run`` clusters on either engine
    (transforms/reo/cluster.py; DESIGN §1 "Engines"). With h = ``int(hashlib.sha1(text.encode())
    .hexdigest()[:8], 16)``, ``text`` the id cast to VARCHAR (a null id: h = 6893924396578271964):
    at most ``exact`` distinct ids (``[estimation] cluster_exact_max``) give the per-cluster keys ``-1 - h % span``
    (:func:`fairmon.transforms.reo.cluster_keys.cluster_key_params`), more give the hash buckets
    ``h % buckets`` (0 .. ``buckets`` − 1) (formula 5, pipelines/core/config.py ``BUCKET_FORMULA``).
    Raises ValueError for ``buckets`` < 2."""
    params = cluster_key_params(buckets, exact)
    from fairmon.pipelines.storage.portable import render

    rows = _ArrowStream(pl.DataFrame({"__id": ids}).with_row_index("__i"))
    con = _connection()
    try:
        con.register("raw_in", rows)
        scan = con.sql(render("impressions_bucket", cluster=["__id"], scope=[]), params=params)
        out = pl.DataFrame(scan.project("__i, __cbucket").fetchnumpy())  # two integer columns without nulls
    finally:
        con.unregister("raw_in")
    return out.sort("__i").get_column("__cbucket").cast(pl.Int32)


def group_counts(
    rows: Any,
    *,
    group: str | Sequence[str],
    label: str | Sequence[str],
    traffic: str = "traffic",
    arm: str | None = None,
    label_rule: str = "any",
    traffic_stages: Sequence[str] = (),
) -> Any:
    """Per-group counts of logged rows: the pipeline's count stage on a frame.

    ``rows``: a pandas, Polars or PyArrow frame, one row per logged
    user-item pair (DESIGN §2 impressions). Columns: ``traffic`` (values
    ``default``, ``random`` or one of ``traffic_stages``); ``arm`` (the
    experiment arm of default traffic; when None, a column named ``arm`` is
    used if present, else every row is arm ``all``); ``label``: one boolean
    column or a list of them (true/false or 0/1; the label Y is true when any
    of them is, or all with ``label_rule="all"``); ``group``: one attribute
    column or a list of them (each a grouping; values are compared as text,
    booleans as ``true``/``false``). The rows are counted as one unit: pass
    one day's default traffic with the random traffic of its window.

    Returns a frame of the caller's kind with one row per traffic × arm ×
    attribute × group: ``traffic``, ``arm`` (``all`` for random traffic,
    shared by every arm), ``attribute`` (the group column's name), ``group``
    (a null value is ``(missing)``), ``n`` (rows) and ``n_pos`` (rows with
    Y true), both int64; sorted by those keys. Equals the ``n``/``n_pos`` of
    the pipeline's ``group_counts`` table (``sql/group_counts.sql``) for the
    same rows.

    Raises ValueError naming the column when a column is missing (with the
    columns present), and :class:`fairmon.transforms.contract.InputContractError`
    (a ValueError) naming column and first row for a missing label (null, NaN), a label that is not
    boolean, a null or unknown traffic value, or an empty frame; TypeError
    when ``rows`` is not a data frame.

    Source: DESIGN §2 (input contract), §3 ``group_counts``; seed 001 §4.1
    (D_rec and D_rand are the default and random traffic).
    """
    frame, kind = eager(rows)
    out = count_rows(
        frame, group=group, label=label, traffic=traffic, arm=arm, label_rule=label_rule, traffic_stages=traffic_stages
    )
    return as_caller(out.select(COUNT_COLUMNS), kind)


def tidy_counts(
    frame: pl.DataFrame,
    *,
    group: str,
    traffic: str = "traffic",
    arm: str | None = None,
    n: str = "n",
    n_pos: str = "n_pos",
    attribute: str = "attribute",
    traffic_stages: Sequence[str] = (),
) -> pl.DataFrame:
    """Per-group counts handed by a caller in the layout of the count stage:
    columns traffic, arm (``all`` for random traffic, random counts summed
    over arms), attribute (the ``group`` column's name when ``frame`` has no
    ``attribute`` column), group (null = ``(missing)``), n, n_pos (int64,
    duplicate keys summed), plus ``ds`` (a DATE) when ``frame`` has it, read as
    the input contract reads a log's day
    (:func:`fairmon.transforms.contract_values.parse_date`: a date, 'YYYY-MM-DD'
    text, a timestamp's day; one with a time zone only at midnight UTC).

    Raises ValueError for a missing column, an unknown or null traffic value,
    counts that are not non-negative integers, or ``n_pos`` > ``n``;
    :class:`fairmon.transforms.contract.InputContractError` (a ValueError)
    naming the first ``ds`` row that is no day or null."""
    arm_col = arm if arm is not None else ("arm" if "arm" in frame.columns else None)
    require_columns(frame, [traffic, group, n, n_pos, *([arm_col] if arm_col else [])], "counts")
    allowed = [*BASE_TRAFFIC, *traffic_stages]
    bad = frame.filter(pl.col(traffic).is_null() | ~pl.col(traffic).cast(pl.String).is_in(allowed))
    if bad.height:
        raise ValueError(f"counts: unknown traffic value {bad.get_column(traffic)[0]!r}; allowed: {', '.join(allowed)}")
    for c in (n, n_pos):
        s = frame.get_column(c)
        if not s.dtype.is_integer() or s.null_count() or (s.len() and s.min() < 0):
            raise ValueError(f"counts: column {c!r} must hold non-negative integers without nulls (found {s.dtype})")
    if (frame.get_column(n_pos) > frame.get_column(n)).any():
        raise ValueError(f"counts: {n_pos!r} exceeds {n!r} in some row")
    keys = ["ds"] if "ds" in frame.columns else []
    if keys:  # the day as the pipeline's contract reads it: a zoned timestamp only at midnight UTC
        frame = frame.with_columns(parse_date(frame.get_column("ds"), file="counts", column="ds"))
    tidy = frame.select(
        *keys,
        pl.col(traffic).cast(pl.String).alias("traffic"),
        (pl.col(arm_col).cast(pl.String).fill_null("all") if arm_col else pl.lit("all")).alias("arm"),
        (pl.col(attribute).cast(pl.String) if attribute in frame.columns else pl.lit(group)).alias("attribute"),
        pl.col(group).cast(pl.String).fill_null(MISSING_GROUP).alias("group"),
        pl.col(n).cast(pl.Int64).alias("n"),
        pl.col(n_pos).cast(pl.Int64).alias("n_pos"),
    ).with_columns(pl.when(pl.col("traffic") == "random").then(pl.lit("all")).otherwise(pl.col("arm")).alias("arm"))
    return (
        tidy.group_by(*keys, "traffic", "arm", "attribute", "group")
        .agg(pl.col("n").sum(), pl.col("n_pos").sum())
        .sort(*keys, "traffic", "arm", "attribute", "group")
    )
