"""Input contract for impressions (DESIGN §2): parse, type-check and normalise a
raw frame into the staging layout. Pure Polars, no I/O.

Staging layout (one row per distinct ds × traffic × arm × label × groups of a
file, with its number of logged user-item pairs ``n``)::

    ds DATE, ds_start DATE, traffic VARCHAR, arm VARCHAR, y BOOLEAN,
    attr__<attribute> VARCHAR ..., cbucket INTEGER, n BIGINT, src_file VARCHAR, src_row BIGINT

Every estimator downstream works on counts, so the rows themselves are not
staged: at 10^8 rows a day that keeps the staging table a few thousand rows.
``src_row`` is the first file row of the combination. ``ds_start`` equals
``ds`` for daily rows; a pooled random-traffic file covering several days has
``ds_start``..``ds`` = its declared range. The label ``y`` is the configured
rule (any/all) over the signal columns. ``cbucket`` is the hash bucket of the
rows' cluster id when the count stage clusters (transforms/reo/cluster.py), else
null. Attribute values are kept as strings
(booleans become "true"/"false"); nulls stay null.

The input may be the rows themselves or a *profile* of them (one row per
distinct combination of the contract columns, with its row count in
``__n`` and its first file row in ``__first_row``, as
:mod:`fairmon.pipelines.ingest.adapters` computes it in DuckDB); errors then still name
the first file row with the bad value.
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from fairmon.transforms.contract_values import (
    InputContractError,
    attribute_text,
    first_bad_row,
    parse_bool,
    parse_date,
    parse_float,
)
from fairmon.transforms.repeats import has_repeated_rows

ATTR_PREFIX = "attr__"
#: Joins the attribute names and the values of an intersectional grouping: ``young_adult×region``, ``1×north``.
INTERSECTION_SEP = "×"
PROFILE_N = "__n"  # rows a profile row stands for
PROFILE_ROW = "__first_row"  # first (1-based) file row of a profile row
CLUSTER_BUCKET = "__cbucket"  # hash bucket of a profile row's cluster id (transforms/reo/cluster.py)
#: The label of a profile's rows per cluster bucket (sql/impressions_profile_buckets.sql): a profile
#: with this column holds the profile proper (bucket null) and, below it, rows per bucket and label.
BUCKET_LABEL = "__y"
BASE_TRAFFIC = ("default", "random")


def adapt_impressions(
    raw: pl.DataFrame, *, ds: dt.date | None = None, traffic: str | None = None, default_arm: str = "all"
) -> pl.DataFrame:
    """Fill the contract columns a file format leaves implicit: ``ds`` (as
    'YYYY-MM-DD' text), ``traffic`` and ``arm``, when absent. Values are not
    parsed (the raw data-quality suite checks them first). An empty frame
    (no columns) is returned unchanged.
    """
    if raw.width == 0:
        return raw
    fill = []
    if "ds" not in raw.columns and ds is not None:
        fill.append(pl.lit(ds.isoformat()).alias("ds"))
    if "traffic" not in raw.columns and traffic is not None:
        fill.append(pl.lit(traffic).alias("traffic"))
    if "arm" not in raw.columns:
        fill.append(pl.lit(default_arm).alias("arm"))
    return raw.with_columns(fill) if fill else raw


def normalize_impressions(
    raw: pl.DataFrame,
    *,
    file: str,
    signals: list[str],
    attributes: list[str],
    label_rule: str = "any",
    traffic_stages: list[str] | tuple[str, ...] = (),
    ds: dt.date | None = None,
    ds_start: dt.date | None = None,
    traffic: str | None = None,
    default_arm: str = "all",
    ordered: bool = True,
) -> pl.DataFrame:
    """Check a raw impressions frame against DESIGN §2 and return staging rows.

    ``raw``: one row per user-item pair, columns as read from ``file``
    (any dtypes; unknown columns are ignored). ``ds``/``traffic`` fill the
    column when the file has none (adapters for formats without them); when
    ``ds`` is given and the file has a ds column, every row must equal it.
    ``ds_start`` marks a pooled file's first day (default: ``ds``); a pooled
    file (``ds_start`` < ``ds``) whose rows carry their own ds keeps each row's
    day (it must lie in ``ds_start``..``ds``), so the random-traffic window
    takes exactly the rows of its days (DESIGN §2).

    ``raw`` may also be a profile (columns ``__n`` and ``__first_row``, see the
    module docstring); rows are then weighted by ``__n`` and errors name
    ``__first_row`` of the first offending profile row (profiles come sorted
    by it, so that is the first offending file row).

    A profile with rows per cluster bucket and label (:data:`BUCKET_LABEL`,
    sql/impressions_profile_buckets.sql) is checked on its profile proper and
    staged from its bucket rows (:func:`bucket_rows`).

    Returns a frame in the staging layout (module docstring), sorted by
    src_row (a bucketed profile's rows in no order: they are only staged
    and summed). ``ordered`` False (the API's count, whose rows repeat, one
    per logged pair, and which needs no order): rows summed per staging key
    at once, without first asking whether any repeat, in no order.
    Raises :class:`InputContractError` naming file, column and row for: an
    empty file, a missing required/configured column, a value of the wrong
    type, an unknown traffic value, or a row dated outside the file's day.
    """
    kw = dict(
        file=file,
        attributes=attributes,
        traffic_stages=traffic_stages,
        ds=ds,
        ds_start=ds_start,
        traffic=traffic,
        default_arm=default_arm,
    )
    if BUCKET_LABEL in raw.columns:
        # the profile proper is parsed (checked) and compared with the bucket rows, never staged: not summed
        proper = _proper_rows(raw)
        staged = _parsed(proper.drop(BUCKET_LABEL), signals=signals, label_rule=label_rule, **kw)
        per_bucket = raw.filter(pl.col(CLUSTER_BUCKET).is_not_null()).drop(signals).rename({BUCKET_LABEL: "__label"})
        rows = _parsed(per_bucket, signals=["__label"], label_rule="any", **kw)
        return bucket_rows(staged, proper.get_column(BUCKET_LABEL), _staging_rows(rows, in_order=False))
    parsed = _parsed(raw, signals=signals, label_rule=label_rule, **kw)
    return _staging_rows(parsed, in_order=ordered, may_repeat=ordered)


def _staging_rows(staged: pl.DataFrame, in_order: bool, may_repeat: bool = True) -> pl.DataFrame:
    """Parsed rows (:func:`_parsed`) summed to one row per staging key, the
    first src_row kept, in the staging layout; sorted by src_row when
    ``in_order``. A profile's bucket rows are not: they are only staged and
    summed, and the scan gives them in no order (sorting ~280,000 a file
    at K = 4,096 groups bought nothing). ``may_repeat`` asks first whether
    any rows repeat (a profile's rarely do); False sums at once (a row per
    logged pair: they always do)."""
    keys = [c for c in staged.columns if c not in ("n", "src_row")]
    layout = [*keys[:-1], "n", "src_file", "src_row"]
    if may_repeat and not has_repeated_rows(staged.select(keys)):  # e.g. a profile's rows per bucket
        return (staged.sort("src_row") if in_order else staged).select(layout)
    summed = staged.lazy().group_by(keys).agg(pl.col("n").sum(), pl.col("src_row").min())
    return (summed.sort("src_row") if in_order else summed).select(layout).collect()


def _parsed(raw: pl.DataFrame, **kw) -> pl.DataFrame:
    """:func:`_normalize_impressions` (a staging row per row); errors name a profile's file row."""
    try:
        return _normalize_impressions(raw, **kw)
    except InputContractError as e:
        if e.row is None or PROFILE_ROW not in raw.columns:
            raise
        raise InputContractError(
            e.message, file=e.file, column=e.column, row=int(raw.get_column(PROFILE_ROW)[e.row - 1])
        ) from None


