"""Input contract: parsing and errors that name the file, column and row."""

import datetime as dt

import polars as pl
import pytest

from fairmon.transforms.contract import InputContractError, normalize_impressions
from fairmon.transforms.contract_values import parse_bool

DS = dt.date(2026, 1, 5)
KW = dict(file="day.csv", signals=["like", "share"], attributes=["grp"], ds=DS)


def raw(**over):
    base = {
        "traffic": ["default", "random", "default"],
        "like": ["1", "0", "true"],
        "share": ["0", "false", "0"],
        "grp": ["a", "b", None],
        "extra": ["x", "y", "z"],
    }
    base.update(over)
    return pl.DataFrame(base)


def test_normalizes_to_staging_layout():
    out = normalize_impressions(raw(), **KW)
    assert out.columns == ["ds", "ds_start", "traffic", "arm", "y", "attr__grp", "cbucket", "n", "src_file", "src_row"]
    assert out.get_column("y").to_list() == [True, False, True]
    assert out.get_column("arm").to_list() == ["all"] * 3
    assert out.get_column("attr__grp").to_list() == ["a", "b", None]
    assert out.get_column("ds").to_list() == [DS] * 3
    assert out.get_column("src_row").to_list() == [1, 2, 3]
    assert out.get_column("n").to_list() == [1, 1, 1]


def test_equal_rows_are_staged_once_with_their_count():
    # rows 1, 3, 4 agree on everything staged (y from different signals): one row, n = 3, first row 1
    out = normalize_impressions(
        raw(
            traffic=["default", "random", "default", "default"],
            like=["1", "0", "0", "1"],
            share=["0", "0", "1", "1"],
            grp=["a", "b", "a", "a"],
            extra=["x"] * 4,
        ),
        **KW,
    )
    assert out.select("traffic", "y", "attr__grp", "n", "src_row").rows() == [
        ("default", True, "a", 3, 1),
        ("random", False, "b", 1, 2),
    ]


def test_profile_input_weights_rows_and_names_file_rows():
    # a profile (as the adapters compute in DuckDB): distinct rows with their count and first file row
    prof = raw().with_columns(pl.Series("__n", [10, 5, 2]), pl.Series("__first_row", [1, 4, 9]))
    out = normalize_impressions(prof, **KW)
    assert out.get_column("n").to_list() == [10, 5, 2] and out.get_column("src_row").to_list() == [1, 4, 9]
    bad = prof.with_columns(like=pl.Series(["1", "0", "often"]))
    with pytest.raises(InputContractError, match=r"day.csv, column 'like', row 9: expected a boolean"):
        normalize_impressions(bad, **KW)


def test_label_rule_all():
    out = normalize_impressions(raw(share=["1", "0", "0"]), **{**KW, "label_rule": "all"})
    assert out.get_column("y").to_list() == [True, False, False]


def test_boolean_forms_and_nulls():
    s = parse_bool(pl.Series("b", ["TRUE", "0", None, " 1 ", "f"]), file="f", column="b")
    assert s.to_list() == [True, False, None, True, False]
    assert parse_bool(pl.Series("b", [0, 1, None]), file="f", column="b").to_list() == [False, True, None]


def test_missing_column_names_file_and_column():
    with pytest.raises(InputContractError) as e:
        normalize_impressions(raw().drop("share"), **KW)
    assert "day.csv" in str(e.value) and "column 'share'" in str(e.value)
    assert e.value.column == "share"


def test_wrong_type_names_row():
    with pytest.raises(InputContractError) as e:
        normalize_impressions(raw(like=["1", "yes", "0"]), **KW)
    assert e.value.column == "like" and e.value.row == 2
    assert "day.csv, column 'like', row 2" in str(e.value) and "'yes'" in str(e.value)


def test_numeric_non_boolean_is_rejected():
    with pytest.raises(InputContractError, match="row 3"):
        normalize_impressions(raw(like=[0, 1, 2]), **KW)


def test_unknown_traffic_value():
    with pytest.raises(InputContractError) as e:
        normalize_impressions(raw(traffic=["default", "explore", "random"]), **KW)
    assert e.value.column == "traffic" and e.value.row == 2 and "'explore'" in str(e.value)
    # an extra stage is accepted once configured
    ok = normalize_impressions(raw(traffic=["default", "post_recall", "random"]), **KW, traffic_stages=["post_recall"])
    assert ok.get_column("traffic").to_list() == ["default", "post_recall", "random"]


def test_empty_file():
    with pytest.raises(InputContractError, match="no rows"):
        normalize_impressions(raw().head(0), **KW)


def test_rows_of_another_day_are_rejected():
    with pytest.raises(InputContractError) as e:
        normalize_impressions(raw().with_columns(ds=pl.Series(["2026-01-05", "2026-01-05", "2026-01-06"])), **KW)
    assert e.value.column == "ds" and e.value.row == 3


def test_bad_date_string():
    with pytest.raises(InputContractError, match="column 'ds', row 1"):
        normalize_impressions(raw().with_columns(ds=pl.Series(["05/01/2026", "x", "y"])), **KW)


def test_missing_traffic_column_without_adapter_default():
    with pytest.raises(InputContractError, match="column 'traffic'"):
        normalize_impressions(raw().drop("traffic"), **KW)
    out = normalize_impressions(raw().drop("traffic"), **KW, traffic="random")
    assert set(out.get_column("traffic")) == {"random"}


def test_a_pooled_file_whose_rows_carry_their_own_day_keeps_each_rows_day():
    start = DS - dt.timedelta(days=6)
    days = [str(start), str(DS - dt.timedelta(days=2)), str(DS)]
    out = normalize_impressions(raw(ds=days), **{**KW, "ds_start": start})
    # each row is windowed by its own day: ds_start = ds = the row's day
    assert out.get_column("ds").cast(pl.String).to_list() == days
    assert out.get_column("ds_start").to_list() == out.get_column("ds").to_list()
    late = [str(start), str(DS + dt.timedelta(days=1)), str(DS)]
    with pytest.raises(InputContractError, match=r"column 'ds', row 2: row dated 2026-01-06 outside the pool's range"):
        normalize_impressions(raw(ds=late), **{**KW, "ds_start": start})


def test_a_pool_without_per_row_dates_covers_its_declared_range():
    start = DS - dt.timedelta(days=6)
    out = normalize_impressions(raw(ds=[str(DS)] * 3), **{**KW, "ds_start": start})  # ds filled with the range end
    assert out.get_column("ds_start").to_list() == [start] * 3
    assert out.get_column("ds").to_list() == [DS] * 3
