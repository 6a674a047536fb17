"""A raw suite's critical value expectations evaluated on a file's profile
with Polars, without Great Expectations: the pre-flight check
(:mod:`fairmon.pipelines.ingest.preflight_values`) finds a label outside its
accepted values, a null where none may be, or a repeated id in a second
instead of after GX's import and run.

The entries are the suite's own (``expectations/<suite>.json`` expanded by
:func:`fairmon.pipelines.checks.suites.expand_spec`), so both check the same
rules; each type keeps GX's semantics for a column map expectation as fairmon's
suites use it: nulls are outside the domain of every type but
``ExpectColumnValuesToNotBeNull``; a regex is searched, not anchored (its
own ``^…$`` anchors it); bounds are inclusive. ``mostly`` and strict bounds
are not read (fairmon's suites use neither); a rule whose values cannot be
compared with the column's type is left to the gate.
A profile row stands for ``__n`` file rows, its first at ``__first_row``.
The gate itself still runs on every day that goes on.
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from fairmon.transforms.contract import PROFILE_N, PROFILE_ROW

#: The expectation types evaluated here (column map expectations on one column).
VALUE_TYPES = (
    "ExpectColumnValuesToNotBeNull",
    "ExpectColumnValuesToBeInSet",
    "ExpectColumnValuesToNotBeInSet",
    "ExpectColumnValuesToMatchRegex",
    "ExpectColumnValuesToMatchStrftimeFormat",
    "ExpectColumnValuesToBeBetween",
)


def _as_day(col: pl.Expr, strftime_format: str = "%Y-%m-%d") -> pl.Expr:
    """``col``'s text as a date in ``strftime_format``; null where it is no day of the calendar."""
    return col.cast(pl.String).str.to_date(strftime_format, strict=False)


def _unexpected(entry: dict, col: pl.Expr) -> pl.Expr:
    """The rows ``entry`` (one expanded expectation) counts as unexpected."""
    kw, kind = entry["kwargs"], entry["type"]
    if kind == "ExpectColumnValuesToNotBeNull":
        return col.is_null()
    if kind == "ExpectColumnValuesToBeInSet":
        return col.is_not_null() & ~col.is_in(list(kw["value_set"]))
    if kind == "ExpectColumnValuesToNotBeInSet":
        return col.is_not_null() & col.is_in(list(kw["value_set"]))
    if kind == "ExpectColumnValuesToMatchRegex":
        return col.is_not_null() & ~col.cast(pl.String).str.contains(kw["regex"])
    if kind == "ExpectColumnValuesToMatchStrftimeFormat":  # a day of the calendar, as GX's strptime decides it
        return col.is_not_null() & _as_day(col, kw["strftime_format"]).is_null()
    low, high = kw.get("min_value"), kw.get("max_value")
    out = pl.lit(False)
    if low is not None:
        out = out | (col < low)
    if high is not None:
        out = out | (col > high)
    return col.is_not_null() & out


def failing_values(
    entries: list[dict], frame: pl.DataFrame, limit: int = 5, shown: pl.DataFrame | None = None
) -> list[dict]:
    """The critical value expectations among ``entries`` that ``frame`` (a
    raw check frame: a profile through
    :func:`fairmon.transforms.gate_frames.raw_check_frame`) fails: per
    failing expectation {name, type, column, rows (file rows unexpected),
    first_row (1-based file row of the first), values (up to ``limit``
    distinct unexpected values, as text, first seen first; taken from
    ``shown``, the same rows as read, when given: the check frame trims and
    folds case, and a user searches the file for what it holds), value_set (the
    accepted values, for a set expectation)}. Entries of other types or
    severities, or on a column the frame lacks, are skipped. Raises nothing
    of its own."""
    n = pl.col(PROFILE_N) if PROFILE_N in frame.columns else pl.lit(1)
    first = pl.col(PROFILE_ROW) if PROFILE_ROW in frame.columns else pl.int_range(1, pl.len() + 1)
    out = []
    for entry in entries:
        column = entry["kwargs"].get("column")
        if entry["severity"] != "critical" or entry["type"] not in VALUE_TYPES or column not in frame.columns:
            continue
        try:
            value = shown.get_column(column) if shown is not None and column in shown.columns else pl.col(column)
            bad = frame.select(first.alias("row"), n.alias("n"), pl.col(column).alias("checked"), value.alias("value"))
            bad = bad.filter(_unexpected(entry, pl.col("checked")))
        except (pl.exceptions.PolarsError, TypeError):  # a type the rule cannot compare: the gate reports it
            continue
        if not bad.height:
            continue
        bad = bad.sort("row")
        values = bad.get_column("value").cast(pl.String).fill_null("(empty)").unique(maintain_order=True)
        found = {
            "name": entry["name"],
            "type": entry["type"],
            "column": column,
            "rows": int(bad.get_column("n").sum()),
            "first_row": int(bad.get_column("row")[0]),
            "values": values.head(limit).to_list(),
        }
        if entry["type"] == "ExpectColumnValuesToBeInSet":
            found["value_set"] = [
                str(v).lower() if isinstance(v, bool) else str(v) for v in entry["kwargs"]["value_set"]
            ]
        out.append(found)
    return out


#: The check that a file's rows are dated within the days it is read for (:func:`dated_outside`).
FILES_DAYS = "ds_in_files_days"


def shown_as_checked(raw: pl.DataFrame, checked: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``raw`` (a file or its profile, as read) to quote in a
    failure (``shown`` of :func:`failing_values`), with a time-zone-aware
    ``ds`` replaced by its text in ``checked`` (its raw check frame): its day,
    or its instant in UTC (:func:`fairmon.transforms.contract_values.zoned_day_text`),
    not the instant in the zone DuckDB's session (the machine's) handed it over in.
    Raises nothing."""
    if getattr(raw.schema.get("ds"), "time_zone", None) is None:
        return raw
    return raw.with_columns(checked.get_column("ds"))


def dated_outside(checked: pl.DataFrame, start: dt.date, end: dt.date, shown: pl.DataFrame | None = None) -> list[dict]:
    """The failure, in :func:`failing_values`' form (at most one), of the rows
    of ``checked`` (a raw check frame) dated a real day outside ``start`` ..
    ``end``, the days its file is read for (one day for a day's file, a
    pool's range). The input contract refuses such a file
    (:mod:`fairmon.transforms.contract`), and a raw suite cannot say so (its
    parameters are the input's, not each file's), so the gate and the
    pre-flight check it here, as :data:`FILES_DAYS`. A ``ds`` that is no day
    of the calendar is left to the suite's own checks (never reported twice);
    ``shown``: the same rows as read (:func:`failing_values`). No ``ds``
    column (a layout whose adapter fills it): nothing to check. Raises
    nothing of its own."""
    if "ds" not in checked.columns:
        return []
    real = checked.select(_as_day(pl.col("ds")).is_not_null()).to_series()
    days = [(start + dt.timedelta(days=i)).isoformat() for i in range((end - start).days + 1)]
    entry = {
        "name": FILES_DAYS,
        "type": "ExpectColumnValuesToBeInSet",
        "kwargs": {"column": "ds", "value_set": days},
        "severity": "critical",
    }
    return failing_values([entry], checked.filter(real), shown=None if shown is None else shown.filter(real))
