"""A table is declared once, with its computation (DESIGN §1): a toy table
declared in a module of its own reaches the registry, the DDL and views, the
generated checks, the write-time frame check and the report's generic section
through its declaration alone; and every suite file is named by a declaration
or an input table."""

from __future__ import annotations

import datetime as dt
import importlib
import json
import sys
import textwrap

import duckdb
import polars as pl
import pytest

from fairmon.pipelines.checks.gate import QualityGate
from fairmon.pipelines.checks.suites import load_spec
from fairmon.pipelines.report.report_sections import generic_sections
from fairmon.pipelines.storage import ddl
from fairmon.pipelines.storage.warehouse import read_table, refresh_views, write_partitions
from fairmon.resources import suite_file, suites
from fairmon.transforms import registry

D = dt.date(2026, 1, 5)

TOY_MODULE = '''
"""A toy family: one table, declared on the function that computes it."""
import polars as pl

from fairmon.transforms.registry import (
    CI_HIGH, CI_LOW, DS, GROUP, Column, F, I, S, Table, declares, non_negative, probability,
)

TOY = Table(
    "toy_rate",
    "A toy rate per group.",
    "tests/test_registry.py",
    ("ds", "group"),
    (
        DS,
        GROUP,
        Column("n", I, "rows", "Rows of the group.", bounds=non_negative("n_non_negative")),
        Column("rate", F, "probability", "Share of positive rows.", bounds=probability("rate_is_probability")),
        CI_LOW,
        CI_HIGH,
        Column("label", S, "-", "A label that is never null.", nullable=False),
        Column("verdict", S, "-", "`high` or `low`."),
    ),
    None,
)


@declares(TOY, stage="toy", inputs=("counts", "ds"), enabled=lambda cfg: cfg.get("toy", False))
def toy_table(counts, ds):
    """The toy rate of each group of ``counts`` (columns group, n, n_pos)."""
    rate = pl.col("n_pos") / pl.col("n")
    return counts.select(
        pl.lit(ds).alias("ds"),
        "group",
        "n",
        rate.alias("rate"),
        (rate - 0.1).alias("ci_low"),
        (rate + 0.1).alias("ci_high"),
        pl.lit("x").alias("label"),
        pl.when(rate > 0.5).then(pl.lit("high")).otherwise(pl.lit("low")).alias("verdict"),
    ).cast(TOY.schema)
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy module, imported from a temporary folder; its declaration is
    forgotten afterwards so other tests see the real registry."""
    (tmp_path / "toy_family.py").write_text(textwrap.dedent(TOY_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("toy_family")
    yield module
    registry.unregister("toy_rate")
    sys.modules.pop("toy_family", None)


def _counts() -> pl.DataFrame:
    return pl.DataFrame({"group": ["a", "b"], "n": [10, 20], "n_pos": [8, 4]})


def test_a_declared_table_reaches_registry_ddl_checks_and_report(toy, tmp_path):
    assert "toy_rate" in registry.TABLES and registry.table("toy_rate") is toy.TOY
    assert "toy_rate" in registry.GATED_TABLES
    # the stage API: enabled declarations of a stage, run uniformly
    assert registry.declared(stage="toy", cfg={"toy": False}) == []
    (decl,) = registry.declared(stage="toy", cfg={"toy": True})
    assert decl.compute is toy.toy_table and decl.inputs == ("counts", "ds")
    frames = registry.run_stage("toy", {"toy": True}, {"counts": _counts(), "ds": D})
    frame = frames["toy_rate"]
    assert frame.schema == toy.TOY.schema and frame.height == 2
    # DDL, views and the data dictionary come from the declaration
    assert '"toy_rate_published"' in ddl.published_view_sql("toy_rate")
    assert "## `toy_rate`" in ddl.tables_markdown() and "| [0, 1] |" in ddl.tables_markdown()
    wh = tmp_path / "wh"
    write_partitions(wh, D, {"toy_rate": frame.with_columns(pl.lit("r1").alias("run_id"))})
    con = duckdb.connect()
    refresh_views(con, wh)
    assert con.sql('SELECT count(*) FROM "toy_rate"').fetchall() == [(2,)]
    assert read_table(wh, "toy_rate").height == 2
    # the frame is checked against its declaration where it is written
    with pytest.raises(registry.SchemaMismatch, match="'toy_rate'.*'rate'"):
        write_partitions(wh, D, {"toy_rate": frame.with_columns(pl.col("rate").cast(pl.String))})
    with pytest.raises(registry.SchemaMismatch, match="'toy_rate'.*'extra'"):
        write_partitions(wh, D, {"toy_rate": frame.with_columns(pl.lit(1).alias("extra"))})
    # its generic report section: key, estimate ± CI, verdict
    ((title, section),) = [s for s in generic_sections({"toy_rate": frame}) if s[0].startswith("toy_rate")]
    assert section["columns"] == ["group", "rate", "CI", "verdict"]
    assert section["rows"][0] == ["a", "0.8000", "[0.7000, 0.9000]", "high"]


def test_generated_checks_gate_a_bad_frame(toy, tmp_path):
    spec = load_spec.__wrapped__("toy_rate")  # not cached: the toy table is gone after the test
    assert [e["name"] for e in spec["expectations"]] == [
        "key_unique",
        "n_non_negative",
        "rate_is_probability",
        "label_not_null",
    ]
    good = toy.toy_table(_counts(), D)
    bad = pl.concat([good, good.head(1)]).with_columns(
        pl.when(pl.col("group") == "b").then(1.5).otherwise(pl.col("rate")).alias("rate"),
        pl.when(pl.col("group") == "b").then(None).otherwise(pl.col("label")).alias("label"),
    )
    gate = QualityGate(tmp_path / "gx")
    load_spec.cache_clear()
    try:
        assert gate.validate("toy_rate", good, {}, "toy_rate", "d1").success
        result = gate.validate("toy_rate", bad, {}, "toy_rate", "d2")
    finally:
        load_spec.cache_clear()
    assert result.n_expectations == 4 and not result.success
    assert result.failed_critical == ["key_unique", "rate_is_probability", "label_not_null"]


def test_every_suite_file_is_well_formed_and_named_by_a_declaration_or_an_input():
    from fairmon.pipelines.checks.gx_import import import_gx

    gx = import_gx()  # as fairmon imports it (PySpark's Spark Connect hidden: its import may sys.exit)

    named = {t.suite for t in registry.TABLES.values() if t.suite} | set(registry.INPUT_SUITES)
    assert set(suites()) == named, set(suites()) ^ named
    for name in suites():
        spec = json.loads(suite_file(name).read_text())
        assert spec["suite"] == name and spec["table"] and spec["description"]
        names = [e["name"] for e in spec["expectations"]]
        assert len(set(names)) == len(names), name
        for e in spec["expectations"]:
            assert e["severity"] in ("critical", "warning"), (name, e["name"])
            assert hasattr(gx.expectations, e["type"]), (name, e["type"])
            assert isinstance(e["kwargs"], dict)
    for t in registry.TABLES.values():  # no domain check repeats a generated one
        generated = {e["name"] for e in registry.generated_checks(t)}
        extra = {e["name"] for e in json.loads(suite_file(t.suite).read_text())["expectations"]} if t.suite else set()
        assert not generated & extra, (t.name, generated & extra)


def test_a_new_family_module_is_found_without_listing_it(tmp_path, monkeypatch):
    """The registry finds declaring modules by reading their source (transforms/declaring_modules.py): a module
    that calls ``declares`` is found, one that does not is not imported; today's families are all found."""
    from fairmon.transforms import registry
    from fairmon.transforms.declaring_modules import declaring_modules

    pkg = tmp_path / "toyfamily"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "shares.py").write_text(
        "from x import declares\n\n\n@declares(T, stage='impressions')\ndef f(): ...\n"
    )
    (pkg / "plain.py").write_text("raise RuntimeError('never imported')\n")
    (pkg / "mentions.py").write_text('"""Calls declares( in prose only."""\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    assert declaring_modules("toyfamily") == ["toyfamily.sub.shares"]
    assert set(declaring_modules()) == set(registry.FAMILY_MODULES)


def test_a_runs_result_carries_the_tables_declared_summary():
    """`--json` and the terminal summary carry the rows of the tables declared ``summary=True`` (docs "In
    scripts"): the five headline tables today, in registry order; no executor list names them."""
    from fairmon.pipelines.executor.batch import summary_tables

    assert summary_tables() == ("reo", "reo_ab", "threshold_prevalence", "sdt", "envy_audit")
