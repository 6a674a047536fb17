"""The day's stages discover the registered estimators (DESIGN §1, "A table is
declared once, with its computation"; issue 36): a table declared in a module
of its own, through its declaration alone, is computed by an in-process day,
published with its declared schema, gated by its generated checks (a bad row
quarantines the day) and shown in the report's generic section. No executor
code, hand-written list or suite file names it."""

from __future__ import annotations

import datetime as dt
import importlib
import json
import sys
import textwrap

import polars as pl
import pytest

from fairmon.pipelines.checks.gate import load_spec
from fairmon.pipelines.core.config import load_config
from fairmon.pipelines.faces.simulated import write_simulation
from fairmon.transforms import registry
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
    """The toy module imported from a temporary folder; its declaration (and
    its cached suite) forgotten afterwards so other tests see the real registry."""
    (tmp_path / "toy_share_family.py").write_text(textwrap.dedent(TOY_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("toy_share_family")
    yield module
    registry.unregister("toy_share")
    sys.modules.pop("toy_share_family", None)
    load_spec.cache_clear()


def test_a_declared_table_is_published_gated_and_reported(toy, tmp_path):
    from fairmon.pipelines.executor.days import run_day
    from fairmon.pipelines.faces.report import build_report
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
    assert "toy_share (tests/test_wiring.py)" in html
