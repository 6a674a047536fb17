"""Input column types as real exporters write them (pandas, Spark, BigQuery): the gate passes exactly what
the input contract parses (DESIGN §2), and what the contract refuses is refused by name, never by a crash."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from fairmon.pipelines.checks.suites import expand_spec, load_spec
from fairmon.pipelines.checks.value_checks import failing_values
from fairmon.pipelines.faces.cli import app
from fairmon.transforms.contract_values import InputContractError, parse_bool, parse_date
from fairmon.transforms.gate_frames import raw_check_frame

D1, D2 = dt.date(2026, 1, 1), dt.date(2026, 1, 2)


def _contract_parquet(root: Path, days: list[dt.date], rows: int = 40) -> Path:
    """A contract-format project of Parquet logs (``logs/<day>.parquet``: default and random rows, requests
    of 4 rows, two groups); returns its config."""
    (root / "logs").mkdir(parents=True)
    for day in days:
        i = np.arange(rows)
        pl.DataFrame(
            {
                "ds": [day] * rows,
                "traffic": np.where(i % 2 == 0, "default", "random"),
                "request_id": [f"{day}-{k // 4}" for k in i],
                "like": (i % 3 == 0).astype(np.int8),
                "g": np.where(i % 4 < 2, "a", "b"),
            }
        ).write_parquet(root / "logs" / f"{day}.parquet")
    cfg = root / "fairmon.toml"
    cfg.write_text(
        'warehouse = "warehouse"\nduckdb = "fairmon.duckdb"\n[impressions]\nformat = "contract"\n'
        'path = "logs/{ds}.parquet"\nsignals = ["like"]\nattributes = ["g"]\nrandom_window_days = 2\n'
    )
    return cfg


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_an_empty_cluster_id_in_a_parquet_log_is_named_not_a_crash(tmp_path):
    """Parquet files of one schema are profiled in one DuckDB scan; a null request_id in the second day's
    file names that file and row (the scan's file index came back as a Decimal: a TypeError and a
    traceback). Run alone the day is refused at pre-flight (exit 1); in a range the other day publishes
    and this one is quarantined naming the file and row (exit 1 too; it failed, exit 4, before)."""
    cfg = _contract_parquet(tmp_path / "p", [D1, D2])
    f = tmp_path / "p" / "logs" / f"{D2}.parquet"
    blank = pl.when(pl.int_range(pl.len()) == 2).then(None).otherwise("request_id").alias("request_id")
    pl.read_parquet(f).with_columns(blank).write_parquet(f)
    named = f"{D2}.parquet: column 'request_id', row 3: the cluster id is empty"
    for args, published in ((["--start", D1, "--end", D2], True), (["--start", D2, "--end", D2], False)):
        res = CliRunner().invoke(app, [str(a) for a in ["backfill", "-c", cfg, *args, "--no-prefect"]])
        out = res.output.replace("\n", " ")
        assert res.exit_code == 1 and "Traceback" not in out and "TypeError" not in out, out
        assert named in out, out
        assert (f"{D1} published" in out) == published and (
            f"{D2} quarantined at stage impressions" in out
        ) == published


@pytest.mark.parametrize("dtype", [pl.Decimal(10, 2), pl.Decimal(4, 1), pl.Float32])
def test_a_numeric_label_is_checked_as_the_number_the_contract_reads(dtype):
    """A 0/1 label typed DECIMAL (1.00, not the text '1.00') or FLOAT passes the raw suite's boolean rule in
    the pre-flight's evaluation, as parse_bool reads it; 2 is refused by both."""
    raw = pl.DataFrame({"ds": [str(D1)] * 4, "traffic": ["default"] * 4, "s1": [1, 0, 0, 1], "g": ["a"] * 4})
    raw = raw.with_columns(pl.col("s1").cast(dtype))
    params = {
        "required_columns": ["ds", "traffic", "s1", "g"],
        "signals": ["s1"],
        "attributes": ["g"],
        "traffic_values": ["default", "random"],
    }
    entries = expand_spec(load_spec("impressions_raw"), params, raw.columns, {})
    checked = raw_check_frame(raw, ["ds", "traffic", "s1"])
    assert parse_bool(raw.get_column("s1"), file="f", column="s1").to_list() == [True, False, False, True]
    assert failing_values(entries, checked) == []
    two = raw.with_columns(pl.Series("s1", [1, 2, 0, 1]).cast(dtype))
    with pytest.raises(InputContractError, match="row 2"):
        parse_bool(two.get_column("s1"), file="f", column="s1")
    (found,) = failing_values(entries, raw_check_frame(two, ["ds", "traffic", "s1"]))
    assert found["name"] == "signal_is_boolean[s1]" and found["first_row"] == 2