def _constant(name: str, value, height: int, dtype: pl.DataType) -> pl.Series:
    """``height`` copies of ``value`` made by Polars, not from a Python list of one value per row."""
    return pl.repeat(value, height, dtype=dtype, eager=True).alias(name)


def _normalize_impressions(
    raw: pl.DataFrame,
    *,
    file: str,
    signals: list[str],
    attributes: list[str],
    label_rule: str,
    traffic_stages,
    ds,
    ds_start,
    traffic,
    default_arm,
) -> pl.DataFrame:
    if raw.height == 0:
        raise InputContractError("file has no rows", file=file)
    cols = set(raw.columns)
    for c in [*signals, *attributes]:
        if c not in cols:
            raise InputContractError("required column is missing", file=file, column=c)

    own_days = False  # a pooled file whose rows carry their own day: each row is windowed by it (DESIGN §2)
    if "ds" in cols:
        ds_col = parse_date(raw.get_column("ds"), file=file, column="ds")
        if ds is not None and ds_start is not None and ds_start < ds:
            # rows all on the range's end: a pool without per-row dates (its ds filled by the adapter)
            own_days = bool((ds_col != ds).any())
            off = (ds_col < ds_start) | (ds_col > ds)
            if off.any():
                i = first_bad_row(off)
                raise InputContractError(
                    f"row dated {ds_col[i - 1]} outside the pool's range {ds_start}..{ds}",
                    file=file,
                    column="ds",
                    row=i,
                )
        elif ds is not None:
            off = ds_col != ds
            if off.any():
                i = first_bad_row(off)
                raise InputContractError(f"row dated {ds_col[i - 1]} in a file for {ds}", file=file, column="ds", row=i)
    elif ds is not None:
        ds_col = _constant("ds", ds, raw.height, pl.Date)
    else:
        raise InputContractError("required column is missing", file=file, column="ds")

    allowed = [*BASE_TRAFFIC, *traffic_stages]
    if "traffic" in cols:
        tr = raw.get_column("traffic").cast(pl.String)
        bad = tr.is_null() | ~tr.is_in(allowed)
        if bad.any():
            i = first_bad_row(bad)
            raise InputContractError(
                f"unknown traffic value {tr[i - 1]!r}; allowed: {', '.join(allowed)}",
                file=file,
                column="traffic",
                row=i,
            )
    elif traffic is not None:
        tr = _constant("traffic", traffic, raw.height, pl.String)
    else:
        raise InputContractError("required column is missing", file=file, column="traffic")

    arm = (
        raw.get_column("arm").cast(pl.String).fill_null(default_arm)
        if "arm" in cols
        else _constant("arm", default_arm, raw.height, pl.String)
    )
    sig = [parse_bool(raw.get_column(c), file=file, column=c).alias(c) for c in signals]
    sig_frame = pl.DataFrame(sig)
    y = sig_frame.select(
        (pl.any_horizontal(pl.all()) if label_rule == "any" else pl.all_horizontal(pl.all())).alias("y")
    ).to_series()

    out = {
        "ds": ds_col.alias("ds"),
        "ds_start": (
            _constant("ds_start", ds_start, raw.height, pl.Date) if ds_start and not own_days else ds_col
        ).alias("ds_start"),
        "traffic": tr.alias("traffic"),
        "arm": arm.alias("arm"),
        "y": y.alias("y"),
    }
    for a in attributes:
        out[ATTR_PREFIX + a] = attribute_text(raw.get_column(a), file=file, column=a).alias(ATTR_PREFIX + a)
    out["cbucket"] = (
        (raw.get_column(CLUSTER_BUCKET) if CLUSTER_BUCKET in cols else _constant("cbucket", None, raw.height, pl.Int32))
        .cast(pl.Int32)
        .alias("cbucket")
    )
    out["src_file"] = _constant("src_file", file, raw.height, pl.String)
    n = raw.get_column(PROFILE_N) if PROFILE_N in cols else _constant("n", 1, raw.height, pl.Int64)
    out["n"] = n.cast(pl.Int64).alias("n")
    out["src_row"] = (
        (raw.get_column(PROFILE_ROW) if PROFILE_ROW in cols else pl.int_range(1, raw.height + 1, eager=True))
        .cast(pl.Int64)
        .alias("src_row")
    )
    return pl.DataFrame(list(out.values()))


