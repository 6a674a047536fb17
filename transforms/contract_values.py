"""How the input contract (DESIGN §2, :mod:`fairmon.transforms.contract`) reads
one column's values: booleans, dates, numbers and attribute text, each
refusing what it cannot read with an :class:`InputContractError` that names
the file, the column and the first bad row. The raw data-quality suites'
check frames (:mod:`fairmon.transforms.gate_frames`) render values as these
read them, so the gate passes exactly what the contract accepts. Pure
Polars, no I/O.
"""

from __future__ import annotations

import datetime as dt

import polars as pl

_TRUE = {"true", "1", "t", "1.0"}
_FALSE = {"false", "0", "f", "0.0"}
#: How :func:`zoned_day_text` ends a zoned instant that is no day (what the gate's notes look for).
ZONED_SUFFIX = " UTC"
#: Why such an instant is refused, as the pre-flight and the gate's notes say it.
ZONED_DAY = "a timestamp with a time zone is a day only at midnight UTC: write ds as a DATE or 'YYYY-MM-DD'"


class InputContractError(ValueError):
    """Bad input. ``str()`` names the file, and where known the column and row.

    Rows are 1-based data rows (for CSV, the header is not counted: data row 1
    is line 2 of the file).
    """

    def __init__(self, message: str, *, file: str | None = None, column: str | None = None, row: int | None = None):
        self.message, self.file, self.column, self.row = message, file, column, row
        where = ", ".join(
            x for x in (file, f"column '{column}'" if column else None, f"row {row}" if row else None) if x
        )
        super().__init__(f"{where}: {message}" if where else message)


def first_bad_row(mask: pl.Series) -> int:
    """The 1-based row of the first True of ``mask`` (a boolean Series), the
    row an :class:`InputContractError` names (a profile's rows are mapped to
    file rows by its caller). Raises IndexError when ``mask`` holds no True."""
    return int(mask.arg_true()[0]) + 1


def parse_bool(s: pl.Series, *, file: str, column: str) -> pl.Series:
    """Parse a column of booleans given as bool, 0/1 or true/false strings.

    Nulls stay null. Raises :class:`InputContractError` naming the first row
    whose value is not a boolean.
    """
    if s.dtype == pl.Boolean:
        return s
    if s.dtype.is_integer() and (s.null_count() == s.len() or (s.min() >= 0 and s.max() <= 1)):
        return s.cast(pl.Boolean)  # all 0/1 (the usual case, read off min and max without a scan per value)
    if s.dtype.is_numeric():
        if s.dtype.is_float():  # pandas writes a missing label as NaN: null, as a CSV's empty cell
            s = s.fill_nan(None)
        bad = s.is_not_null() & ~((s == 0) | (s == 1))
        if bad.any():
            i = first_bad_row(bad)
            raise InputContractError(f"expected a boolean (0/1), got {s[i - 1]!r}", file=file, column=column, row=i)
        return s.cast(pl.Boolean)
    if s.dtype in (pl.String, pl.Categorical) or isinstance(s.dtype, pl.Enum):
        low = s.cast(pl.String).str.strip_chars().str.to_lowercase()
        ok = low.is_null() | low.is_in(list(_TRUE | _FALSE))
        if not ok.all():
            i = first_bad_row(~ok)
            raise InputContractError(
                f"expected a boolean (true/false or 0/1), got {s[i - 1]!r}", file=file, column=column, row=i
            )
        return (
            pl.DataFrame({"v": low})
            .select(pl.when(pl.col("v").is_null()).then(None).otherwise(pl.col("v").is_in(list(_TRUE))).alias(s.name))
            .to_series()
        )
    raise InputContractError(f"expected a boolean column, found type {s.dtype}", file=file, column=column)


def zoned_day_text(col: pl.Expr) -> pl.Expr:
    """The day of a time-zone-aware timestamp column (Polars ``Datetime``
    with a ``time_zone``), as 'YYYY-MM-DD' text, where it is midnight in
    UTC; elsewhere its instant in UTC as 'YYYY-MM-DD HH:MM:SS[.f] UTC', which is
    no day (the gate's ``ds_is_date`` names it). A timestamp with a zone has
    a day only relative to a zone, and the engines fairmon reads with do not
    agree on one: DuckDB hands its instants over in the session's zone (the
    machine's), Polars in the file's, Spark in UTC (fairmon's session). Only a
    UTC midnight (a day as Spark, or pandas with ``tz='UTC'``, writes it) is
    the same day whichever zone reads it as UTC, so that is what is accepted;
    Tokyo's midnight, 15:00 UTC the day before, is refused rather than read
    as either day. Raises nothing."""
    utc = col.dt.convert_time_zone("UTC")
    return pl.when(utc.dt.time() == dt.time(0)).then(utc.dt.strftime("%Y-%m-%d")).otherwise(_instant_text(utc))


