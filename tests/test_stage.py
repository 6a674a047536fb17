"""Seed 001 beyond REO (issue 15 item 3, DESIGN §4.4): stage-wise diagnosis
(App. I.4), RSP (App. H.1) and user-side precision (App. H.2)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl
import pytest

from fairmon.transforms.reo.estimate import estimate_reo, reo_of_utilities
from fairmon.transforms.reo.stage import precision_disparity, reo_stage_table, rsp_table, user_precision_table

DS = dt.date(2026, 1, 1)
COLS = ["ds", "source", "traffic", "arm", "attribute", "group", "n", "n_pos", "window_start", "window_end"]


def _counts(spec: dict) -> pl.DataFrame:
    """spec: {(traffic, arm): (n per group, n_pos per group)} for attribute 's', groups 'a', 'b'."""
    rows = []
    for (traffic, arm), (n, pos) in spec.items():
        for g, ni, pi in zip("ab", n, pos):
            rows.append((DS, "impressions", traffic, arm, "s", g, ni, pi, DS, DS))
    return pl.DataFrame(rows, schema=COLS, orient="row")


def test_stage_utilities_factor_exactly():
    counts = _counts(
        {
            ("default", "c"): ((60_000, 40_000), (9_000, 4_000)),
            ("post_recall", "c"): ((30_000, 30_000), (3_000, 2_400)),
            ("random", "all"): ((50_000, 50_000), (2_000, 2_500)),
        }
    )
    t = reo_stage_table(counts, DS)
    U = {(r["stage"], r["group"]): r["U"] for r in t.iter_rows(named=True)}
    for g in "ab":
        assert U[("system", g)] == pytest.approx(U[("recall", g)] * U[("ranking", g)], rel=1e-12)
    # hand values: recall U_a = (3000/60000)/(2000/100000) = 2.5; ranking U_a = (9000/100000)/(3000/60000) = 1.8
    assert U[("recall", "a")] == pytest.approx(2.5) and U[("ranking", "a")] == pytest.approx(1.8)
    assert set(t.get_column("stage")) == {"recall", "ranking", "system"}
    assert reo_stage_table(counts.filter(pl.col("traffic") != "post_recall"), DS).height == 0


@pytest.mark.coverage
def test_stage_reo_intervals_cover():
    """Known recall and ranking truths, 600 simulated days: each stage's REO interval covers."""
    rng = np.random.default_rng(4)
    P = np.array([0.02, 0.03])  # random traffic: positives of group k per row
    Q_pr = np.array([0.06, 0.04])  # post-recall
    Q_rec = np.array([0.12, 0.05])  # default
    truth = {
        "recall": reo_of_utilities(Q_pr / P),
        "ranking": reo_of_utilities(Q_rec / Q_pr),
        "system": reo_of_utilities(Q_rec / P),
    }
    n = {"rand": 100_000, "pr": 60_000, "rec": 80_000}

    def draw(p, m):
        return rng.multinomial(m, np.append(p, 1 - p.sum()), size=600)[:, :-1]

    b, pr, rec = draw(P, n["rand"]), draw(Q_pr, n["pr"]), draw(Q_rec, n["rec"])
    hits = {s: 0 for s in truth}
    for i in range(600):
        for stage, (a, na, bb, nb) in {
            "recall": (pr[i], n["pr"], b[i], n["rand"]),
            "ranking": (rec[i], n["rec"], pr[i], n["pr"]),
            "system": (rec[i], n["rec"], b[i], n["rand"]),
        }.items():
            e = estimate_reo(["a", "b"], a, na, bb, nb)
            hits[stage] += e.ci_low <= truth[stage] <= e.ci_high
    for stage, h in hits.items():
        assert 0.93 <= h / 600 <= 0.97, (stage, h / 600)


def test_rsp_by_hand():
    counts = _counts({("default", "c"): ((600, 400), (10, 10)), ("random", "all"): ((500, 500), (10, 10))})
    t = rsp_table(counts, DS)
    r = {row["group"]: row for row in t.iter_rows(named=True)}
    assert r["a"]["share_rec"] == pytest.approx(0.6) and r["a"]["share_pool"] == pytest.approx(0.5)
    assert r["a"]["U"] == pytest.approx(1.2) and r["b"]["U"] == pytest.approx(0.8)
    assert r["a"]["delta_U"] == pytest.approx(0.2) and r["b"]["delta_U"] == pytest.approx(-0.2)
    assert r["a"]["rsp"] == pytest.approx(0.2)
    # delta SE with group row counts in place of positives: 2r/(1+r)² · sqrt(Σ 1/n_k^rec + 1/n_k^pool), r = 1.5
    rr = 1.5
    se = 2 * rr / (1 + rr) ** 2 * np.sqrt(1 / 600 + 1 / 400 + 1 / 500 + 1 / 500)
    assert r["a"]["se"] == pytest.approx(se, rel=1e-9)
    assert rsp_table(counts, DS, exclude=("s",)).height == 0


