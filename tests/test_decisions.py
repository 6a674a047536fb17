"""Model and labeler fairness (seed 002): prevalence at the threshold and SDT."""

import datetime as dt

import numpy as np
import pandas as pd
import polars as pl
import pytest
import statsmodels.api as sm
from scipy import stats

from fairmon.pipelines.orchestration.flows import daily
from fairmon.pipelines.simulation.simulated import write_labeling_simulation
from fairmon.pipelines.storage.warehouse import read_table
from fairmon.transforms.decisions.sdt import compare_log_cost_ratio, rates_from_sdt, sdt_estimate, sdt_from_rates
from fairmon.transforms.decisions.threshold import (
    cost_ratio_from_threshold,
    group_difference,
    implied_threshold,
    local_linear_at,
    prevalence_at_threshold,
    tricube,
)
from fairmon.transforms.simulators.labelers import LabelingSpec, labeling_truth

# --- DESIGN §5, seed 002 §4.1 ------------------------------------------------------


def test_seed_002_reference_values():
    assert implied_threshold(4) == pytest.approx(0.2)
    assert implied_threshold(0.1) == pytest.approx(0.909, abs=5e-4)
    assert cost_ratio_from_threshold(0.25) == pytest.approx(3.0)
    assert cost_ratio_from_threshold(0.16) == pytest.approx(5.25)


# --- prevalence at the threshold ---------------------------------------------------


def test_tricube_weights():
    assert tricube(np.array([0.0, 1 / 3, -2 / 3, 1.0, 1.5])) == pytest.approx(
        [1.0, (26 / 27) ** 3, (19 / 27) ** 3, 0.0, 0.0]
    )


@pytest.mark.parametrize("hc", ["HC0", "HC1"])
def test_tricube_wls_matches_statsmodels(hc):
    rng = np.random.default_rng(0)
    s = rng.uniform(0, 10, 3000)
    y = (rng.random(3000) < 0.05 + 0.07 * s).astype(float)
    t, d = 5.0, 3.0
    inside = np.abs(s - t) < d
    w = tricube((s[inside] - t) / d)
    ref = sm.WLS(y[inside], sm.add_constant(s[inside] - t), weights=w).fit(cov_type=hc)
    beta, cov = local_linear_at(s[inside] - t, y[inside], w, hc)
    assert beta == pytest.approx(ref.params, rel=1e-12)
    assert np.sqrt(np.diag(cov)) == pytest.approx(ref.bse, rel=1e-10)
    e = prevalence_at_threshold(s, y, t, d, hc=hc)
    assert e.prevalence_at_threshold == pytest.approx(ref.params[0], rel=1e-12)
    assert e.se == pytest.approx(ref.bse[0], rel=1e-10)
    assert e.implied_cost_ratio == pytest.approx((1 - ref.params[0]) / ref.params[0])
    assert e.naive_window_mean == pytest.approx(y[inside].mean())
    assert e.n_window == inside.sum()
    # the cost-ratio CI is the prevalence CI mapped through c = (1 - p)/p
    assert e.cost_ratio_ci_low == pytest.approx((1 - e.ci_high) / e.ci_high)
    assert e.cost_ratio_ci_high == pytest.approx((1 - e.ci_low) / e.ci_low)


def test_linear_truth_is_recovered_exactly_without_noise():
    s = np.linspace(0, 1, 201)
    y = 0.1 + 0.6 * s  # E[Y|s] linear, no noise
    e = prevalence_at_threshold(s, y, 0.4, 0.25)
    assert e.prevalence_at_threshold == pytest.approx(0.1 + 0.6 * 0.4, abs=1e-12)
    assert e.slope == pytest.approx(0.6, abs=1e-12)
    assert e.se == pytest.approx(0.0, abs=1e-12)
    # the naive window mean is biased where E[Y|s] is curved; local linear is not (eq. 9 vs 10)
    yq = 0.1 + 0.6 * s**2
    q = prevalence_at_threshold(s, yq, 0.8, 0.2)
    assert abs(q.prevalence_at_threshold - (0.1 + 0.6 * 0.64)) < abs(q.naive_window_mean - (0.1 + 0.6 * 0.64))


def test_prevalence_undefined_cases():
    e = prevalence_at_threshold(np.array([1.0, 2, 3]), np.array([0.0, 1, 0]), 2, 5)
    assert np.isnan(e.prevalence_at_threshold) and "minimum" in e.reason
    e = prevalence_at_threshold(np.full(50, 2.0), np.ones(50) * 0.5, 2, 1)
    assert np.isnan(e.se) and "singular" in e.reason
    with pytest.raises(ValueError):
        prevalence_at_threshold(np.ones(3), np.ones(3), 1, 0)


