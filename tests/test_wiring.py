"""The day's stages discover the registered estimators (DESIGN §1, "A table is
declared once, with its computation"; issue 36): a table declared in a module
of its own, through its declaration alone, is computed by an in-process day,
published with its declared schema, gated by its generated checks (a bad row
quarantines the day) and shown in the report's generic section. No executor
code, hand-written list or suite file names it."""

from __future__ import annotations

import datetime as dt
import json
import sys
import textwrap
from pathlib import Path

import polars as pl
import pytest

from fairmon.pipelines.checks.suites import load_spec
from fairmon.pipelines.core.config import load_config
from fairmon.pipelines.simulation.simulated import write_simulation
from fairmon.transforms import registry
from fairmon.transforms.declaring_modules import declaring_modules
from fairmon.transforms.simulators.impressions import SimulationSpec

SPEC = SimulationSpec(days=2, rows_per_day=2000, random_rows_per_day=1000, random_pool_days=2, seed=5)
DAYS = [SPEC.start + dt.timedelta(days=i) for i in range(2)]

TOY_MODULE = '''
"""A toy family: the default-traffic positive share per arm x attribute x group."""
import polars as pl

from fairmon.transforms.registry import ARM, ATTR, DS, GROUP, Column, F, I, Table, declares, probability
from fairmon.transforms.reo.reo_tables import has_impressions

BAD = []  # a test appends a day: that day's first row gets a share of 1.5

TOY = Table(
    "toy_share",
    "Share of positive default-traffic rows per group (a toy).",
    "tests/test_wiring.py",
    ("ds", "arm", "attribute", "group"),
    (
        DS,
        ARM,
        ATTR,
        GROUP,
        Column("n", I, "rows", "Default-traffic rows of the group.", nullable=False),
        Column("share", F, "probability", "n_pos / n.", bounds=probability("share_is_probability")),
    ),
    None,
)


@declares(
    TOY, stage="impressions", inputs=("counts", "ds"), enabled=has_impressions,
    options=lambda cfg: {"scale": 1.0},
)
def toy_share(counts, ds, *, scale):
    """The share of each default-traffic group of ``counts`` (group_counts rows)."""
    out = (
        counts.filter((pl.col("ds") == ds) & (pl.col("traffic") == "default"))
        .select("ds", "arm", "attribute", "group", "n", (scale * pl.col("n_pos") / pl.col("n")).alias("share"))
        .sort("arm", "attribute", "group")
    )
    if ds in BAD:
        out = out.with_columns(pl.when(pl.int_range(pl.len()) == 0).then(1.5).otherwise(pl.col("share")).alias("share"))
    return out.cast(TOY.schema)
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy module dropped into a temporary folder that is part of the
    ``fairmon.transforms`` package, as a new family module would be, and found
    by the registry's discovery alone (no list names it); its declaration (and
    its cached suite) forgotten afterwards so other tests see the real registry."""
    import fairmon.transforms as package

    folder = tmp_path / "family"
    folder.mkdir()
    (folder / "toy_share_family.py").write_text(textwrap.dedent(TOY_MODULE))
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(folder)])
    monkeypatch.setattr(registry, "_DISCOVERED", [])  # the next lookup discovers again
    name = "fairmon.transforms.toy_share_family"
    assert name in declaring_modules() and name not in registry.FAMILY_MODULES
    assert "toy_share" in registry.TABLES
    yield sys.modules[name]
    registry.unregister("toy_share")
    sys.modules.pop(name, None)
    load_spec.cache_clear()


def test_a_family_module_is_found_and_served_by_the_registry_alone(toy):
    """What the registry derives for a table from its declaration, for a module
    no list names: its place after the listed families, its DDL and published
    view, its generated checks, its example rows (tests/conftest.py), the frame
    its suite checks, the day's stage computing it, the report's generic
    section and the data dictionary."""
    from conftest import declared_example

    from fairmon.pipelines.report.report_sections import generic_section, own_section
    from fairmon.pipelines.storage import ddl
    from fairmon.transforms.gate_frames import output_check_frame

    assert list(registry.TABLES)[-1] == "toy_share"
    t = registry.TABLES["toy_share"]
    assert "toy_share" in registry.GATED_TABLES
    assert '"share"' in ddl.table_view_sql("toy_share", Path("/wh"))
    assert 'FROM "toy_share"' in ddl.published_view_sql("toy_share")
    assert [c["name"] for c in registry.generated_checks(t)] == ["key_unique", "n_not_null", "share_is_probability"]
    example = declared_example(t, DAYS[0])
    assert example.height == 2 and dict(example.schema) == t.schema
    assert output_check_frame("toy_share", example, {"totals": None}) is example
    counts = pl.DataFrame(
        {"source": "impressions", "traffic": ["default", "default", "random"], "arm": ["all", "all", "all"],
         "attribute": "g", "group": ["a", "b", "a"], "n": [10, 20, 30], "n_pos": [5, 4, 3],
         "window_start": DAYS[0], "window_end": DAYS[0], "ds": DAYS[0]}
    )  # fmt: skip
    d = registry.declaration("toy_share")
    assert d in registry.declared("impressions")
    share = d.run({"counts": counts, "ds": DAYS[0], "buckets": None}, **d.config_options(object()))
    assert share.get_column("share").to_list() == [0.5, 0.2]
    assert not own_section("toy_share")
    title, section = generic_section(t, share)
    assert title == "toy_share" and section
    assert (
        "## `toy_share`" in ddl.tables_markdown()
        and "| `share` | DOUBLE | probability | [0, 1] |" in ddl.table_markdown("toy_share")
    )


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_a_declared_table_is_published_gated_and_reported(toy, tmp_path):
    from fairmon.pipelines.executor.days import run_day
    from fairmon.pipelines.report.report import build_report
    from fairmon.pipelines.storage.warehouse import read_table

    cfg_path = write_simulation(SPEC, tmp_path / "sim", "csv")["config"]
    cfg = load_config(cfg_path)
    wh = cfg.warehouse_path

    good = run_day(str(cfg_path), DAYS[0])
    assert good["status"] == "published", good.get("error")
    # published: its partition (ds in the path), with the declared schema plus run_id
    part = wh / "toy_share" / f"ds={DAYS[0]}" / "part-0.parquet"
    assert dict(pl.read_parquet(part).drop("run_id").schema) == {k: v for k, v in toy.TOY.schema.items() if k != "ds"}
    frame = read_table(wh, "toy_share")
    assert dict(frame.drop("run_id").schema) == toy.TOY.schema
    counts = read_table(wh, "group_counts").filter(pl.col("traffic") == "default")
    assert frame.height == counts.height > 0
    assert frame.get_column("run_id").unique().to_list() == [good["run_id"]]
    # gated: its generated checks ran and are in the day's dq_results
    (row,) = [r for r in good["dq"] if r["table"] == "toy_share"]
    names = [e["name"] for e in registry.generated_checks(toy.TOY)]
    assert names == ["key_unique", "n_not_null", "share_is_probability"]
    assert row["success"] and row["n_expectations"] == len(names)

    toy.BAD.append(DAYS[1])  # a share of 1.5: outside its declared bounds
    bad = run_day(str(cfg_path), DAYS[1])
    assert bad["status"] == "quarantined" and "share_is_probability" in bad["error"]
    assert not (wh / "toy_share" / f"ds={DAYS[1]}").exists()
    dq = read_table(wh, "dq_results").filter((pl.col("ds") == DAYS[1]) & (pl.col("table") == "toy_share"))
    assert dq.get_column("failed_critical").to_list() == ["share_is_probability"]
    assert json.loads(dq.get_column("details").item())[0]["unexpected_count"] == 1

    # in the report: the generic section from its declaration
    html = build_report(cfg, DAYS[0], DAYS[1]).read_text()
    assert '<h3 class="generic">toy_share</h3>' in html  # its source is in the data dictionary below
    assert "Source: tests/test_wiring.py" in html


def test_run_stage_binds_inputs_options_and_earlier_tables():
    """How a stage hands its tables their inputs (registry.run_stage): an
    aliased input (``param=name``), a table's own ``<table>.<name>`` input,
    each declaration's ``options(cfg)``, an earlier table of the stage as an
    input of a later one, and no frame for an empty ``omit_empty`` table."""
    from fairmon.transforms.registry import DS, Column, I, Table, declare

    a = Table("wire_a", "a", "tests", ("ds",), (DS, Column("v", I, "-", "value")), None)
    b = Table("wire_b", "b", "tests", ("ds",), (DS, Column("v", I, "-", "value")), None)
    e = Table("wire_e", "e", "tests", ("ds",), (DS, Column("v", I, "-", "value")), None)

    def first(ds, x, *, k):
        return pl.DataFrame({"ds": [ds], "v": [x * k]})

    def second(ds, wire_a, x):
        return pl.DataFrame({"ds": [ds], "v": [wire_a.get_column("v").item() + x]})

    def empty(ds):
        return pl.DataFrame(schema=e.schema)

    cfg = {"k": 10}
    try:
        declare(a, stage="wire", inputs=("ds", "x=big"), compute=first, options=lambda c: {"k": c["k"]})
        declare(b, stage="wire", inputs=("ds", "wire_a", "x"), compute=second)
        declare(e, stage="wire", inputs=("ds",), compute=empty, omit_empty=True)
        out = registry.run_stage("wire", cfg, {"ds": DAYS[0], "big": 5, "x": 1, "wire_b.x": 2})
        assert list(out) == ["wire_a", "wire_b"]  # registry order; the empty omit_empty table left out
        assert out["wire_a"].get_column("v").item() == 50  # x=big, k from the declaration's options
        assert out["wire_b"].get_column("v").item() == 52  # wire_a as input; its own wire_b.x wins over x
        explicit = registry.run_stage("wire", cfg, {"ds": DAYS[0], "big": 5, "x": 1}, {"wire_a": {"k": 1}})
        assert explicit["wire_a"].get_column("v").item() == 5
        with pytest.raises(KeyError, match="big"):
            registry.run_stage("wire", cfg, {"ds": DAYS[0], "x": 1})
    finally:
        for t in (a, b, e):
            registry.unregister(t.name)