def test_user_precision_and_disparity_by_hand():
    d, se, lo, hi, why = precision_disparity(np.array([20, 60]), np.array([100, 200]))
    assert d == pytest.approx(0.2) and why is None  # p = (0.2, 0.3): std 0.05 / mean 0.25
    # independent delta method by finite differences on log p
    p = np.array([0.2, 0.3])
    h = 1e-6
    g = [
        (reo_of_utilities(p * np.exp(h * np.eye(2)[j])) - reo_of_utilities(p * np.exp(-h * np.eye(2)[j]))) / (2 * h)
        for j in range(2)
    ]
    var = sum(gj**2 * (1 - pj) / (pj * nj) for gj, pj, nj in zip(g, p, (100, 200)))
    assert se == pytest.approx(np.sqrt(var), rel=1e-6)
    counts = _counts({("default", "c"): ((100, 200), (20, 60))})
    t = user_precision_table(counts, DS, ["s"])
    assert t.get_column("precision").to_list() == pytest.approx([0.2, 0.3])
    assert t.get_column("disparity").to_list() == pytest.approx([0.2, 0.2])
    assert user_precision_table(counts, DS, []).height == 0
    assert precision_disparity(np.array([0, 5]), np.array([10, 10]))[4]  # NaN SE with a reason
    # a group without positives: precision 0 with no interval (a Wald SE of 0 would claim [0, 0]), the reason said
    thin = user_precision_table(_counts({("default", "c"): ((100, 200), (0, 60))}), DS, ["s"])
    row = thin.row(0, named=True)
    assert row["precision"] == 0.0 and np.isnan(row["se"]) and np.isnan(row["ci_low"]) and np.isnan(row["ci_high"])
    assert row["reason"] == "a group's precision is 0 or 1: delta SE undefined"
    other = thin.row(1, named=True)  # p = 0.3 of 200: the Wald interval by hand
    half = 1.959963984540054 * np.sqrt(0.3 * 0.7 / 200)
    assert (other["ci_low"], other["ci_high"]) == pytest.approx((0.3 - half, 0.3 + half), rel=1e-9)


# --- the simulator's post-recall stage (seed 001 App. I.4) --------------------------------------

STAGED = dict(post_recall_rows_per_day=40_000, recall_share=(0.4, 0.6), recall_rate=(0.3, 0.2))


def test_simulated_stage_truth_by_hand():
    from fairmon.transforms.simulators.impressions import SimulationSpec, stage_truth_table

    spec = SimulationSpec(days=2, arms={"c": {}, "t": {0: 2.0}}, **STAGED)
    # default rec_share (0.45, 0.55), rec_rate (0.30, 0.36); random (0.5, 0.5) x (0.25, 0.28)
    P = np.array([0.125, 0.14])
    Qpr = np.array([0.4 * 0.3, 0.6 * 0.2])  # 0.12 both: recall U = (0.96, 0.857)
    U = spec.true_stage_utilities("c")
    assert U["recall"] == pytest.approx(Qpr / P, rel=1e-15)
    Q_t = np.array([0.9, 0.55]) / 1.45 * np.array([0.30, 0.36])  # arm t doubles group 0's weight
    assert spec.true_stage_utilities("t")["ranking"] == pytest.approx(Q_t / Qpr, rel=1e-15)
    for arm in ("c", "t"):
        u = spec.true_stage_utilities(arm)
        assert u["system"] == pytest.approx(u["recall"] * u["ranking"], rel=1e-15)
    t = stage_truth_table(spec)
    assert t.height == 2 * 2 * 3 * 2  # days x arms x stages x groups
    recall = t.filter((pl.col("stage") == "recall") & (pl.col("arm") == "t")).get_column("reo").unique()
    assert recall.to_list() == [pytest.approx(reo_of_utilities(Qpr / P))]  # the recall stage is shared by arms
    with pytest.raises(ValueError, match="recall_share"):
        SimulationSpec(post_recall_rows_per_day=10)
    assert stage_truth_table(SimulationSpec(days=1)).height == 0


