"""The API counts a profile of the caller's rows (one row per distinct
combination of the columns it counts, with its rows and first row), and
converts only those columns: the input contract must still name the first
row holding a bad value, and the counts must be the rows' own. Expected rows
and counts are computed here with NumPy from how the frames are built."""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pytest

import fairmon
from fairmon.transforms.contract import InputContractError

ROWS = 6000


def _rows(seed: int = 3) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "traffic": np.where(rng.random(ROWS) < 0.4, "random", "default"),
            "g": rng.choice(["a", "b", "c"], ROWS),
            "y": np.where(rng.random(ROWS) < 0.3, "true", "false"),
        }
    )


@pytest.mark.parametrize("kind", ["polars", "pandas"])
def test_the_first_row_with_a_bad_label_is_named_among_several_late_ones(kind):
    # bad labels at 0-based rows 4000 ("maybe"), 2998 ("yes"), 5000 ("yes"), 3500 ("nope"): the first is
    # 1-based row 2999, though its value's combination with traffic and group repeats later
    y = _rows().get_column("y").to_list()
    for i, v in ((4000, "maybe"), (2998, "yes"), (5000, "yes"), (3500, "nope")):
        y[i] = v
    rows = _rows().with_columns(pl.Series("y", y))
    frame = rows.to_pandas() if kind == "pandas" else rows
    with pytest.raises(InputContractError, match=r"rows, column 'y', row 2999: expected a boolean .*got 'yes'"):
        fairmon.reo(frame, group="g", label="y")


@pytest.mark.parametrize("kind", ["polars", "pandas"])
def test_the_first_row_with_an_unknown_traffic_value_is_named(kind):
    tr = _rows().get_column("traffic").to_list()
    tr[5999], tr[4321], tr[4400] = "explore", None, "explore"
    rows = _rows().with_columns(pl.Series("traffic", tr))
    frame = rows.to_pandas() if kind == "pandas" else rows
    with pytest.raises(InputContractError, match=r"column 'traffic', row 4322: unknown traffic value None"):
        fairmon.group_counts(frame, group="g", label="y")


def test_counts_are_the_rows_own_and_unused_columns_are_not_converted():
    rows = _rows()
    y = rows.get_column("y").to_numpy() == "true"
    # a float group: 0.0 and -0.0 are one group "0.0", NaN a missing value; and a column the count does
    # not use that Arrow cannot convert (a dict among strings): counting never converts it
    h = np.array([0.0, -0.0, np.nan, 1.5])[np.arange(ROWS) % 4]
    frame = rows.to_pandas().assign(h=h, note=[{"a": 1}] + ["x"] * (ROWS - 1))
    got = pl.from_pandas(fairmon.group_counts(frame, group=["g", "h"], label="y"))
    tr, g = rows.get_column("traffic").to_numpy(), rows.get_column("g").to_numpy()
    expected = []
    for t in ("default", "random"):
        keep = tr == t
        for attr, values in (("g", g), ("h", np.array(["0.0", "0.0", "(missing)", "1.5"])[np.arange(ROWS) % 4])):
            for v in sorted(set(values)):
                m = keep & (values == v)
                expected.append((t, "all", attr, v, int(m.sum()), int((m & y).sum())))
    assert sorted(got.rows()) == sorted(expected)


def test_an_object_column_is_still_rejected_by_the_contract():
    rows = _rows().head(4).with_columns(pl.Series("g", [object()] * 4, dtype=pl.Object))
    with pytest.raises(InputContractError, match=r"rows, column 'g': attribute column has type Object;"):
        fairmon.group_counts(rows, group="g", label="y")


def test_a_nested_group_column_is_rejected_as_before():
    rows = _rows().head(4).with_columns(pl.Series("g", [[1], [2], [1], [2]]))
    with pytest.raises(InputContractError, match=r"column 'g': attribute column has type List\(Int64\);"):
        fairmon.reo(rows, group="g", label="y")