def test_group_difference():
    rng = np.random.default_rng(1)
    s = rng.uniform(0, 10, 4000)
    a = prevalence_at_threshold(s, (rng.random(4000) < 0.04 * s + 0.1).astype(float), 5, 3)
    b = prevalence_at_threshold(s, (rng.random(4000) < 0.04 * s + 0.2).astype(float), 5, 3)
    diff, se, lo, hi, p = group_difference(a, b)
    assert diff == pytest.approx(a.prevalence_at_threshold - b.prevalence_at_threshold)
    assert se == pytest.approx(np.hypot(a.se, b.se))
    assert p == pytest.approx(2 * stats.norm.sf(abs(diff) / se))
    assert hi < 0  # group b's rate at t is 0.1 higher


# --- SDT ------------------------------------------------------------------------------


@pytest.mark.parametrize("fpr,fnr", [(0.1, 0.2), (0.3, 0.05), (0.02, 0.6)])
def test_sdt_round_trip(fpr, fnr):
    t, d, tau, c = sdt_from_rates(fpr, fnr, 0.2)
    assert rates_from_sdt(t, d) == pytest.approx((fpr, fnr), rel=1e-12)
    # the implied threshold is the posterior P(gold = 1 | evidence = t) (Bayes, eq. 12)
    post = 0.2 * stats.norm.pdf(t - d) / (0.2 * stats.norm.pdf(t - d) + 0.8 * stats.norm.pdf(t))
    assert tau == pytest.approx(post, rel=1e-12)
    assert c == pytest.approx((1 - tau) / tau, rel=1e-12)


def test_log_linear_correction_and_minimum_counts():
    e = sdt_estimate(tp=50, fn=0, fp=3, tn=200)
    assert e.corrected and "log-linear" in e.reason
    assert e.fnr == pytest.approx(0.5 / 51) and e.fpr == pytest.approx(3.5 / 204)
    assert np.isfinite(e.d_prime) and np.isfinite(e.cost_ratio)
    small = sdt_estimate(tp=5, fn=2, fp=10, tn=100)
    assert np.isnan(small.cost_ratio) and "minimum" in small.reason
    assert np.isfinite(sdt_estimate(5, 2, 10, 100, min_pos=7).cost_ratio)


@pytest.mark.coverage
def test_simulated_labelers_are_recovered_with_nominal_coverage():
    rng = np.random.default_rng(7)
    cases = [(2.0, 1.2, 0.1, 5000), (1.5, 1.6, 0.2, 4000), (2.5, 1.0, 0.3, 3000)]
    reps = 800
    for dp, t, phi, n in cases:
        fpr, fnr = rates_from_sdt(t, dp)
        _, _, _, c = sdt_from_rates(fpr, fnr, phi)
        n_pos = rng.binomial(n, phi, reps)
        tp = rng.binomial(n_pos, 1 - fnr)
        fp = rng.binomial(n - n_pos, fpr)
        hits = {"t": 0, "d": 0, "c": 0}
        for i in range(reps):
            e = sdt_estimate(int(tp[i]), int(n_pos[i] - tp[i]), int(fp[i]), int(n - n_pos[i] - fp[i]))
            hits["t"] += abs(e.criterion_t - t) <= 1.959964 * e.se_t
            hits["d"] += abs(e.d_prime - dp) <= 1.959964 * e.se_d_prime
            hits["c"] += e.cost_ratio_ci_low <= c <= e.cost_ratio_ci_high
        for k, v in hits.items():
            assert 0.92 <= v / reps <= 0.98, (dp, t, phi, k, v / reps)


def test_compare_log_cost_ratio():
    a, b = sdt_estimate(400, 100, 300, 3000), sdt_estimate(400, 100, 300, 3000)
    z, p = compare_log_cost_ratio(a, b)
    assert z == pytest.approx(0.0) and p == pytest.approx(1.0)


# --- end to end -----------------------------------------------------------------------


