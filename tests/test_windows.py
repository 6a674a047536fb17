"""Random-traffic windows (issue 14 item 6, DESIGN §2): pooled files by
``pool_policy``, rows with their own ds windowed exactly, ``look_ahead``."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from fairmon.pipelines.config import load_config
from fairmon.pipelines.ingest.adapters import pools_for_day, units_for_day
from fairmon.transforms.reo_tables import reo_tables

CONFIG = """
warehouse = "wh"
duckdb = "f.duckdb"
[impressions]
format = "tiktok"
path = "default/{{ds}}.csv"
random_path = "random/random_{{start}}_{{end}}.csv"
signals = ["like_video"]
attributes = ["young_adult"]
random_window_days = 7
pool_policy = "{policy}"
"""

POOLS = [("2026-01-01", "2026-01-07"), ("2026-01-08", "2026-01-14"), ("2026-01-15", "2026-01-21")]


def _cfg(tmp_path, policy):
    (tmp_path / "random").mkdir(exist_ok=True)
    (tmp_path / "default").mkdir(exist_ok=True)
    for a, b in POOLS:
        (tmp_path / "random" / f"random_{a}_{b}.csv").write_text("x\n")
    p = tmp_path / f"{policy}.toml"
    p.write_text(CONFIG.format(policy=policy))
    return load_config(p)


def _ranges(pools):
    return [(a.isoformat(), b.isoformat()) for _, a, b in pools]


@pytest.mark.parametrize(
    ("day", "contained", "overlap"),
    [
        # window [ds-6, ds]; a pool is contained when its whole range lies inside
        ("2026-01-01", [], [POOLS[0]]),  # day 1 would see six days after it
        ("2026-01-07", [POOLS[0]], [POOLS[0]]),
        ("2026-01-10", [], [POOLS[0], POOLS[1]]),  # 14 days of random traffic under overlap
        ("2026-01-14", [POOLS[1]], [POOLS[1]]),
        ("2026-01-21", [POOLS[2]], [POOLS[2]]),
    ],
)
def test_pool_policy_admits_pools_as_documented(tmp_path, day, contained, overlap):
    ds = dt.date.fromisoformat(day)
    c_admit, c_refused = pools_for_day(_cfg(tmp_path, "contained"), ds)
    o_admit, o_refused = pools_for_day(_cfg(tmp_path, "overlap"), ds)
    assert _ranges(c_admit) == contained and _ranges(o_admit) == overlap
    assert o_refused == [] and _ranges(c_refused) == [r for r in overlap if r not in contained]
    # the day's ingest units (and so its day_files and recorded inputs) follow the policy
    random_units = [
        (u.ds_start.isoformat(), u.ds_end.isoformat()) for u in units_for_day(_cfg(tmp_path, "contained"), ds)
    ]
    assert random_units == contained


def test_contained_is_the_default(tmp_path):
    p = tmp_path / "d.toml"
    p.write_text(CONFIG.replace('pool_policy = "{policy}"\n', ""))
    assert load_config(p).impressions.pool_policy == "contained"


def test_look_ahead_follows_the_random_span():
    ds = dt.date(2026, 1, 3)
    rows = []
    for traffic, arm, pos, ws, we in (
        ("default", "all", (300, 200), ds, ds),
        ("random", "all", (200, 200), dt.date(2026, 1, 1), dt.date(2026, 1, 7)),  # a pool ending after ds
    ):
        for g, p in zip("ab", pos):
            rows.append((ds, "impressions", traffic, arm, "s", g, 10_000, p, ws, we))
    cols = ["ds", "source", "traffic", "arm", "attribute", "group", "n", "n_pos", "window_start", "window_end"]
    counts = pl.DataFrame(rows, schema=cols, orient="row")
    _, reo = reo_tables(counts, ds)
    assert reo.get_column("look_ahead").to_list() == [True]
    assert reo.get_column("rand_window_end").to_list() == [dt.date(2026, 1, 7)]
    _, later = reo_tables(counts.with_columns(pl.lit(dt.date(2026, 1, 7)).alias("ds")), dt.date(2026, 1, 7))
    assert later.get_column("look_ahead").to_list() == [False]
