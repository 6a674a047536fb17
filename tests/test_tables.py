"""The output-table registry (DESIGN §1 "Tables are declared once"): the DuckDB
schemas, the estimators' frames, the gate suites and docs/tables.md all agree
with it."""

import datetime as dt
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest

from fairmon.pipelines.quality import DQResult, dq_frame, load_spec
from fairmon.pipelines.storage import tables as ddl
from fairmon.pipelines.storage.warehouse import sync_duckdb
from fairmon.transforms.decision_tables import sdt_table, threshold_tables
from fairmon.transforms.quality import group_counts_check_frame, reo_check_frame
from fairmon.transforms.reo_tables import reo_ab_table, reo_tables
from fairmon.transforms.tables import GATED_TABLES, TABLES, Column, Table

D = dt.date(2026, 2, 3)
REPO = Path(__file__).resolve().parent.parent


def _counts() -> pl.DataFrame:
    rows = []
    for traffic, arm, n, pos in [
        ("default", "control", (4000, 6000), (600, 1200)),
        ("default", "treatment", (4000, 6000), (700, 1100)),
        ("random", "all", (2000, 2000), (200, 260)),
    ]:
        for g, ng, pg in zip(("a", "b"), n, pos, strict=True):
            rows.append(("impressions", traffic, arm, "grp", g, ng, pg, D, D))
    cols = ["source", "traffic", "arm", "attribute", "group", "n", "n_pos", "window_start", "window_end"]
    return (
        pl.DataFrame(rows, schema=cols, orient="row")
        .with_columns(pl.lit(D).alias("ds"))
        .select(list(TABLES["group_counts"].schema))
        .cast(TABLES["group_counts"].schema)
    )


def _frames() -> dict[str, pl.DataFrame]:
    counts = _counts()
    group, overall = reo_tables(counts, D)
    ab = reo_ab_table(counts, D, [("control", "treatment")], methods=("delta", "partition"), folds=4)
    rng = np.random.default_rng(0)
    s = rng.uniform(0, 10, 4000)
    scored = pl.DataFrame(
        {
            "model": "m",
            "score": s,
            "outcome": rng.random(4000) < s / 10,
            "attr__race": rng.choice(["x", "y"], 4000),
        }
    )
    prev, diff = threshold_tables(scored, D, (D, D), [("m", 5.0, 3.0)], ["race"])
    conf = pl.DataFrame(
        {
            "attribute": ["g"] * 4,
            "group": ["u", "u", "v", "v"],
            "labeler_id": ["*", "L1", "*", "L1"],
            "tp": [80, 40, 70, 35],
            "fn": [20, 10, 30, 15],
            "fp": [30, 15, 20, 10],
            "tn": [170, 85, 180, 90],
        }
    )
    sdt = sdt_table(conf, D, (D, D))
    dq = dq_frame(D, [DQResult("reo", "reo", "reo", 5, [])])
    return {
        "group_counts": counts,
        "reo_group": group,
        "reo": overall,
        "reo_ab": ab,
        "threshold_prevalence": prev,
        "threshold_prevalence_diff": diff,
        "sdt": sdt,
        "dq_results": dq,
    }


def test_every_output_table_is_declared_and_frames_match_the_registry():
    frames = _frames()
    assert set(frames) == set(TABLES)
    for name, frame in frames.items():
        assert frame.height > 0, name
        assert dict(frame.schema) == TABLES[name].schema, name


def test_created_duckdb_schemas_equal_the_registry(tmp_path):
    con = duckdb.connect(str(tmp_path / "t.duckdb"))
    frames = {k: v.with_columns(pl.lit("r1").alias("run_id")) for k, v in _frames().items()}
    sync_duckdb(con, D, frames)
    for name, t in TABLES.items():
        described = con.sql(f'DESCRIBE "{name}"').pl()
        assert described.get_column("column_name").to_list() == [c.name for c in t.stored_columns], name
        assert described.get_column("column_type").to_list() == [ddl.duckdb_type(c.dtype) for c in t.stored_columns]
        n = con.sql(f'SELECT count(*) FROM "{name}" WHERE ds = $d', params={"d": D}).fetchall()[0][0]
        assert n == frames[name].height
    # a second sync of the day replaces, never appends
    sync_duckdb(con, D, frames)
    assert con.sql('SELECT count(*) FROM "reo"').fetchall()[0][0] == frames["reo"].height
    con.close()


def test_published_views_show_only_days_whose_checks_all_passed(tmp_path):
    con = duckdb.connect(str(tmp_path / "t.duckdb"))
    good, bad = D, D + dt.timedelta(days=1)
    for day, ok in ((good, True), (bad, False)):
        reo = _frames()["reo"].with_columns(pl.lit(day).alias("ds"), pl.lit("r").alias("run_id"))
        failures = [] if ok else [{"name": "x", "severity": "critical"}]
        dq = dq_frame(day, [DQResult("reo", "reo", "reo", 1, failures)]).with_columns(pl.lit("r").alias("run_id"))
        sync_duckdb(con, day, {"reo": reo, "dq_results": dq})
    days = con.sql("SELECT DISTINCT ds FROM reo_published").pl().get_column("ds").to_list()
    assert days == [good]
    assert set(GATED_TABLES) == {n for n, t in TABLES.items() if t.published_view}
    assert "dq_results" not in GATED_TABLES
    con.close()


def test_suites_name_only_declared_columns_and_the_declared_key():
    frames = _frames()
    checked = dict(frames)  # the gate validates these derived frames
    totals = frames["group_counts"].group_by("traffic", "arm").agg(pl.col("n").sum())  # one attribute
    checked["group_counts"] = group_counts_check_frame(frames["group_counts"], totals)
    checked["reo"] = reo_check_frame(frames["reo"])
    for name, t in TABLES.items():
        spec = load_spec(t.suite)
        named: set[str] = set()
        for e in spec["expectations"]:
            kw = e["kwargs"]
            named |= {kw[k] for k in ("column", "column_A", "column_B") if k in kw}
            named |= set(kw.get("column_list", []))
            if e["type"] == "ExpectCompoundColumnsToBeUnique":
                assert tuple(kw["column_list"]) == t.key, name
        assert named <= set(checked[name].columns), (name, named - set(checked[name].columns))


def test_identifiers_outside_the_pattern_are_refused():
    with pytest.raises(ValueError, match="identifier"):
        ddl.ident('reo"; DROP TABLE runs; --')
    with pytest.raises(ValueError, match="identifier"):
        Table("bad table", "", "", ("ds",), (Column("ds", pl.Date, "", ""),), "x")
    with pytest.raises(ValueError, match="first column"):
        Table("t", "", "", ("n",), (Column("n", pl.Int64, "", ""),), "x")
    assert ddl.ident("group") == '"group"'


def test_docs_tables_md_is_generated_from_the_registry():
    text = (REPO / "docs" / "tables.md").read_text()
    assert text == ddl.tables_markdown(), "docs/tables.md is stale: run `make docs`"
    for t in TABLES.values():
        for c in t.stored_columns:
            assert f"| `{c.name}` |" in text
            assert c.unit and c.meaning, (t.name, c.name)
