"""Reachability and stability tables (issue 17; seed 003, DESIGN §3, §4.8): hand-derived cases."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import polars as pl
import pytest
from scipy import stats

from fairmon.transforms.reach.reach_beta import reach_beta_table
from fairmon.transforms.reach.reach_groups import group_summary, reach_group_inputs, reach_group_table
from fairmon.transforms.reach.reach_tables import Ratings, reach_item_table, reach_problems, reach_user_table
from fairmon.transforms.reach.reachability import fit_biased_mf
from fairmon.transforms.reach.stability_tables import (
    Training,
    recommendation_distribution,
    stability_table,
    total_variation,
)

DS = dt.date(2026, 1, 1)


def _problems() -> pl.DataFrame:
    # user 0: targets i0, i1; user 1: targets i1, i2 (|T| = 2, uniform 1/2); item 3 is nobody's target
    return pl.DataFrame(
        {
            "user": [0, 0, 1, 1],
            "item": [0, 1, 1, 2],
            "n_targets": [2, 2, 2, 2],
            "rho_base": [0.6, 0.4, 0.3, 0.7],
            "rho_max": [0.9, 0.45, 0.5, 0.8],
            "top1": [True, False, True, True],
        }
    )


def test_reach_user_and_item_tables_by_hand():
    users = pl.DataFrame({"user_id": ["u0", "u1"], "gender": ["f", "m"]})
    items = pl.DataFrame({"item_id": ["i0", "i1", "i2", "i3"], "color": ["red", "red", "blue", "blue"]})
    u = reach_user_table(DS, _problems(), users, ["gender"], 2.0, 3)
    r0, r1 = u.to_dicts()
    # u0: base (0.6, 0.4) → 1 of 2 above 1/2; max (0.9, 0.45) → 1 of 2; lift (1.5 + 1.125)/2
    assert (r0["discovery_base"], r0["discovery_max"], r0["top1_reachable_share"]) == (0.5, 0.5, 0.5)
    assert r0["mean_lift"] == pytest.approx((0.9 / 0.6 + 0.45 / 0.4) / 2)
    assert r0["mean_gain"] == pytest.approx((0.3 + 0.05) / 2)
    # u1: base (0.3, 0.7) → 1/2; max (0.5, 0.8): 0.5 is not above 1/2 → 1/2; both reachable on top
    assert (r1["discovery_base"], r1["discovery_max"], r1["top1_reachable_share"]) == (0.5, 0.5, 1.0)
    assert r1["mean_lift"] == pytest.approx((0.5 / 0.3 + 0.8 / 0.7) / 2)
    assert json.loads(r0["attributes"]) == {"gender": "f"} and r0["beta"] == 2.0 and r0["budget"] == 3
    # history: u0 rated i2 and i3, u1 rated i3 (twice: counted once); so i0 is in u1's action set
    hist = Ratings(np.array([0, 0, 1, 1]), np.array([2, 3, 3, 3]), np.array([4.0, 5.0, 3.0, 2.0]))
    frame = reach_item_table(DS, _problems(), items, ["color"], hist, users, 2.0, 3, thin_users=2)
    it = {r["item_id"]: r for r in frame.to_dicts()}
    assert it["i1"]["n_users"] == 2
    counts = {i: (r["n_users"], r["n_rated"], r["n_in_action_set"], r["thin"]) for i, r in it.items()}
    assert counts == {
        "i0": (1, 0, 1, True),
        "i1": (2, 0, 0, False),
        "i2": (1, 1, 0, True),
        "i3": (0, 2, 0, True),
    }
    assert set(frame["thin_users"]) == {2}
    assert it["i1"]["availability_base"] == pytest.approx(0.35)
    assert it["i1"]["availability_max"] == pytest.approx(0.475)
    assert it["i1"]["unavailable"] is True  # 0.475 < 1/2: below a uniform recommender even at best
    assert it["i0"]["unavailable"] is False and it["i0"]["top1_reachable_share"] == 1.0
    assert it["i3"]["n_users"] == 0 and it["i3"]["availability_max"] is None and "no user" in it["i3"]["reason"]


@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(5)
    U, I = 12, 20
    users = np.repeat(np.arange(U), 6)
    items = np.concatenate([rng.choice(I, 6, replace=False) for _ in range(U)])
    ratings = rng.integers(1, 6, size=users.size).astype(float)
    model = fit_biased_mf(users, items, ratings, n_users=U, n_items=I, rank=2, lam=2.0, iters=15)
    frame = pl.DataFrame({"user_id": [f"u{k}" for k in range(U)], "g": ["a", "b"] * (U // 2)})
    return model, Ratings(users, items, ratings), frame, I


def test_reach_problems_cover_every_target_and_are_consistent(small):
    model, hist, _, I = small
    p = reach_problems(model, hist, beta=1.5, budget=3, r_min=1, r_max=5)
    assert p.group_by("user").len().get_column("len").to_list() == [I - 6 - 3] * 12
    assert (p["rho_max"] >= p["rho_base"] - 1e-12).all() and (p["rho_max"] <= 1 + 1e-12).all()
    # the baseline is a distribution over each user's targets
    sums = p.group_by("user").agg(pl.col("rho_base").sum()).get_column("rho_base")
    np.testing.assert_allclose(sums.to_numpy(), 1.0, atol=1e-12)
    # a top-1 reachable target can get ρ* ≥ 1/|T| (it can be put on top of every other target)
    assert (p.filter("top1")["rho_max"] >= 1 / (I - 9) - 1e-12).all()


def test_other_betas_are_the_problems_solved_at_that_beta(small):
    """reach_problems with betas = (1.5, 4, 0.5): the columns at 4 and 0.5 equal a run at that β
    (warm-started from the previous β, same optimum); reach_beta summarises each by hand."""
    model, hist, _, _ = small
    p = reach_problems(model, hist, beta=1.5, budget=3, r_min=1, r_max=5, betas=(1.5, 4.0, 0.5))
    assert [c for c in p.columns if "@" in c] == ["rho_base@0.5", "rho_max@0.5", "rho_base@4", "rho_max@4"]
    for b in (4.0, 0.5):
        alone = reach_problems(model, hist, beta=b, budget=3, r_min=1, r_max=5)
        np.testing.assert_allclose(p[f"rho_base@{b:g}"].to_numpy(), alone["rho_base"].to_numpy(), rtol=1e-12)
        np.testing.assert_allclose(p[f"rho_max@{b:g}"].to_numpy(), alone["rho_max"].to_numpy(), rtol=1e-7)
    rows = reach_beta_table(DS, p, beta=1.5, betas=(4.0, 0.5), budget=3).to_dicts()
    assert [(r["beta"], r["is_default"]) for r in rows] == [(0.5, False), (1.5, True), (4.0, False)]
    assert rows[1]["reason"] is None and rows[0]["source"] == "config reach.betas"
    assert "Curmei" in rows[2]["source"] and rows[1]["source"] == "config reach.beta"
    assert rows[1]["rho_max_largest"] == p["rho_max"].max() and rows[2]["rho_max_largest"] == p["rho_max@4"].max()
    with pytest.raises(pl.exceptions.ColumnNotFoundError):
        reach_beta_table(DS, p, beta=1.5, betas=(2.0,), budget=3)  # never solved at 2


def test_reach_beta_by_hand():
    """Two users, |T| = 2 (uniform 1/2). At the configured β = 1: largest ρ* 0.9, mean 0.6625;
    item availabilities i0 0.9, i1 0.475, i2 0.8 (i1 below 1/2); discovery base (1/2 + 1/2)/2,
    max 1/2. At β = 4 (extra columns): ρ* (0.99, 0.6, 0.45, 0.95) → i1 (0.6 + 0.45)/2 = 0.525,
    none below uniform; discovery max (1 + 1/2)/2."""
    p = _problems().with_columns(
        pl.Series("rho_base@4", [0.7, 0.3, 0.2, 0.8]), pl.Series("rho_max@4", [0.99, 0.6, 0.45, 0.95])
    )
    one, four = reach_beta_table(DS, p, beta=1.0, betas=(1.0, 4.0), budget=3).to_dicts()
    assert (one["beta"], one["is_default"], one["n_problems"], one["n_items"]) == (1.0, True, 4, 3)
    assert one["rho_max_largest"] == 0.9 and one["rho_max_mean"] == pytest.approx(2.65 / 4)
    assert one["uniform_mean"] == 0.5 and one["availability_max_largest"] == 0.9
    assert one["items_unavailable"] == 1 and one["discovery_base_mean"] == 0.5 and one["discovery_max_mean"] == 0.5
    assert "Curmei" in one["source"] and four["source"].startswith("Curmei")
    assert four["rho_max_largest"] == 0.99 and four["items_unavailable"] == 0
    assert four["availability_max_largest"] == pytest.approx(0.99)
    assert four["discovery_max_mean"] == 0.75 and four["discovery_base_mean"] == 0.5
    empty = reach_beta_table(DS, p.clear(), beta=1.0, betas=(), budget=3).row(0, named=True)
    assert empty["n_problems"] is None and "no reachability problems" in empty["reason"]


def test_recommendation_distribution_and_total_variation(small):
    model, hist, _, _ = small
    pi = recommendation_distribution(model, hist, beta=2.0)
    assert (pi[hist.users, hist.items] == 0).all()
    np.testing.assert_allclose(pi.sum(axis=1), 1.0)
    pred = model.predict()
    seen = np.zeros_like(pi, dtype=bool)
    seen[hist.users, hist.items] = True
    a, b = np.flatnonzero(~seen[0])[:2]
    assert pi[0, a] / pi[0, b] == pytest.approx(np.exp(2.0 * (pred[0, a] - pred[0, b])))
    assert total_variation(np.array([0.5, 0.5, 0]), np.array([0, 0.5, 0.5])) == 0.5


def test_stability_excludes_users_whose_own_data_changed(small):
    _, hist, frame, I = small
    training = Training(rank=2, lam=2.0, iters=15, seed=0)
    st = stability_table(
        DS, hist, frame, I, training, beta=1.0, budgets=[11], perturbations=1, noise_seeds=0, r_min=1, r_max=5
    )
    # B = 11 of 12 users changed once: exactly one user kept their data and gets a bound
    kept = st.filter(pl.col("n_perturbations") == 1)
    assert kept.height == 1 and 0 < kept["stability_lb"].item() <= 1
    gone = st.filter(pl.col("n_perturbations") == 0)
    assert gone.height == 11 and gone["stability_lb"].is_nan().all()
    assert gone["reason"].str.contains("own data").all()
    assert st["noise_floor"].is_nan().all()
    with pytest.raises(ValueError, match="budgets"):
        stability_table(DS, hist, frame, I, training, beta=1.0, budgets=[12], perturbations=1, noise_seeds=0,
                        r_min=1, r_max=5)  # fmt: skip


def test_stability_against_the_noise_floor(small):
    _, hist, frame, I = small
    training = Training(rank=2, lam=2.0, iters=15, seed=0)
    st = stability_table(
        DS, hist, frame, I, training, beta=1.0, budgets=[1, 4], perturbations=3, noise_seeds=2, r_min=1, r_max=5
    )
    assert set(st["B"]) == {1, 4} and st.height == 24
    assert (st["n_perturbations"] >= 0).all() and (st["n_perturbations"] <= 3).all()
    assert (st["noise_floor"] >= 0).all() and (st["noise_floor"] <= 1).all()
    # the floor is one number per user, the same beside every budget
    assert st.group_by("user_id").agg(pl.col("noise_floor").n_unique())["noise_floor"].max() == 1
    defined = st.filter(~pl.col("stability_lb").is_nan())
    assert (defined["above_noise"] == (defined["stability_lb"] > defined["noise_floor"])).all()


def test_group_summary_by_hand_and_against_welch():
    values = np.array([1.0, 2.0, 3.0, 4.0, 10.0, 20.0, np.nan])
    s = group_summary(values, np.array([True] * 4 + [False] * 3), level=0.95, n_resamples=2000, seed=0)
    assert (s["n"], s["mean"], s["median"], s["diff_vs_rest"]) == (4, 2.5, 2.5, -12.5)  # the NaN is left out
    assert 1.0 <= s["ci_low"] <= 2.5 <= s["ci_high"] <= 4.0
    one = group_summary(values, np.array([True] + [False] * 6), level=0.95, n_resamples=500, seed=0)
    assert np.isnan(one["ci_low"]) and np.isnan(one["diff_ci_low"]) and "fewer than 2" in one["reason"]
    # large normal samples: the bootstrap CI of a difference of means is close to Welch's t interval
    rng = np.random.default_rng(1)
    x, y = rng.normal(0.3, 1.0, 400), rng.normal(0.0, 2.0, 600)
    s = group_summary(np.r_[x, y], np.r_[np.ones(400, bool), np.zeros(600, bool)], level=0.95, n_resamples=4000, seed=2)
    se = np.sqrt(x.var(ddof=1) / 400 + y.var(ddof=1) / 600)
    welch = stats.ttest_ind(x, y, equal_var=False).confidence_interval(0.95)
    assert s["diff_vs_rest"] == pytest.approx(x.mean() - y.mean())
    assert abs(s["diff_ci_low"] - welch.low) < 0.1 * se and abs(s["diff_ci_high"] - welch.high) < 0.1 * se


def test_reach_group_table_rows(small):
    users = pl.DataFrame({"user_id": ["u0", "u1"], "gender": ["f", "m"]})
    items = pl.DataFrame({"item_id": ["i0", "i1", "i2", "i3"], "color": ["red", "red", "blue", "blue"]})
    u = reach_user_table(DS, _problems(), users, ["gender"], 2.0, 3)
    hist = Ratings(np.array([0, 1]), np.array([3, 3]), np.array([4.0, 5.0]))
    it = reach_item_table(DS, _problems(), items, ["color"], hist, users, 2.0, 3)
    st = pl.DataFrame(
        {
            "user_id": ["u0", "u1"],
            "B": [1, 1],
            "stability_lb": [0.1, 0.3],
            "noise_floor": [0.05, 0.05],
        }
    )
    g = reach_group_table(DS, reach_group_inputs(u, it, st, ["gender"], ["color"]), level=0.9, n_resamples=200)
    red = g.filter((pl.col("side") == "item") & (pl.col("group") == "red") & (pl.col("metric") == "availability_max"))
    assert red["n"].item() == 2 and red["mean"].item() == pytest.approx((0.9 + 0.475) / 2)
    blue = g.filter((pl.col("side") == "item") & (pl.col("group") == "blue") & (pl.col("metric") == "availability_max"))
    assert blue["n"].item() == 1  # i3 has no value: left out
    assert red["diff_vs_rest"].item() == pytest.approx((0.9 + 0.475) / 2 - 0.8)
    f = g.filter((pl.col("side") == "user") & (pl.col("group") == "f") & (pl.col("metric") == "stability_lb_B1"))
    assert f["mean"].item() == 0.1 and f["diff_vs_rest"].item() == pytest.approx(-0.2)
    assert set(g["metric"]) >= {"discovery_max", "noise_floor", "unavailable", "stability_lb_B1"}
    assert (g["level"] == 0.9).all()
    # a null attribute value is its own group, "(missing)"
    u2 = reach_user_table(
        DS, _problems(), users.with_columns(pl.lit(None, pl.String).alias("gender")), ["gender"], 2.0, 3
    )
    g2 = reach_group_table(DS, reach_group_inputs(u2, it, st, ["gender"], []), level=0.9, n_resamples=100)
    assert set(g2.filter(pl.col("side") == "user")["group"]) == {"(missing)"}


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_a_csv_snapshot_reads_as_the_parquet_one(tmp_path, small):
    """The snapshot contract accepts CSV files (all text, parsed by the contract) as well as Parquet."""
    from fairmon.pipelines.checks.gate import QualityGate
    from fairmon.pipelines.core.config import FairmonConfig
    from fairmon.pipelines.ingest.snapshots import read_snapshot, write_snapshot

    model, hist, frame, I = small
    items = pl.DataFrame({"item_id": [f"i{k}" for k in range(I)], "color": ["x", "y"] * (I // 2)})
    ratings = pl.DataFrame(
        {"user_id": [f"u{x}" for x in hist.users], "item_id": [f"i{x}" for x in hist.items], "rating": hist.ratings}
    )
    for ds, csv in (("2026-01-01", False), ("2026-01-02", True)):
        files = write_snapshot(tmp_path / "snap" / ds, model, frame, items, ratings, iters=15, seed=0)
        if csv:
            for p in files.values():
                pl.read_parquet(p).write_csv(p.with_suffix(".csv"))
                p.unlink()
    cfg = FairmonConfig.model_validate(
        {
            "warehouse": tmp_path / "wh",
            "duckdb": tmp_path / "f.duckdb",
            "base_dir": tmp_path,
            "reach": {"path": "snap/{ds}", "rating_min": 1, "rating_max": 5},
        }
    )
    gate = QualityGate(tmp_path / "gx")
    a, ra = read_snapshot(cfg, dt.date(2026, 1, 1), gate, "t")
    b, rb = read_snapshot(cfg, dt.date(2026, 1, 2), gate, "t")
    assert all(r.success for r in ra + rb) and a is not None and b is not None
    np.testing.assert_allclose(b.model.user_factors, a.model.user_factors)
    np.testing.assert_allclose(b.model.item_bias, a.model.item_bias)
    np.testing.assert_array_equal(b.history.items, a.history.items)
    assert b.users.equals(a.users) and b.items.equals(a.items) and a.user_attributes == ["g"]
    assert a.training == Training(rank=2, lam=2.0, iters=15, seed=0)