def test_a_missing_column_names_every_column_of_the_callers_frame():
    frame = _rows().head(4).to_pandas().assign(extra=1)
    with pytest.raises(ValueError, match=r"no column 'region'; columns present: 'traffic', 'g', 'y', 'extra'"):
        fairmon.reo(frame, group="region", label="y")


@pytest.mark.parametrize("missing", [None, float("nan")])
def test_a_missing_label_is_refused_naming_column_and_row(missing):
    """pandas writes a missing 0/1 label as NaN (a float column) or None: neither is a negative label, and the
    pipeline's contract refuses a null signal, so the API names the column and the first such row."""
    rows = pd.DataFrame({"traffic": ["default", "random"] * 4, "g": list("abab" * 2), "y": [1.0, 0.0] * 4})
    rows["y"] = rows["y"].astype(object if missing is None else float)
    rows.loc[5, "y"] = missing
    with pytest.raises(InputContractError, match=r"rows, column 'y', row 6: the label is missing"):
        fairmon.group_counts(rows, group="g", label="y")
    rows.loc[5, "y"] = 1.0  # 0/1 floats are labels: default rows are group a, all 1; random rows group b, one 1
    counts = fairmon.group_counts(rows, group="g", label="y")
    got = {(r.traffic, r.group, r.n, r.n_pos) for r in counts.itertuples()}
    assert got == {("default", "a", 4, 4), ("random", "b", 4, 1)}


@pytest.mark.parametrize(
    ("column", "bad", "shown"), [("g", {"a": 1}, "dict"), ("g", 5, "int '5'"), ("y", object(), "object")]
)
def test_a_counted_pandas_column_arrow_cannot_read_is_named_with_its_first_bad_row(column, bad, shown):
    """A pandas object column with a value Arrow cannot convert (a dict, a Python object) or whose types do not
    go together (an int among strings) is refused naming the column and the first such row (1-based row 4001
    for 0-based 4000), not with Arrow's message, which names neither."""
    frame = _rows().to_pandas()
    values = frame[column].astype(object).to_list()
    values[4000], values[4500] = bad, bad
    frame[column] = pd.Series(values, dtype=object)
    with pytest.raises(InputContractError, match=rf"rows, column '{column}', row 4001: .*\({shown}"):
        fairmon.reo(frame, group="g", label="y")


def test_a_column_whose_type_arrow_cannot_read_is_named_without_a_row():
    """When no part of a column converts, its type is at fault (complex numbers; categories of mixed types,
    used or not): the refusal names the column and the caller's type, and no row (every row's value is fine),
    also on a frame without rows."""
    empty = pd.DataFrame({"traffic": pd.Series([], dtype=object), "g": np.array([], dtype=complex), "y": []})
    with pytest.raises(InputContractError, match=r"^rows, column 'g': its type complex128 cannot be read"):
        fairmon.reo(empty, group="g", label="y")
    frame = _rows().to_pandas()
    frame["g"] = pd.Categorical(frame["g"], categories=["a", "b", "c", 1])
    with pytest.raises(InputContractError, match=r"^rows, column 'g': its type category cannot be read"):
        fairmon.reo(frame, group="g", label="y")


def test_a_column_of_mixed_types_names_the_row_where_its_type_changes():
    """Ints then a string: the first string's row is named, with the type of the values before it."""
    frame = _rows().to_pandas()
    frame["g"] = pd.Series([7, 8, 9] + frame["g"].to_list()[3:], dtype=object)
    with pytest.raises(InputContractError, match=r"column 'g', row 4: .*\(str '\w' after int values\)"):
        fairmon.reo(frame, group="g", label="y")


def test_a_lazy_frame_is_refused_with_what_to_do():
    with pytest.raises(TypeError, match=r"got polars\.lazyframe\.frame\.LazyFrame; call \.collect\(\) on it first"):
        fairmon.reo(_rows().lazy(), group="g", label="y")


def test_the_package_shows_its_api_not_its_imports():
    """dir(fairmon) lists the API and the version, not the helpers its module imports."""
    names = dir(fairmon)
    assert {"reo", "reo_groups", "group_counts", "run_day", "__version__"} <= set(names)
    assert "PackageNotFoundError" not in names and "import_module" not in names
