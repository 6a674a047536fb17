"""The pieces that make the GX gates cheaper at many groups without changing
what they decide: the rows that hold every value of the columns a suite
checks (pipelines/checks/cover.py) and the columns a suite reads
(pipelines/checks/suites.py read_columns), with hand-derived cases."""

import polars as pl

from fairmon.pipelines.checks.cover import covered_columns, covering_rows
from fairmon.pipelines.checks.split import unexpected_rows
from fairmon.pipelines.checks.suites import expand_spec, load_spec, read_columns

RAW_PARAMS = {
    "required_columns": ["ds", "traffic", "arm", "s1", "grp"],
    "signals": ["s1"],
    "attributes": ["grp"],
    "traffic_values": ["default", "random"],
}


def _entry(kind: str, **kwargs) -> dict:
    return {"name": kind, "type": kind, "severity": "critical", "kwargs": kwargs}


def test_the_raw_suite_is_decided_by_its_columns_values():
    """impressions_raw checks each column's values on their own: its columns
    (each once, in the suite's order) decide it; a column's existence and a
    minimum of one row add none."""
    cols = ["ds", "traffic", "arm", "s1", "grp", "id_copies"]
    entries = expand_spec(load_spec("impressions_raw"), RAW_PARAMS, cols, {})
    assert covered_columns(entries) == [("ds",), ("traffic",), ("s1",), ("grp",), ("id_copies",)]


def test_checks_not_decided_by_values_alone_need_the_whole_frame():
    """Uniqueness (multiplicity), a mostly share, a row count above one and
    a row condition depend on more than each value: no covering rows. A
    pair check is covered by its pairs."""
    pair = _entry("ExpectColumnPairValuesAToBeGreaterThanB", column_A="hi", column_B="lo", or_equal=True)
    assert covered_columns([pair]) == [("hi", "lo")]
    for bad in [
        _entry("ExpectCompoundColumnsToBeUnique", column_list=["a", "b"]),
        _entry("ExpectColumnValuesToBeUnique", column="a"),
        _entry("ExpectColumnValuesToNotBeNull", column="a", mostly=0.5),
        _entry("ExpectTableRowCountToBeBetween", min_value=2),
        _entry("ExpectTableRowCountToBeBetween", min_value=1, max_value=9),
        _entry("ExpectColumnValuesToBeInSet", column="a", value_set=["x"], row_condition='b=="y"'),
    ]:
        assert covered_columns([pair, bad]) is None, bad


def test_covering_rows_hold_every_value_once_first():
    """Rows 0..6 of (a, b): a's values x, y, null first at rows 0, 2, 4; b's
    1, 2, 3 first at rows 0, 1, 5: covering a and b keeps rows 0, 1, 2, 4, 5
    (rows 3 and 6 repeat values). The pairs (x,1) (x,2) (y,2) (x,2) (null,1)
    (y,3) (x,1) are first at the same rows. With a = x y y x x y x the pairs
    (x,1) (y,2) (y,2) (x,2) (x,1) (y,3) (x,1) are first at rows 0, 1, 3, 5;
    covering no column keeps the first row."""
    f = pl.DataFrame({"a": ["x", "x", "y", "x", None, "y", "x"], "b": [1, 2, 2, 2, 1, 3, 1]}).with_row_index()
    assert covering_rows(f, [("a",), ("b",)]).get_column("index").to_list() == [0, 1, 2, 4, 5]
    assert covering_rows(f, [("a", "b")]).get_column("index").to_list() == [0, 1, 2, 4, 5]
    g = f.with_columns(pl.Series("a", ["x", "y", "y", "x", "x", "y", "x"]))
    assert covering_rows(g, [("a", "b")]).get_column("index").to_list() == [0, 1, 3, 5]
    assert covering_rows(g, []).get_column("index").to_list() == [0]


def test_a_frame_is_cut_to_the_columns_its_suite_reads():
    """reo_ab's expectations name some of its columns: those are kept, in
    the frame's order; an expectation with a kwarg that might name a
    column keeps them all, and so does a suite naming none or checking the
    table's columns (a cut frame would pass a column count or list)."""
    cols = ["ds", "x", "lo", "hi", "unused"]
    entries = [
        _entry("ExpectColumnValuesToNotBeNull", column="x"),
        _entry("ExpectColumnPairValuesAToBeGreaterThanB", column_A="hi", column_B="lo", or_equal=True),
        _entry("ExpectCompoundColumnsToBeUnique", column_list=["ds", "x"]),
    ]
    assert read_columns(entries, cols) == ["ds", "x", "lo", "hi"]
    assert read_columns([*entries, _entry("ExpectColumnValuesToBeInSet", column="x", other="unused")], cols) == cols
    assert read_columns([_entry("ExpectTableRowCountToBeBetween", min_value=1)], cols) == cols
    # a check on the table's columns would pass on a cut frame: the suite keeps every column
    for table_check in (
        _entry("ExpectTableColumnCountToBeBetween", max_value=4),
        _entry("ExpectTableColumnsToMatchOrderedList", column_list=["ds", "x"]),
        _entry("ExpectTableColumnsToMatchSet", column_set=["ds", "x"]),
    ):
        assert read_columns([*entries, table_check], cols) == cols, table_check["type"]
    assert read_columns([*entries, _entry("ExpectTableRowCountToBeBetween", min_value=1)], cols) == cols[:4]


def test_a_stacks_unexpected_rows_are_read_only_when_gx_lists_them_row_by_row():
    """GX's unexpected_index_list of a stack: increasing row positions are
    used as they are; an empty, unordered, non-integer or multi-column list
    (GX decided for the stack, or named rows otherwise) is not."""
    assert unexpected_rows([3, 5, 9]).tolist() == [3, 5, 9]
    assert unexpected_rows([7]).tolist() == [7]
    for bad in [[], None, [5, 3], [2, 2], ["a", "b"], [1.5, 2.0], [(1, 2), (3, 4)], [{"i": 1}]]:
        assert unexpected_rows(bad) is None, bad