def _instant_text(utc: pl.Expr) -> pl.Expr:
    """A UTC timestamp as 'YYYY-MM-DD HH:MM:SS[.f] UTC' (fractions of a second shown when there are any)."""
    return utc.dt.strftime("%Y-%m-%d %H:%M:%S%.f") + ZONED_SUFFIX


def parse_date(s: pl.Series, *, file: str, column: str) -> pl.Series:
    """Parse a column of dates (Date, Datetime or 'YYYY-MM-DD' text: strings,
    Categorical or Enum). A naive timestamp gives its day; one with a time
    zone only at midnight UTC (:func:`zoned_day_text`).

    Raises :class:`InputContractError` naming the first unparseable or null
    row, or the first zoned timestamp that is not a UTC midnight.
    """
    if s.dtype == pl.Categorical or isinstance(s.dtype, pl.Enum):  # the text of each value, as the gate reads it
        s = s.cast(pl.String)
    if isinstance(s.dtype, pl.Datetime) and s.dtype.time_zone is not None:
        utc = s.dt.convert_time_zone("UTC")
        off = utc.dt.time() != dt.time(0)
        if off.any():
            i = first_bad_row(off)
            instant = utc.slice(i - 1, 1).to_frame("v").select(_instant_text(pl.col("v"))).item()
            raise InputContractError(f"{ZONED_DAY}; got {s[i - 1]} ({instant})", file=file, column=column, row=i)
        s = utc.dt.replace_time_zone(None)
    if s.dtype == pl.Date:
        out = s
    elif isinstance(s.dtype, pl.Datetime):
        out = s.dt.date()
    elif s.dtype == pl.String:
        out = s.str.strip_chars().str.to_date("%Y-%m-%d", strict=False)
        bad = out.is_null() & s.is_not_null()
        if bad.any():
            i = first_bad_row(bad)
            raise InputContractError(f"expected a date YYYY-MM-DD, got {s[i - 1]!r}", file=file, column=column, row=i)
    else:
        raise InputContractError(f"expected a DATE column, found type {s.dtype}", file=file, column=column)
    if out.null_count():
        raise InputContractError("required value is null", file=file, column=column, row=first_bad_row(out.is_null()))
    return out


def parse_float(s: pl.Series, *, file: str, column: str) -> pl.Series:
    """Parse a numeric column (numbers or numeric text); nulls stay null.

    Raises :class:`InputContractError` naming the first row that is not a number.
    """
    if s.dtype.is_numeric():
        return s.cast(pl.Float64)
    out = s.cast(pl.String).str.strip_chars().cast(pl.Float64, strict=False)
    bad = out.is_null() & s.is_not_null()
    if bad.any():
        i = first_bad_row(bad)
        raise InputContractError(f"expected a number, got {s[i - 1]!r}", file=file, column=column, row=i)
    return out


def attribute_text(s: pl.Series, *, file: str, column: str) -> pl.Series:
    """An attribute column as text (its groups, DESIGN §2): text, numbers,
    booleans and dates are spelled as they read, but −0.0 as 0.0: the
    profile scan groups equal values, and −0.0 equals 0.0, so which spelling
    a group kept would depend on its first row (and could differ between a
    file's profile and its rows per cluster bucket); and NaN, a float's
    "no value", as null (a missing group value, never a group "NaN"). Raises
    :class:`InputContractError` naming the file, the column and its type for
    a nested column (struct, list, array) or an object column, whose text
    (``{"a","control"}``) would become groups nobody declared."""
    if s.dtype.is_nested() or s.dtype == pl.Object:
        raise InputContractError(
            f"attribute column has type {s.dtype}; an attribute must be text, a number or a boolean "
            "(a struct or list is not a group)",
            file=file,
            column=column,
        )
    if s.dtype.is_float():
        spelled = pl.when(s.is_nan()).then(None).when(s == 0).then(pl.lit(0, s.dtype)).otherwise(s)
        s = pl.select(spelled.alias(s.name)).to_series()
    return s.cast(pl.String)