def test_simulated_post_recall_rows_follow_the_spec():
    from fairmon.transforms.simulators.impressions import TIKTOK_SIGNALS, SimulationSpec, simulate_post_recall_day

    spec = SimulationSpec(days=1, arms={"c": {}, "t": {0: 2.0}}, seed=5, **STAGED)
    rows = simulate_post_recall_day(spec, 0)
    assert rows.height == 2 * 40_000 and sorted(rows.get_column("arm").unique()) == ["c", "t"]
    assert rows.get_column("request_id").n_unique() == rows.height
    y = pl.any_horizontal([pl.col(s) == 1 for s in TIKTOK_SIGNALS])
    for arm in ("c", "t"):  # the same recall distribution in both arms, within 4 binomial SEs
        r = rows.filter(pl.col("arm") == arm)
        share0 = (r.get_column("young_adult") == 0).mean()
        assert abs(share0 - 0.4) < 4 * np.sqrt(0.24 / 40_000)
        for k, rate in ((0, 0.3), (1, 0.2)):
            g = r.filter(pl.col("young_adult") == k)
            assert abs(g.select(y.mean()).item() - rate) < 4 * np.sqrt(rate * (1 - rate) / g.height)


@pytest.mark.slow
def test_backfill_publishes_stage_tables_that_cover_the_truth(tmp_path, prefect_harness):
    """`fairmon simulate` with a post-recall stage -> daily runs -> reo_stage: the
    factorisation holds to 1e-12, the stage intervals cover their truths, and
    the table tells the stages apart (recall at parity, ranking creating the disparity)."""
    from fairmon.pipelines.core.config import load_config
    from fairmon.pipelines.orchestration.flows import daily
    from fairmon.pipelines.simulation.simulated import write_simulation
    from fairmon.pipelines.storage.warehouse import read_table
    from fairmon.transforms.simulators.impressions import SimulationSpec

    spec = SimulationSpec(
        start=DS,
        days=3,
        rows_per_day=30_000,
        random_rows_per_day=10_000,
        random_pool_days=1,
        seed=11,
        post_recall_rows_per_day=30_000,
        recall_share=(0.5, 0.5),
        recall_rate=(0.275, 0.308),  # recall U = (1.1, 1.1): parity
    )
    paths = write_simulation(spec, tmp_path / "sim", "parquet")
    assert "stage_paths" in paths["config"].read_text()
    for d in range(spec.days):
        daily(str(paths["config"]), DS + dt.timedelta(days=d))
    cfg = load_config(paths["config"])
    t = read_table(cfg.warehouse_path, "reo_stage")
    truth = pl.read_csv(paths["truth_stages"], try_parse_dates=True)
    assert t.height == spec.days * 3 * 2
    covered = 0
    for (ds,), day in t.group_by("ds"):
        U = {(r["stage"], r["group"]): r["U"] for r in day.iter_rows(named=True)}
        for g in ("0", "1"):
            assert U[("system", g)] == pytest.approx(U[("recall", g)] * U[("ranking", g)], rel=1e-12)
        for stage in ("recall", "ranking", "system"):
            r = day.filter(pl.col("stage") == stage).row(0, named=True)
            true = truth.filter((pl.col("ds") == ds) & (pl.col("stage") == stage)).get_column("reo")[0]
            covered += r["reo_ci_low"] <= true <= r["reo_ci_high"]
        recall = day.filter(pl.col("stage") == "recall").row(0, named=True)
        ranking = day.filter(pl.col("stage") == "ranking").row(0, named=True)
        assert recall["reo_ci_low"] == 0.0 and ranking["reo_ci_low"] > 0  # the ranking stage creates it
    # 9 nominal-95 % intervals: 3 or more misses has probability 0.008 (coverage itself: test_stage_reo_intervals_cover)
    assert covered >= 7, covered


def test_report_reading_uses_the_intervals_not_the_point_estimates():
    from fairmon.pipelines.report.report import stage_reading

    def r(reo, lo, hi):
        return {"reo": reo, "reo_ci_low": lo, "reo_ci_high": hi}

    # recall's point estimate is the larger, but only ranking's interval excludes parity
    assert "the ranking stage creates the disparity" in stage_reading(r(0.2, 0.0, 0.5), r(0.1, 0.02, 0.18))
    assert "the recall stage creates" in stage_reading(r(0.1, 0.05, 0.15), r(0.3, 0.0, 0.6))
    assert "both stages" in stage_reading(r(0.1, 0.05, 0.15), r(0.1, 0.01, 0.2))
    assert "neither stage" in stage_reading(r(0.1, 0.0, 0.15), r(0.1, 0.0, 0.2))
    assert "no reading" in stage_reading(r(float("nan"), float("nan"), float("nan")), r(0.1, 0.01, 0.2))