@pytest.mark.usefixtures("prefect_harness")
def test_compas_prevalence_at_threshold_matches_independent_computation(tmp_path):
    from conftest import REPO

    csv = REPO.parent / "shared" / "data" / "compas" / "compas_two_year.csv"
    if not csv.exists():
        csv = REPO / "data" / "compas" / "compas_two_year.csv"
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'warehouse = "wh"\nduckdb = "c.duckdb"\n[scores]\nformat = "compas"\npath = "{csv}"\n'
        'attributes = ["race"]\nwindow_days = 730\npropublica_filter = true\n'
        '[[scores.thresholds]]\nmodel = "compas"\nt = 5\nd = 3\n'
    )
    out = daily(str(cfg), dt.date(2014, 12, 31))
    got = {r["group"]: r for r in out["threshold_prevalence"]}
    # independent: pandas + statsmodels straight from the CSV
    df = pd.read_csv(csv)
    df = df[df["propublica_filter"].astype(str).str.lower() == "true"]
    assert len(df) == 6172
    for race in ("African-American", "Caucasian", "Hispanic", "Other"):
        g = df[(df["race"] == race) & ((df["decile_score"] - 5).abs() < 3)]
        w = (1 - ((g["decile_score"] - 5).abs() / 3) ** 3) ** 3
        fit = sm.WLS(g["two_year_recid"].astype(float), sm.add_constant(g["decile_score"] - 5.0), weights=w).fit(
            cov_type="HC1"
        )
        assert got[race]["n_window"] == len(g)
        assert got[race]["prevalence_at_threshold"] == pytest.approx(fit.params.iloc[0], rel=1e-10)
        assert got[race]["se"] == pytest.approx(fit.bse.iloc[0], rel=1e-8)
        p = fit.params.iloc[0]
        assert got[race]["implied_cost_ratio"] == pytest.approx((1 - p) / p, rel=1e-10)
    assert np.isnan(got["Native American"]["prevalence_at_threshold"])  # 5 rows in the window
    assert got["African-American"]["prevalence_at_threshold"] == pytest.approx(0.5142, abs=1e-4)
    assert got["Caucasian"]["prevalence_at_threshold"] == pytest.approx(0.4775, abs=1e-4)
    diffs = read_table(tmp_path / "wh", "threshold_prevalence_diff")
    aa_c = diffs.filter((pl.col("group_a") == "African-American") & (pl.col("group_b") == "Caucasian")).row(
        0, named=True
    )
    assert aa_c["diff"] == pytest.approx(
        got["African-American"]["prevalence_at_threshold"] - got["Caucasian"]["prevalence_at_threshold"]
    )


