"""Intersectional groups (issue 14 item 7, DESIGN §2 ``intersections``): crossed
attributes counted in the same scan as single ones, small cells flagged."""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl
import pytest
from pydantic import ValidationError

from fairmon.pipelines.core.config import ImpressionsConfig
from fairmon.pipelines.ingest.range_counts import count_statements, group_totals
from fairmon.pipelines.storage import db
from fairmon.transforms.contract import ATTR_PREFIX, normalize_impressions
from fairmon.transforms.gate_frames import day_check_frame
from fairmon.transforms.intersections import add_intersections
from fairmon.transforms.reo.reo_tables import reo_tables

D = dt.date(2026, 3, 10)


def _raw(rng, n, traffic):
    return pl.DataFrame(
        {
            "traffic": [traffic] * n,
            "arm": ["all"] * n,
            "s1": (rng.random(n) < 0.3).astype(int),
            "young_adult": rng.choice(["0", "1"], n).tolist(),
            "region": [x or None for x in rng.choice(["north", "south", "east", ""], n, p=[0.4, 0.3, 0.25, 0.05])],
        }
    )


def _stage(raw, traffic):
    staged = normalize_impressions(raw, file=traffic, signals=["s1"], attributes=["young_adult", "region"], ds=D)
    return add_intersections(staged, [["young_adult", "region"]])


def test_add_intersections_values_and_nulls():
    staged = pl.DataFrame({ATTR_PREFIX + "a": ["1", "0", None], ATTR_PREFIX + "b": ["north", None, "east"]})
    out = add_intersections(staged, [["a", "b"]])
    assert out.get_column(ATTR_PREFIX + "a×b").to_list() == ["1×north", None, None]
    with pytest.raises(KeyError, match="c"):
        add_intersections(staged, [["a", "c"]])


def test_config_validates_intersections():
    base = dict(format="contract", path="d/{ds}.csv", signals=["s1"], attributes=["young_adult", "region"])
    assert ImpressionsConfig(**base, intersections=[["young_adult", "region"]]).intersections
    for bad in ([["young_adult"]], [["young_adult", "young_adult"]], [["young_adult", "age"]]):
        with pytest.raises(ValidationError, match="intersections"):
            ImpressionsConfig(**base, intersections=bad)


def test_intersections_are_counted_in_the_same_scan(tmp_path):
    rng = np.random.default_rng(7)
    raws = {"default": _raw(rng, 4000, "default"), "random": _raw(rng, 1500, "random")}
    with db.connect(tmp_path / "t.duckdb") as con:
        for traffic, raw in raws.items():
            con.register("staged", _stage(raw, traffic))
            # a frame of the test's own layout, not the declared one (staging_tables.IMPRESSIONS)
            con.execute("CREATE TABLE IF NOT EXISTS impressions AS SELECT * FROM staged LIMIT 0")
            con.execute("INSERT INTO impressions BY NAME SELECT * FROM staged")
            con.unregister("staged")
        con.register("day_files", pl.DataFrame({"day": [D, D], "file": ["default", "random"]}))
        counts = group_totals(*count_statements(con, 128, 1, "contained"))
    got = counts.filter(pl.col("attribute") == "young_adult×region").sort("traffic", "group")
    # independent: cross the raw columns in Polars
    exp = []
    for traffic, raw in raws.items():
        g = (
            raw.with_columns(
                pl.when(pl.col("region").is_null())
                .then(pl.lit("(missing)"))
                .otherwise(pl.col("young_adult") + "×" + pl.col("region"))
                .alias("group")
            )
            .group_by("group")
            .agg(pl.len().alias("n"), pl.col("s1").sum().alias("n_pos"))
            .with_columns(pl.lit(traffic).alias("traffic"))
        )
        exp.append(g)
    exp = pl.concat(exp).sort("traffic", "group")
    assert (
        got.select("traffic", "group", "n", "n_pos").to_dicts()
        == exp.select("traffic", "group", pl.col("n").cast(pl.Int64), pl.col("n_pos").cast(pl.Int64)).to_dicts()
    )
    assert set(got.get_column("group")) >= {"1×north", "0×east"}
    # the day gate checks the single attributes only; the estimator reports the crossed groups
    gate = day_check_frame(counts, 0.1, 0.05)
    assert "young_adult×region" not in set(gate.get_column("attribute"))
    group, reo = reo_tables(counts, D)
    row = reo.filter(pl.col("attribute") == "young_adult×region").to_dicts()[0]
    assert row["K"] == 6
    small = group.filter((pl.col("attribute") == "young_adult×region") & pl.col("small_group"))
    assert (
        small.height
        == group.filter(
            (pl.col("attribute") == "young_adult×region") & ((pl.col("n_pos_rec") < 30) | (pl.col("n_pos_rand") < 30))
        ).height
    )


def test_a_separator_in_a_clustered_files_value_names_its_first_file_row():
    """A profile's bucket rows are staged in the scan's order: the error for an intersected value holding
    the separator still names the first file row that holds one (135 of 1,500 rows here)."""
    import duckdb

    from fairmon.pipelines.ingest import profiles
    from fairmon.transforms.contract import InputContractError

    rng = np.random.default_rng(0)
    n = 1500
    h = rng.choice(["p", "q"], n).astype(object)
    bad = np.sort(rng.choice(n, 40, replace=False))
    h[bad] = "p×q"
    rows = pl.DataFrame(
        {"ds": ["2026-03-10"] * n, "traffic": rng.choice(["default", "random"], n).tolist(),
         "arm": rng.choice(["a", "b"], n).tolist(), "s1": (rng.random(n) < 0.3).tolist(),
         "g": rng.choice(["x", "y", "z"], n).tolist(), "h": h.tolist(), "request_id": [f"r{i // 3}" for i in range(n)]}
    ).with_row_index("__row")  # fmt: skip
    cluster = profiles.ClusterScan("request_id", 16, ("s1",), exact=16)
    prof = profiles.profile_rows(duckdb.connect(), rows, ["ds", "traffic", "arm", "s1", "g", "h"], "f", cluster=cluster)
    staged = normalize_impressions(prof, file="f", signals=["s1"], attributes=["g", "h"], ds=D)
    with pytest.raises(InputContractError) as e:
        add_intersections(staged, [["g", "h"]])
    assert e.value.row == int(bad[0]) + 1 == 135 and e.value.column == "h"
