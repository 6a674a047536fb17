"""The reachability and stability audit end to end (issue 17; seed 003, DESIGN §2, §4.8).

A small biased MF is written as model snapshots; `fairmon run` gates each
snapshot file with its suite and publishes reach_user, reach_item,
reach_group and stability_user; a defective snapshot quarantines its day and
names the file, the expectation and the row.
"""

import datetime as dt
import json

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from fairmon.pipelines.core.config import load_config
from fairmon.pipelines.faces.cli import app
from fairmon.pipelines.ingest.snapshots import write_snapshot
from fairmon.pipelines.storage.warehouse import read_table
from fairmon.transforms.reach.reach_beta import reach_beta_table
from fairmon.transforms.reach.reach_tables import Ratings, reach_problems, reach_user_table
from fairmon.transforms.reach.reachability import fit_biased_mf

pytestmark = [pytest.mark.usefixtures("prefect_harness"), pytest.mark.slow]

DAY1, DAY2, DAY3 = dt.date(2026, 3, 1), dt.date(2026, 3, 2), dt.date(2026, 3, 3)
CONFIG = """warehouse = "warehouse"
duckdb = "fairmon.duckdb"

[reach]
path = "snapshots/{ds}"
rating_min = 1
rating_max = 5
beta = 1.5
budget = 3
stability_budgets = [1, 3]
perturbations = 2
noise_seeds = 1
bootstrap_resamples = 200
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("reach")
    rng = np.random.default_rng(11)
    U, I = 16, 24
    u = np.repeat(np.arange(U), 6)
    i = np.concatenate([rng.choice(I, 6, replace=False) for _ in range(U)])
    r = rng.integers(1, 6, size=u.size).astype(float)
    model = fit_biased_mf(u, i, r, n_users=U, n_items=I, rank=2, lam=2.0, iters=15, seed=0)
    users = pl.DataFrame({"user_id": [f"u{k}" for k in range(U)], "age": ["young", "old"] * (U // 2)})
    items = pl.DataFrame({"item_id": [f"i{k}" for k in range(I)], "color": ["red", "blue", "green"] * (I // 3)})
    ratings = pl.DataFrame({"user_id": [f"u{x}" for x in u], "item_id": [f"i{x}" for x in i], "rating": r})
    for ds in (DAY1, DAY2):
        write_snapshot(root / "snapshots" / str(ds), model, users, items, ratings, iters=15, seed=0)
    (root / "fairmon.toml").write_text(CONFIG)
    return root, model, Ratings(u, i, r), users


def _run(root, ds):
    return CliRunner().invoke(app, ["run", "-c", str(root / "fairmon.toml"), "--date", str(ds)])


def test_reach_day_published_equals_the_transforms(project):
    root, model, hist, users = project
    res = _run(root, DAY1)
    assert res.exit_code == 0, res.output
    wh = load_config(root / "fairmon.toml").warehouse_path
    got = read_table(wh, "reach_user").filter(pl.col("ds") == DAY1).drop("run_id")
    want = reach_user_table(
        DAY1, reach_problems(model, hist, beta=1.5, budget=3, r_min=1, r_max=5), users, ["age"], 1.5, 3
    )
    assert got.sort("user_id").equals(want.sort("user_id"))
    items = read_table(wh, "reach_item").filter(pl.col("ds") == DAY1)
    assert items.height == 24 and json.loads(items["attributes"][0]).keys() == {"color"}
    # every user either has the item as a target, rated it or acts on it; thin below 30 users
    assert (items["n_users"] + items["n_rated"] + items["n_in_action_set"] == users.height).all()
    assert (items["thin"] == (items["n_users"] < 30)).all() and set(items["thin_users"]) == {30}
    # reach_beta at the configured β = 1.5 and Curmei et al.'s grid, as the transforms compute it
    grid = (1.0, 2.0, 4.0, 10.0)
    beta = read_table(wh, "reach_beta").filter(pl.col("ds") == DAY1).drop("run_id").sort("beta")
    problems = reach_problems(model, hist, beta=1.5, budget=3, r_min=1, r_max=5, betas=grid)
    want_beta = reach_beta_table(DAY1, problems, beta=1.5, betas=grid, budget=3)
    assert beta["beta"].to_list() == [1.0, 1.5, 2.0, 4.0, 10.0] and beta["is_default"].sum() == 1
    for c in ("rho_max_largest", "rho_max_mean", "availability_max_largest", "discovery_max_mean"):
        np.testing.assert_allclose(beta[c].to_numpy(), want_beta[c].to_numpy(), rtol=1e-9)
    assert beta["items_unavailable"].to_list() == want_beta["items_unavailable"].to_list()
    st = read_table(wh, "stability_user").filter(pl.col("ds") == DAY1)
    assert sorted(set(st["B"])) == [1, 3] and st.height == 32 and st["noise_floor"].is_not_nan().all()
    g = read_table(wh, "reach_group").filter(pl.col("ds") == DAY1)
    assert {"stability_lb_B1", "stability_lb_B3", "noise_floor", "availability_max"} <= set(g["metric"])
    assert set(g.filter(pl.col("side") == "item")["group"]) == {"red", "blue", "green"}
    rep = CliRunner().invoke(
        app, ["report", "-c", str(root / "fairmon.toml"), "--start", str(DAY1), "--end", str(DAY1)]
    )
    assert rep.exit_code == 0, rep.output
    html = (root / f"report_{DAY1}_{DAY1}.html").read_text()
    assert "Reachability and stability of the recommender" in html and "noise" in html
    assert "The softmax temperature β (reach_beta" in html and "1.5 (config)" in html
    assert "No published REO" not in html  # a reach-only project has no REO section to be empty
    ing = CliRunner().invoke(app, ["ingest", "-c", str(root / "fairmon.toml"), "--date", str(DAY1)])
    assert ing.exit_code == 0 and ing.output.count(": checked") == 4, ing.output


def test_defective_snapshot_quarantines_and_names_file_row_and_expectation(project):
    root, *_ = project
    folder = root / "snapshots" / str(DAY2)
    users = pl.read_parquet(folder / "users.parquet")
    users = users.with_columns(
        pl.when(pl.int_range(pl.len()) == 2).then(float("nan")).otherwise(pl.col("f_1")).alias("f_1")
    )
    users.write_parquet(folder / "users.parquet")
    ratings = pl.read_parquet(folder / "ratings.parquet")
    ratings = ratings.with_columns(
        pl.when(pl.int_range(pl.len()) == 4).then(pl.lit("i999")).otherwise(pl.col("item_id")).alias("item_id"),
        pl.when(pl.int_range(pl.len()) == 1).then(9.0).otherwise(pl.col("rating")).alias("rating"),
    )
    ratings.write_parquet(folder / "ratings.parquet")
    res = _run(root, DAY2)
    assert res.exit_code != 0
    wh = load_config(root / "fairmon.toml").warehouse_path
    assert read_table(wh, "reach_user").filter(pl.col("ds") == DAY2).is_empty()
    dq = read_table(wh, "dq_results").filter(pl.col("ds") == DAY2)
    fails = {
        f["name"]: f for r in dq.filter(~pl.col("success")).iter_rows(named=True) for f in json.loads(r["details"])
    }
    assert fails["factors_finite"]["rows"] == [3]  # file rows count from 1
    assert fails["item_id_known"]["rows"] == [5] and fails["item_id_known"]["sample"] == [False]
    assert fails["rating_in_declared_range"]["rows"] == [2]
    subjects = set(dq.filter(~pl.col("success"))["subject"])
    assert any(s.endswith("users.parquet") for s in subjects) and any(s.endswith("ratings.parquet") for s in subjects)


def test_missing_snapshot_fails_the_day_naming_the_folder(project):
    root, *_ = project
    res = _run(root, DAY3)
    assert res.exit_code != 0
    assert str(DAY3) in res.output and "snapshots" in res.output and "users.parquet|csv" in res.output
