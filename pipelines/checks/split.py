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

from fairmon.transforms.contract import PROFILE_N, PROFILE_ROW

#: Row-wise GX types whose stacked expectation is not the subject's own (the key gains the subject column).
KEYED = frozenset({"expect_compound_columns_to_be_unique", "expect_column_values_to_be_unique"})
#: Kwargs naming the columns a row-wise expectation reads.
COLUMN_KWARGS = ("column", "column_A", "column_B")


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


def member_failures(vr, whole: pl.DataFrame, frame: pl.DataFrame, span: tuple[int, int], names: set[str]):
    """The failures of the subject at rows ``span`` = [lo, hi) of the stacked
    frame ``whole`` (as handed to GX, without HTML escaping) in GX's
    validation result ``vr`` of that stack (result format COMPLETE), for the
    expectations ``names`` its own rows failed: what a run of GX on the
    subject's ``frame`` alone with just those expectations reports (counts,
    first rows, samples; a profile's counts weighted by ``__n`` and its rows
    from ``__first_row``), in the suite's order.

    GX's unexpected rows of the stack, in row order with their values, are
    the subject's own unexpected rows shifted by ``lo`` (a row-wise
    expectation decides each row on its own values), and GX's partial lists
    are the first of them. Returns None when that cannot be relied on, for
    the caller to run GX on the subject alone: a failed expectation on a
    key (the stack's key has the subject column), an exception, an
    unexpected row list missing or out of order, or a column whose pandas
    type in the stack is not the subject's (an integer or boolean column
    with nulls in the stack but none in the subject: GX would show 3.0 where
    it shows 3 alone)."""
    lo, hi = span
    profile = PROFILE_N in frame.columns and PROFILE_ROW in frame.columns
    out = []
    for r in vr.results:
        cfg = r.expectation_config
        if r.success or cfg.meta.get("name") not in names:
            continue
        res = r.result or {}
        idx, values = res.get("unexpected_index_list"), res.get("unexpected_list")
        raised = isinstance(r.exception_info, dict) and r.exception_info.get("raised_exception")
        if cfg.type in KEYED or raised or not _aligned(idx, values):
            return None
        columns = [cfg.kwargs[k] for k in COLUMN_KWARGS if k in cfg.kwargs]
        if not all(_same_pandas_type(whole, frame, c) for c in columns):
            return None
        at = np.asarray(idx, dtype=np.int64)
        a, b = (int(x) for x in np.searchsorted(at, [lo, hi]))
        own = (at[a:b] - lo).tolist()
        if not own:
            return None  # the caller named it failed on these rows: something else is off
        if profile:
            weights, first = frame.get_column(PROFILE_N), frame.get_column(PROFILE_ROW)
            count = int(weights.gather(own).sum())
            rows = sorted(first.gather(own).to_list())[:5]
        else:
            count, rows = len(own), [i + 1 for i in own[:5]]
        out.append(failure(r, count, rows, values[a : min(b, a + 5)]))
    return out


def _aligned(idx, values) -> bool:
    """Whether GX's unexpected row list ``idx`` holds integers in increasing
    order, one per unexpected value of ``values``."""
    if not isinstance(idx, list) or not isinstance(values, list) or len(idx) != len(values):
        return False
    if not all(isinstance(i, int) for i in idx):
        return False
    return len(idx) < 2 or bool(np.all(np.diff(np.asarray(idx, dtype=np.int64)) > 0))


def _same_pandas_type(whole: pl.DataFrame, frame: pl.DataFrame, column: str) -> bool:
    """Whether ``column`` becomes the same pandas type in the stack ``whole``
    as in the subject's ``frame`` (``polars.DataFrame.to_pandas``: an integer
    or boolean column turns float or object only when it holds a null)."""
    if column not in whole.columns or column not in frame.columns:
        return False
    dtype = whole.schema[column]
    if not (dtype.is_integer() or dtype == pl.Boolean):
        return True
    return (whole.get_column(column).null_count() > 0) == (frame.get_column(column).null_count() > 0)
