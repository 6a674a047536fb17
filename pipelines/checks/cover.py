"""The rows of a frame that decide a suite of value checks: for each column
(or pair of columns) a check reads, the first row of each of its distinct
values (:func:`covering_rows`).

A row-wise check on one column passes or fails a row by that row's value
alone, so the rows that share a value pass or fail together, and GX run on
one row per value decides every row of the frame: the frame passes exactly
when those rows pass. An impressions file's profile at K = 4,096 holds
~95,000 distinct rows (groups x signals), but each column few values (4,096
for the group, 2 for a signal): the raw suite then validates ~4,100 rows a
file instead (:meth:`fairmon.pipelines.checks.gate.QualityGate.validate_many`).
A frame that fails is validated whole, for GX to count its failing rows.
"""

from __future__ import annotations

import re

import polars as pl

#: GX types that fail a row by its value of ``column`` alone (the gate's stacked
#: runs, :mod:`fairmon.pipelines.checks.split` and the covering rows here all rely on it).
ROW_WISE_ONE_COLUMN = frozenset(
    {
        "expect_column_values_to_not_be_null",
        "expect_column_values_to_be_null",
        "expect_column_values_to_be_in_set",
        "expect_column_values_to_not_be_in_set",
        "expect_column_values_to_match_regex",
        "expect_column_values_to_match_strftime_format",
        "expect_column_values_to_be_between",
    }
)
#: GX types decided by the values of ``column``: the row-wise ones and the column's
#: distinct values (one row of each value keeps them).
ONE_COLUMN = ROW_WISE_ONE_COLUMN | {"expect_column_distinct_values_to_contain_set"}
#: GX types decided row by row on the values of ``column_A`` and ``column_B`` together.
PAIR = frozenset({"expect_column_pair_values_a_to_be_greater_than_b", "expect_column_pair_values_to_be_equal"})
#: GX types on the columns present, or on at least one row (a minimum of at most 1, no maximum).
SHAPE = frozenset({"expect_column_to_exist", "expect_table_row_count_to_be_between"})


def covered_columns(entries: list[dict]) -> list[tuple[str, ...]] | None:
    """The columns (or column pairs) whose values decide the expanded
    expectations ``entries`` (:func:`fairmon.pipelines.checks.suites.expand_spec`),
    each once, in order; None when some expectation is decided otherwise
    (uniqueness, a ``mostly`` share, a row condition, a row count above 1,
    any other type), so the frame must be validated whole."""
    out: list[tuple[str, ...]] = []
    for e in entries:
        kind, kw = snake_type(e["type"]), e["kwargs"]
        if "row_condition" in kw or kw.get("mostly", 1) != 1:
            return None
        if kind in ONE_COLUMN:
            out.append((kw["column"],))
        elif kind in PAIR:
            out.append((kw["column_A"], kw["column_B"]))
        elif kind == "expect_table_row_count_to_be_between":
            if kw.get("max_value") is not None or (kw.get("min_value") or 0) > 1:
                return None
        elif kind not in SHAPE:
            return None
    return list(dict.fromkeys(out))


def covering_rows(frame: pl.DataFrame, columns: list[tuple[str, ...]]) -> pl.DataFrame:
    """The rows of ``frame`` that are the first with their value of some
    column (or pair of values of some pair) of ``columns``, in frame order
    (nulls are a value: a null row is kept); the first row when ``columns``
    is empty and the frame has rows. Every value of every listed column
    (pair) of ``frame`` is in the result, and no other."""
    if not columns:
        return frame.head(1)
    firsts = [
        pl.col(c[0]).is_first_distinct() if len(c) == 1 else pl.struct(list(c)).is_first_distinct() for c in columns
    ]
    return frame.filter(pl.any_horizontal(firsts))


def snake_type(name: str) -> str:
    """``ExpectColumnValuesToBeInSet`` -> ``expect_column_values_to_be_in_set``
    (a suite file's class name as GX's type name; a snake name is returned as it is)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