@pytest.mark.usefixtures("prefect_harness")
def test_labeling_flow_recovers_simulated_labelers(tmp_path):
    spec = LabelingSpec(days=3, items_per_day=15_000, gold_rate=0.7, seed=11)
    paths = write_labeling_simulation(spec, tmp_path / "lab")
    ds = spec.start + dt.timedelta(days=2)
    out = daily(str(paths["config"]), ds)
    sdt = pl.DataFrame(out["sdt"])
    # independent confusion counts of the pool straight from the CSVs
    raw = pl.concat([pl.read_csv(p) for p in sorted((tmp_path / "lab" / "labels").glob("*.csv"))])
    gold = raw.filter(pl.col("gold_label").is_not_null())
    for g in ("A", "B"):
        sub = gold.filter(pl.col("producer_group") == g)
        neg, pos = sub.filter(~pl.col("gold_label")), sub.filter(pl.col("gold_label"))
        row = sdt.filter((pl.col("group") == g) & (pl.col("labeler_id") == "*")).row(0, named=True)
        assert row["n_pos"] == pos.height and row["n_neg"] == neg.height
        assert row["fpr"] == pytest.approx(neg.get_column("label").mean())
        assert row["fnr"] == pytest.approx(1 - pos.get_column("label").mean())
    truth = labeling_truth(spec)
    covered = 0
    for r in truth.iter_rows(named=True):
        est = sdt.filter((pl.col("group") == r["group"]) & (pl.col("labeler_id") == r["labeler_id"])).row(0, named=True)
        covered += est["cost_ratio_ci_low"] <= r["cost_ratio"] <= est["cost_ratio_ci_high"]
    assert covered >= 5  # 6 labeler x group cells, 95% CIs
    # L2 is far stricter on group B than the others: flagged against the pool
    l2b = sdt.filter((pl.col("group") == "B") & (pl.col("labeler_id") == "L2")).row(0, named=True)
    assert l2b["p_vs_pool"] < 1e-6


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_cross_group_cost_ratios_of_eq_5_are_the_cells_of_an_intersection(tmp_path):
    """Seed 002 eq. 5: content of publisher group a shown to viewers of group b has its own cost ratio c_ab.
    [scores] intersections = [["publisher", "viewer"]] gives the attribute publisher×viewer whose cells a×b get
    prevalence at the threshold and c_ab = (1 − p)/p; the same as an explicit column holding the cell, and as a
    tricube-weighted least-squares fit on (s − t) with HC1 errors written out with statsmodels."""
    from fairmon.pipelines.executor.days import run_day

    rng = np.random.default_rng(5)
    n = 8000
    publisher, viewer = rng.choice(["a", "b"], n), rng.choice(["x", "y"], n)
    score = rng.uniform(0, 1, n)
    lift = np.where(publisher == "a", 0.1, 0.0) + np.where(viewer == "y", 0.15, 0.0)
    outcome = rng.random(n) < np.clip(score * 0.6 + lift, 0, 1)
    ds = dt.date(2026, 5, 1)
    (tmp_path / "scores").mkdir()
    pl.DataFrame(
        {
            "ds": [ds] * n,
            "model": "m",
            "item_id": [f"i{i}" for i in range(n)],
            "score": score,
            "outcome": outcome,
            "publisher": publisher,
            "viewer": viewer,
            "cell": [f"{p}×{v}" for p, v in zip(publisher, viewer, strict=True)],
        }
    ).write_csv(tmp_path / "scores" / f"{ds}.csv")
    (tmp_path / "f.toml").write_text(
        'warehouse = "wh"\nduckdb = "f.duckdb"\n[scores]\npath = "scores/{ds}.csv"\n'
        'attributes = ["publisher", "viewer", "cell"]\nintersections = [["publisher", "viewer"]]\n'
        '[[scores.thresholds]]\nmodel = "m"\nt = 0.5\nd = 0.2\n'
    )
    assert run_day(str(tmp_path / "f.toml"), ds)["status"] == "published"
    got = read_table(tmp_path / "wh", "threshold_prevalence")
    cells_only = pl.col("group") != "*"  # "*": the attribute's pooled row
    crossed = got.filter((pl.col("attribute") == "publisher×viewer") & cells_only).sort("group")
    explicit = got.filter((pl.col("attribute") == "cell") & cells_only).sort("group")
    assert crossed.get_column("group").to_list() == ["a×x", "a×y", "b×x", "b×y"]
    numbers = ["n_window", "prevalence_at_threshold", "se", "implied_cost_ratio", "ci_low", "ci_high"]
    assert crossed.select(numbers).equals(explicit.select(numbers))
    for row in crossed.iter_rows(named=True):
        p_, v_ = row["group"].split("×")
        sel = (publisher == p_) & (viewer == v_) & (np.abs(score - 0.5) < 0.2)
        x = score[sel] - 0.5
        w = (1 - (np.abs(x) / 0.2) ** 3) ** 3
        fit = sm.WLS(outcome[sel].astype(float), sm.add_constant(x), weights=w).fit(cov_type="HC1")
        p = fit.params[0]
        assert row["n_window"] == sel.sum() and row["prevalence_at_threshold"] == pytest.approx(p, rel=1e-9)
        assert row["implied_cost_ratio"] == pytest.approx((1 - p) / p, rel=1e-9)
    cells = dict(zip(crossed["group"], crossed["implied_cost_ratio"], strict=True))
    assert cells["a×y"] < cells["b×x"]  # more positives at the threshold: a smaller implied cost ratio
    # the diff table compares the cells pair by pair: c_ab / c_a'b' from the cells' own cost ratios
    pairs = read_table(tmp_path / "wh", "threshold_prevalence_diff").filter(pl.col("attribute") == "publisher×viewer")
    assert sorted(zip(pairs["group_a"], pairs["group_b"], strict=True)) == [
        ("a×x", "a×y"), ("a×x", "b×x"), ("a×x", "b×y"), ("a×y", "b×x"), ("a×y", "b×y"), ("b×x", "b×y")
    ]  # fmt: skip
    for r in pairs.iter_rows(named=True):
        assert r["cost_ratio_ratio"] == pytest.approx(cells[r["group_a"]] / cells[r["group_b"]], rel=1e-12)
        assert r["cost_ratio_ratio_ci_low"] < r["cost_ratio_ratio"] < r["cost_ratio_ratio_ci_high"]
    # the truth: E[Y | s = 0.5] = 0.3 + lift per cell (linear), so c_ax / c_by = (0.6/0.4) / (0.55/0.45)
    a_x_b_y = pairs.filter((pl.col("group_a") == "a×x") & (pl.col("group_b") == "b×y")).row(0, named=True)
    assert a_x_b_y["cost_ratio_ratio_ci_low"] < (0.6 / 0.4) / (0.55 / 0.45) < a_x_b_y["cost_ratio_ratio_ci_high"]