def test_enum_and_categorical_text_parse_as_the_gate_reads_them():
    """A label or a day given as Enum or Categorical text (pandas' category, Arrow's dictionary) is the text
    of each value, which the gate checks; the contract used to refuse the types themselves (exit 4)."""
    labels = pl.Series("y", ["true", "false", "TRUE"])
    for dtype in (pl.Categorical, pl.Enum(["true", "false", "TRUE"])):
        assert parse_bool(labels.cast(dtype), file="f", column="y").to_list() == [True, False, True]
    days = pl.Series("ds", [str(D1), str(D2)])
    for dtype in (pl.Categorical, pl.Enum([str(D1), str(D2)])):
        assert parse_date(days.cast(dtype), file="f", column="ds").to_list() == [D1, D2]


@pytest.mark.parametrize(
    "suite, columns", [("scores_raw", ["ds", "score", "outcome"]), ("labels_raw", ["ds", "label", "gold_label"])]
)
def test_a_null_day_in_a_score_or_labeling_log_is_a_named_failure(suite, columns):
    """parse_date refuses a null day (it failed the day, exit 4); the logs' suites now hold ds_not_null, as
    the impressions suite does, so the file is quarantined naming the row."""
    raw = pl.DataFrame({"ds": [str(D1), None, str(D1)]})
    with pytest.raises(InputContractError, match="row 2: required value is null"):
        parse_date(raw.get_column("ds"), file="f", column="ds")
    params = {"required_columns": ["ds"], "attributes": []}
    entries = [e for e in expand_spec(load_spec(suite), params, ["ds"], {}) if e["kwargs"].get("column") == "ds"]
    (found,) = failing_values(entries, raw_check_frame(raw, columns))
    assert found["name"] == "ds_not_null" and found["first_row"] == 2


def test_a_file_polars_panics_on_is_refused_by_name_not_by_a_crash(tmp_path, monkeypatch):
    """Polars panics (a BaseException, which no day's ``except Exception`` catches) on some Parquet files, e.g.
    a time zone written "Z" by a Java exporter: read_table turns it into the file's InputContractError, so the
    day fails naming the file and the run goes on, instead of the whole run ending with a traceback."""
    from fairmon.pipelines.ingest import adapters

    f = tmp_path / "scores.parquet"
    pl.DataFrame({"ds": [D1]}).write_parquet(f)

    def panics(*a, **k):
        raise pl.exceptions.PanicException("unable to parse time zone: 'Z'\nbacktrace")

    monkeypatch.setattr(adapters.pl, "read_parquet", panics)
    with pytest.raises(InputContractError, match=rf"^{f}: Polars cannot read it: unable to parse time zone: 'Z'$"):
        adapters.read_table(f)


def test_a_row_with_more_or_fewer_fields_than_the_header_is_named(tmp_path):
    """A CSV row with an unquoted comma: the reader's refusal names the row (row 1 = the file's second line;
    a quoted value over two lines is one row) and its field counts, not Polars' hint of an option fairmon lacks."""
    from fairmon.pipelines.ingest.adapters import read_table
    from fairmon.transforms.contract import InputContractError

    path = tmp_path / "day.csv"
    path.write_text('a,b,c\n1,"x\ny",3\n4,5,6\n7,8,9,10\n')
    with pytest.raises(InputContractError) as e:
        read_table(path)
    assert "row 3 has 4 fields where the header has 3 (quote a value that holds a comma)" in str(e.value)
    assert str(path) in str(e.value) and "truncate_ragged_lines" not in str(e.value)
    # a row short of a field: Polars pads it with null (a phantom arm "all", a missing id); refused too, an
    # empty last value is not a short row
    path.write_text('a,b,c\n1,"x\ny",3\n4,5,\n7,8\n')
    with pytest.raises(InputContractError, match="row 3 has 2 fields where the header has 3 .a value is missing.$"):
        read_table(path)
    path.write_text("a,b,c\n1\n")
    with pytest.raises(InputContractError, match="row 1 has 1 field where the header has 3 .values are missing.$"):
        read_table(path)
    path.write_text("a,b,c\n1,2,3\n4,5,\n")
    assert read_table(path).rows() == [("1", "2", "3"), ("4", "5", None)]
    # a blank line before a row: Polars read it as a row of nulls, which the gate refused as "row 2: the cluster
    # id is empty ... or set cluster_by = none"; named as what it is. One column: a blank line is an empty value
    for text in ("a,b,c\n1,2,3\n\n4,5,\n", "a,b,c\r\n1,2,3\r\n\r\n\r\n4,5,6\r\n\r\n"):
        path.write_bytes(text.encode())
        with pytest.raises(InputContractError, match="row 2 is a blank line .delete it: a row needs the header's 3"):
            read_table(path)
    path.write_text("a\n1\n\n2\n")
    assert read_table(path).rows() == [("1",), (None,), ("2",)]
    # blank lines at the end are no rows (Polars read each as nulls: a day quarantined for "row 3: the cluster id
    # is empty"); a row of empty values (",,") stays one
    for text, rows in (("a,b\n1,2\n\n", 1), ("a,b\r\n1,2\r\n\r\n\r\n", 1), ("a,b\n1,2", 1), ("a,b\n1,2\n,\n", 2)):
        path.write_bytes(text.encode())
        assert read_table(path).height == rows, text
