"""One subject's failures out of a GX run on stacked subjects
(:meth:`fairmon.pipelines.checks.gate.QualityGate.validate_many`), and the
failure entry of a ``dq_results`` row's details that both paths write.

GX decides every row of the stack; here its unexpected rows are only sorted
by the subject they belong to, as the gate already turns a profile's
unexpected rows into file rows.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from fairmon.pipelines.checks.cover import PAIR, ROW_WISE_ONE_COLUMN, snake_type
from fairmon.pipelines.checks.suites import html_safe
from fairmon.transforms.contract import PROFILE_N, PROFILE_ROW


def failure(r, count, rows: list[int], partial: list | None) -> dict:
    """The details entry of one failed GX expectation result ``r``: its name,
    severity, type and column from its configuration, ``count`` unexpected
    rows, the first ``rows`` (1-based file or frame rows), the sample (the
    first five of ``partial``, GX's unexpected values, else GX's observed
    value) and the exception GX caught, if any."""
    cfg = r.expectation_config
    res = r.result or {}
    exc = (r.exception_info or {}).get("exception_message") if isinstance(r.exception_info, dict) else None
    return {
        "name": cfg.meta.get("name", cfg.type),
        "severity": str(getattr(cfg.severity, "value", cfg.severity)),
        "type": cfg.type,
        "column": cfg.kwargs.get("column") or cfg.kwargs.get("column_list"),
        "unexpected_count": count,
        "rows": rows,
        "sample": partial[:5] if partial else res.get("observed_value"),
        "error": exc,
    }


def profile_failure(profile: pl.DataFrame, idx: list[int]) -> tuple[int, list[int]]:
    """The unexpected count and first rows of a profile's unexpected rows
    ``idx`` (0-based positions in ``profile``, which holds ``__n`` and
    ``__first_row``): the file rows they stand for (the sum of their ``__n``)
    and the first five of their first file rows, in file order."""
    return int(profile.get_column(PROFILE_N).gather(idx).sum()), sorted(profile.get_column(PROFILE_ROW).gather(idx))[:5]


def unexpected_rows(idx) -> np.ndarray | None:
    """GX's ``unexpected_index_list`` of a stacked run as an array of row
    positions, increasing; None when it is empty or anything else (GX
    then decided the expectation for the stack, not row by row)."""
    if not isinstance(idx, list) or not idx:
        return None
    at = np.asarray(idx)
    if at.ndim != 1 or at.dtype.kind not in "iu":
        return None
    at = at.astype(np.int64, copy=False)
    return at if at.size < 2 or bool(np.all(at[1:] > at[:-1])) else None


def member_failures(vr, unexpected, seen, whole: pl.DataFrame, frame: pl.DataFrame, span: tuple[int, int], names):
    """The failures of the subject at rows ``span`` = [lo, hi) of the stacked
    frame ``whole`` (``seen``: the pandas frame GX validated, ``whole`` after
    HTML escaping) in GX's validation result ``vr`` of that stack (result
    format COMPLETE; ``unexpected``: each failed expectation's unexpected
    rows, :func:`unexpected_rows`), for the expectations ``names`` its own
    rows failed: what a run of GX on the subject's ``frame`` alone with just
    those expectations reports (counts, first rows, samples; a profile's
    counts weighted by ``__n`` and its rows from ``__first_row``), in the
    suite's order.

    A row-wise expectation on one column decides each row on its own value,
    so GX's unexpected rows of the stack (all of them, in row order) that
    lie in ``span`` are the subject's own shifted by ``lo``, and its
    unexpected values alone are the column's values there, as GX lists them
    (iterating the pandas column; GX keeps only the stack's first 200
    values). Returns None when that cannot be relied on, for the caller to
    run GX on the subject alone: an expectation on a key or on two columns,
    an exception, or a column whose pandas type in the stack is not the
    subject's (an integer or boolean column with nulls in the stack but none
    in the subject: GX would show 3.0 where it shows 3 alone)."""
    lo, hi = (int(x) for x in span)
    profile = PROFILE_N in frame.columns and PROFILE_ROW in frame.columns
    out = []
    for r in vr.results:
        cfg = r.expectation_config
        name = cfg.meta.get("name")
        if r.success or name not in names:
            continue
        raised = isinstance(r.exception_info, dict) and r.exception_info.get("raised_exception")
        column = cfg.kwargs.get("column")
        at = unexpected.get(name)
        if cfg.type not in ROW_WISE_ONE_COLUMN or raised or at is None or not _same_pandas_type(whole, frame, column):
            return None
        a, b = (int(x) for x in np.searchsorted(at, [lo, hi]))
        own = (at[a:b] - lo).tolist()
        if not own:
            return None  # the caller named it failed on these rows: something else is off
        if profile:
            count, rows = profile_failure(frame, own)
        else:
            count, rows = len(own), [i + 1 for i in own[:5]]
        out.append(failure(r, count, rows, list(seen[column].iloc[at[a : min(b, a + 5)]])))
    return out


def _same_pandas_type(whole: pl.DataFrame, frame: pl.DataFrame, column: str | None) -> bool:
    """Whether ``column`` becomes the same pandas type in the stack ``whole``
    as in the subject's ``frame`` (``polars.DataFrame.to_pandas``: an integer
    or boolean column turns float or object only when it holds a null)."""
    if column is None or column not in whole.columns or column not in frame.columns:
        return False
    dtype = whole.schema[column]
    if not (dtype.is_integer() or dtype == pl.Boolean):
        return True
    return (whole.get_column(column).null_count() > 0) == (frame.get_column(column).null_count() > 0)


#: GX expectation types decided row by row: on frames stacked into one, the
#: rows that fail are exactly the rows that fail on each frame alone.
ROW_WISE = ROW_WISE_ONE_COLUMN | PAIR | {"expect_compound_columns_to_be_unique"}  # uniqueness: subject in the key


#: The column that tells stacked frames apart (:meth:`fairmon.pipelines.checks.gate.QualityGate.validate_many`).
SUBJECT = "__subject"
#: GX expectation types on uniqueness: decided per subject once the subject joins the key.
UNIQUE = frozenset({"ExpectColumnValuesToBeUnique", "ExpectCompoundColumnsToBeUnique"})


def per_subject(entry: dict) -> dict:
    """A uniqueness expectation for stacked frames: its key plus :data:`SUBJECT`
    (a key repeated within one frame, not across frames, is what fails).
    Other entries are returned as they are."""
    if entry["type"] not in UNIQUE:
        return entry
    kw = dict(entry["kwargs"])
    key = [kw.pop("column")] if "column" in kw else list(kw.pop("column_list"))
    return {**entry, "type": "ExpectCompoundColumnsToBeUnique", "kwargs": {**kw, "column_list": [*key, SUBJECT]}}


def batchable(entry: dict) -> bool:
    """Whether an expanded expectation can be run on stacked frames
    (:meth:`fairmon.pipelines.checks.gate.QualityGate.validate_many`): a row-wise one without a ``mostly``
    share (a share of the stack is not each frame's share), a column's
    existence (the stacked frames share their columns), a minimum row
    count of at most 1 without a maximum (each stacked frame has rows), or a
    :data:`CONTAINS` one (each member is seen to hold it first)."""
    kind, kw = entry["type"], entry["kwargs"]
    if kind in CONTAINS:
        return True  # with each member seen to hold it first (holds_for)
    if kind in UNIQUE:
        return kw.get("mostly", 1) == 1
    if kind == "ExpectColumnToExist":
        return True
    if kind == "ExpectTableRowCountToBeBetween":
        return kw.get("max_value") is None and (kw.get("min_value") or 0) <= 1
    return snake_type(kind) in ROW_WISE and kw.get("mostly", 1) == 1


#: Table-level GX expectation types that hold for stacked frames when they hold for each (:func:`holds_for`).
CONTAINS = frozenset({"ExpectColumnDistinctValuesToContainSet"})


def holds_for(entry: dict, frame: pl.DataFrame) -> bool:
    """Whether ``frame`` (one member of a stack) surely passes ``entry`` when
    the entry is a :data:`CONTAINS` one (its column's distinct values, as GX
    sees them after :func:`html_safe`, contain the value set); True for every
    other entry (decided by the stacked run). A member for which this is
    False is validated alone, so GX decides it."""
    if entry["type"] not in CONTAINS:
        return True
    kw = entry["kwargs"]
    seen = set(html_safe(frame.select(kw["column"])).get_column(kw["column"]).drop_nulls().unique().to_list())
    return set(kw["value_set"]) <= seen