def profile_part(profile: pl.DataFrame) -> pl.DataFrame:
    """The profile proper of a profile with rows per bucket and label
    (:data:`BUCKET_LABEL`): its rows with a null bucket, without the bucket
    and label columns, sorted by ``__first_row`` (the scan gives them in no
    order, sql/impressions_profile_buckets.sql; errors name the first
    offending file row). Other frames are returned unchanged."""
    if BUCKET_LABEL not in profile.columns:
        return profile
    return _proper_rows(profile).drop(BUCKET_LABEL)


def _proper_rows(profile: pl.DataFrame) -> pl.DataFrame:
    """:func:`profile_part` with the label the scan computed for each row."""
    return profile.filter(pl.col(CLUSTER_BUCKET).is_null()).drop(CLUSTER_BUCKET).sort(PROFILE_ROW)


def bucket_rows(staged: pl.DataFrame, scanned: pl.Series, per_bucket: pl.DataFrame) -> pl.DataFrame:
    """The staging rows per cluster bucket (``per_bucket``, from a profile's
    rows per bucket and label) after checking them against the rows staged
    from the profile proper (``staged``, a row per profile row): the label
    the scan computed for each profile row (``scanned``, in the same order;
    sql/impressions_profile_buckets.sql, also what it grouped the bucket rows
    by) is the contract's, null where the contract's is, and the bucket
    rows stand for as many rows of each label as the profile does. Frames in
    the staging layout. Returns ``per_bucket``. Raises RuntimeError naming
    the file when they differ (a defect, not bad input). Row by row on the
    profile (its distinct signal combinations), not a sum per combination of
    the bucket rows: those are as many as the file's rows at K = 4,096
    groups, and grouping them cost half the file's staging."""
    where = staged.get_column("src_file")[0] if staged.height else "a file"
    same = staged.get_column("y").eq_missing(scanned)
    if not same.all():
        i = int((~same).arg_true()[0])
        raise RuntimeError(
            f"{where}: the scan's label disagrees with the contract's on {int((~same).sum())} profile row(s), "
            f"e.g. file row {staged.get_column('src_row')[i]}: {scanned[i]} against {staged.get_column('y')[i]}"
        )
    a, b = (f.group_by("y").agg(pl.col("n").sum()) for f in (staged, per_bucket))
    diff = a.join(b, on="y", how="full", nulls_equal=True, coalesce=True).filter(
        pl.col("n").fill_null(-1) != pl.col("n_right").fill_null(-1)
    )
    if diff.height:
        raise RuntimeError(f"{where}: the rows per cluster bucket disagree with the profile's: {diff.rows(named=True)}")
    return per_bucket


def without_buckets(profile: pl.DataFrame) -> pl.DataFrame:
    """A profile split by cluster bucket (``__cbucket``) summed back to one row
    per distinct combination (``__n`` added, first ``__first_row`` kept), as
    the input's raw suite checks it; a profile with rows per bucket and label
    gives its profile proper (:func:`profile_part`); other frames are
    returned unchanged."""
    if BUCKET_LABEL in profile.columns:
        return profile_part(profile)
    if CLUSTER_BUCKET not in profile.columns:
        return profile
    keys = [c for c in profile.columns if c not in (CLUSTER_BUCKET, PROFILE_N, PROFILE_ROW)]
    return (
        profile.group_by(keys, maintain_order=True)
        .agg(pl.col(PROFILE_N).sum(), pl.col(PROFILE_ROW).min())
        .sort(PROFILE_ROW)
        .select([c for c in profile.columns if c != CLUSTER_BUCKET])
    )


def _attrs_and_source(raw: pl.DataFrame, attributes: list[str], file: str) -> list[pl.Series]:
    return [
        *(attribute_text(raw.get_column(a), file=file, column=a).alias(ATTR_PREFIX + a) for a in attributes),
        _constant("src_file", file, raw.height, pl.String),
    ]


def _require(raw: pl.DataFrame, columns: list[str], file: str) -> None:
    if raw.height == 0:
        raise InputContractError("file has no rows", file=file)
    for c in columns:
        if c not in raw.columns:
            raise InputContractError("required column is missing", file=file, column=c)


_PARSERS = {
    "date": parse_date,
    "float": parse_float,
    "bool": parse_bool,
    "str": lambda s, *, file, column: s.cast(pl.String),
}
SCORES_COLUMNS = {"ds": "date", "model": "str", "item_id": "str", "score": "float", "outcome": "bool"}
LABELS_COLUMNS = {"ds": "date", "item_id": "str", "labeler_id": "str", "label": "bool", "gold_label": "bool"}


def _normalize_log(raw: pl.DataFrame, columns: dict[str, str], *, file: str, attributes: list[str]) -> pl.DataFrame:
    _require(raw, [*columns, *attributes], file)
    return pl.DataFrame(
        [
            *(_PARSERS[kind](raw.get_column(c), file=file, column=c).alias(c) for c, kind in columns.items()),
            *_attrs_and_source(raw, attributes, file),
        ]
    )


def normalize_scores(raw: pl.DataFrame, *, file: str, attributes: list[str]) -> pl.DataFrame:
    """Check a raw score log against DESIGN §2 (scores) and return staging rows:
    ds, model, item_id, score (float), outcome (bool, null = unknown),
    attr__<attribute>..., src_file. Raises :class:`InputContractError`."""
    return _normalize_log(raw, SCORES_COLUMNS, file=file, attributes=attributes)


def normalize_labels(raw: pl.DataFrame, *, file: str, attributes: list[str]) -> pl.DataFrame:
    """Check a raw labeling log against DESIGN §2 (labels) and return staging rows:
    ds, item_id, labeler_id, label (bool), gold_label (bool, null = not reviewed),
    attr__<attribute>..., src_file. Raises :class:`InputContractError`."""
    return _normalize_log(raw, LABELS_COLUMNS, file=file, attributes=attributes)
