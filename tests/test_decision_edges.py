"""Edge cases of prevalence at the threshold and SDT (issue 14, DESIGN §4.2-4.3,
seed 002 eqs. 6, 8-12): HC3, intervals that never collapse and stay in [0, 1],
exact SDT bounds near 0, BH q-values, and no NaN without a reason."""

import datetime as dt

import numpy as np
import polars as pl
import pytest
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from fairmon.pipelines.core.config import ScoresConfig
from fairmon.transforms.decisions.decision_tables import bh_q_values, threshold_tables
from fairmon.transforms.decisions.sdt import compare_cost_ratios, sdt_estimate, sdt_from_rates
from fairmon.transforms.decisions.sdt_tables import sdt_table
from fairmon.transforms.decisions.threshold import (
    MIN_FIT_ROWS,
    local_linear_fit,
    prevalence_at_threshold,
    prevalence_difference,
    tricube,
)

D = dt.date(2026, 3, 1)


def _window(n, d, a=-1.5, b=1.0, seed=0):
    """n scores in |s| < d from N(0, 1), outcomes from logistic(a + b s); t = 0."""
    rng = np.random.default_rng(seed)
    s = stats.norm.ppf(rng.uniform(stats.norm.cdf(-d), stats.norm.cdf(d), n))
    return s, (rng.random(n) < 1 / (1 + np.exp(-(a + b * s)))).astype(float)


# --- HC3 and the fits against statsmodels ------------------------------------------------


@pytest.mark.parametrize("n", [25, 400])
@pytest.mark.parametrize("hc", ["HC0", "HC1", "HC3"])
def test_hc_covariances_match_statsmodels_wls(n, hc):
    s, y = _window(n, 1.0, seed=n)
    w = tricube(s)
    for degree in (1, 2):
        X = np.vander(s, degree + 1, increasing=True)
        ref = sm.WLS(y, X, weights=w).fit(cov_type=hc)
        fit = local_linear_fit(s, y, w, hc, degree)
        assert fit.beta == pytest.approx(ref.params, rel=1e-10, abs=1e-12)
        assert np.sqrt(np.diag(fit.cov)) == pytest.approx(ref.bse, rel=1e-9)
    e = prevalence_at_threshold(s, y, 0.0, 1.0, hc=hc)
    ref = sm.WLS(y, sm.add_constant(s), weights=w).fit(cov_type=hc)
    assert e.se == pytest.approx(ref.bse[0], rel=1e-9)
    assert e.prevalence_at_threshold == pytest.approx(np.clip(ref.params[0], 0, 1), abs=1e-12)


def test_hc3_is_wider_than_hc1_in_a_small_window():
    s, y = _window(40, 1.0, seed=3)
    assert prevalence_at_threshold(s, y, 0, 1, hc="HC3").se > prevalence_at_threshold(s, y, 0, 1, hc="HC1").se


def test_robust_interval_is_built_around_the_local_quadratic_fit():
    s, y = _window(3000, 1.0, seed=4)
    e = prevalence_at_threshold(s, y, 0.0, 1.0, ci="robust")
    ref = sm.WLS(y, np.column_stack([np.ones_like(s), s, s * s]), weights=tricube(s)).fit(cov_type="HC1")
    z = stats.norm.ppf(0.975)
    assert e.ci_method == "robust_hc_normal"
    lo, hi = ref.params[0] - z * ref.bse[0], ref.params[0] + z * ref.bse[0]
    assert e.ci_low == pytest.approx(min(lo, e.prevalence_at_threshold), rel=1e-9)
    assert e.ci_high == pytest.approx(max(hi, e.prevalence_at_threshold), rel=1e-9)
    # the point estimate stays the paper's local linear fit
    assert e.prevalence_at_threshold == pytest.approx(
        sm.WLS(y, sm.add_constant(s), weights=tricube(s)).fit().params[0], rel=1e-10
    )


# --- intervals that never collapse ----------------------------------------------------


def _kish_wilson(s, y, t, d, level=0.95):
    """Independent reference: equivalent-kernel weights of the WLS intercept,
    n_eff = 1/Σl², Wilson interval of statsmodels on (β0·n_eff, n_eff)."""
    inside = np.abs(s - t) < d
    x = s[inside] - t
    w = (1 - np.abs(x / d) ** 3) ** 3
    X = np.column_stack([np.ones_like(x), x])
    l0 = np.linalg.solve(X.T @ (X * w[:, None]), (X * w[:, None]).T)[0]
    n_eff = 1 / np.sum(l0**2)
    b0 = float(np.clip(l0 @ y[inside], 0, 1))
    return n_eff, proportion_confint(b0 * n_eff, n_eff, alpha=1 - level, method="wilson")


@pytest.mark.parametrize("value", [0.0, 1.0])
@pytest.mark.parametrize("n", [30, 500])
def test_all_equal_outcomes_give_a_wilson_interval_of_positive_width(value, n):
    s = np.linspace(-2, 2, n)
    y = np.full(n, value)
    e = prevalence_at_threshold(s, y, 0.0, 1.5)
    n_eff, (lo, hi) = _kish_wilson(s, y, 0.0, 1.5)
    assert e.prevalence_at_threshold == value and e.se == 0
    assert e.ci_method == "wilson_neff"
    assert e.n_eff == pytest.approx(n_eff, rel=1e-10)
    assert (e.ci_low, e.ci_high) == pytest.approx((lo, hi), abs=1e-12)
    assert 0 <= e.ci_low < e.ci_high <= 1
    assert e.ci_high - e.ci_low > 0.005
    assert f"all outcomes in the window are {value:g}" in e.reason
    # c = (1 − β0)/β0 is undefined at 0 and 1; its interval is still there
    assert np.isnan(e.implied_cost_ratio) and "no implied cost ratio" in e.reason
    assert e.cost_ratio_ci_low == pytest.approx((1 - e.ci_high) / e.ci_high)


def test_small_window_uses_wilson_on_the_kish_effective_n():
    s, y = _window(40, 1.0, a=0.0, seed=5)
    e = prevalence_at_threshold(s, y, 0.0, 1.0, min_window_rows=100)
    n_eff, (lo, hi) = _kish_wilson(s, y, 0.0, 1.0)
    assert e.ci_method == "wilson_neff" and "40 rows within d (< min_window_rows = 100)" in e.reason
    assert (e.ci_low, e.ci_high) == pytest.approx((lo, hi), abs=1e-12)
    # the same window with min_window_rows below its size: the HC normal interval
    big = prevalence_at_threshold(s, y, 0.0, 1.0, min_window_rows=20)
    assert big.ci_method == "hc_normal"
    assert big.ci_high - big.ci_low == pytest.approx(2 * stats.norm.ppf(0.975) * big.se, rel=1e-9)


def test_fewer_than_the_minimum_rows_is_nan_with_a_reason():
    s, y = _window(MIN_FIT_ROWS - 1, 1.0)
    e = prevalence_at_threshold(s, y, 0.0, 1.0)
    assert np.isnan(e.prevalence_at_threshold) and np.isnan(e.ci_low) and e.reason
    e = prevalence_at_threshold(np.array([5.0]), np.array([1.0]), 0.0, 1.0)  # nothing in the window
    assert e.n_window == 0 and np.isnan(e.naive_window_mean) and "no naive window mean" in e.reason


@pytest.mark.parametrize("ci", ["conventional", "robust"])
@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_intervals_stay_inside_the_unit_interval_and_contain_the_estimate(ci):
    rng = np.random.default_rng(11)
    for k in range(300):
        n = int(rng.integers(10, 400))
        a = rng.uniform(-7, 7)
        s = rng.normal(0, 1, n) if k % 2 else np.round(rng.uniform(-2, 2, n), 1)
        y = (rng.random(n) < 1 / (1 + np.exp(-(a + 3 * s)))).astype(float)
        e = prevalence_at_threshold(s, y, 0.0, float(rng.choice([0.3, 1.0, 2.5])), ci=ci, hc="HC3")
        if np.isnan(e.prevalence_at_threshold):
            assert e.reason
            continue
        assert 0 <= e.ci_low <= e.prevalence_at_threshold <= e.ci_high <= 1
        assert e.ci_high > e.ci_low
        assert 0 <= e.cost_ratio_ci_low <= e.cost_ratio_ci_high


def test_bandwidth_flag_fires_on_a_curved_truth_with_many_rows():
    s, y = _window(20_000, 3.0, seed=6)
    e = prevalence_at_threshold(s, y, 0.0, 3.0)
    half = np.abs(s) < 1.5
    ref = sm.WLS(y[half], sm.add_constant(s[half]), weights=tricube(s[half] / 1.5)).fit(cov_type="HC1")
    assert e.prevalence_half_d == pytest.approx(ref.params[0], rel=1e-10)
    assert e.se_half_d == pytest.approx(ref.bse[0], rel=1e-9)
    assert e.bandwidth_flag and "bandwidth" in e.reason
    assert abs(e.prevalence_at_threshold - e.prevalence_half_d) > max(e.se, e.se_half_d)
    # a straight-line truth: no flag
    s2 = np.linspace(-1, 1, 4001)
    y2 = (np.random.default_rng(1).random(s2.size) < 0.3 + 0.1 * s2).astype(float)
    assert not prevalence_at_threshold(s2, y2, 0.0, 1.0).bandwidth_flag


@pytest.mark.coverage
def test_small_window_coverage_in_simulation():
    """Coverage of β0 = logistic(a) with 30-row windows, both interval kinds (fast)."""
    rng = np.random.default_rng(12)
    for a, d in ((-1.5, 1.0), (-3.0, 0.5)):
        truth = 1 / (1 + np.exp(-a))
        hits = {"conventional": 0, "robust": 0}
        for _ in range(300):
            s = stats.norm.ppf(rng.uniform(stats.norm.cdf(-d), stats.norm.cdf(d), 30))
            y = (rng.random(30) < 1 / (1 + np.exp(-(a + s)))).astype(float)
            for ci in hits:
                e = prevalence_at_threshold(s, y, 0.0, d, ci=ci)
                hits[ci] += e.ci_low <= truth <= e.ci_high
        for ci, h in hits.items():
            assert h / 300 >= 0.9, (a, d, ci, h / 300)


# --- group differences -----------------------------------------------------------------


def test_difference_of_two_normal_groups_is_the_wald_interval():
    a = prevalence_at_threshold(*_window(3000, 1.0, a=-1.0, seed=7), 0.0, 1.0)
    b = prevalence_at_threshold(*_window(3000, 1.0, a=-1.5, seed=8), 0.0, 1.0)
    r = prevalence_difference(a, b)
    se = np.hypot(a.se, b.se)
    z = stats.norm.ppf(0.975)
    assert (r.ci_low, r.ci_high) == pytest.approx((r.diff - z * se, r.diff + z * se), rel=1e-9)
    assert r.p_value == pytest.approx(2 * stats.norm.sf(abs(r.diff) / se), rel=1e-9)


@pytest.mark.parametrize("ci", ["conventional", "robust"])
def test_difference_p_value_inverts_the_interval(ci):
    a = prevalence_at_threshold(*_window(60, 1.0, a=-0.5, seed=9), 0.0, 1.0, ci=ci)
    b = prevalence_at_threshold(*_window(2000, 1.0, a=-2.0, seed=10), 0.0, 1.0, ci=ci)
    r = prevalence_difference(a, b)
    assert a.ci_method.endswith("wilson_neff") and 0 < r.p_value < 1
    at_p = prevalence_difference(a, b, level=1 - r.p_value)
    bound = at_p.ci_low if r.diff > 0 else at_p.ci_high
    # the interval at level 1 − p has 0 on its edge
    assert bound == pytest.approx(0.0, abs=1e-9)
    inside = prevalence_difference(a, b, level=1 - r.p_value * 1.01)
    assert (inside.ci_low if r.diff > 0 else -inside.ci_high) > 0
    assert r.ci_low <= r.diff <= r.ci_high


def test_difference_with_an_undefined_group_is_nan_with_a_reason():
    a = prevalence_at_threshold(*_window(5, 1.0), 0.0, 1.0)
    b = prevalence_at_threshold(*_window(500, 1.0), 0.0, 1.0)
    r = prevalence_difference(a, b)
    assert np.isnan(r.diff) and np.isnan(r.p_value) and r.reason.startswith("group_a has no estimate")


# --- SDT near 0 and 1 -------------------------------------------------------------------


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_sdt_exact_bounds_are_clopper_pearson_carried_through():
    tp, fn, fp, tn = 198, 2, 40, 760
    e = sdt_estimate(tp, fn, fp, tn)
    assert e.ci_method == "exact" and "fn = 2" in e.reason and not e.corrected
    lo, hi = proportion_confint(fp, fp + tn, alpha=0.05, method="beta")
    assert (e.criterion_t_ci_low, e.criterion_t_ci_high) == pytest.approx(
        (stats.norm.ppf(1 - hi), stats.norm.ppf(1 - lo)), rel=1e-9
    )
    g = 0.95 ** (1 / 2)
    flo, fhi = proportion_confint(fp, fp + tn, alpha=1 - g, method="beta")
    mlo, mhi = proportion_confint(fn, tp + fn, alpha=1 - g, method="beta")
    assert e.d_prime_ci_low == pytest.approx(stats.norm.ppf(1 - fhi) - stats.norm.ppf(mhi), rel=1e-9)
    assert e.d_prime_ci_high == pytest.approx(stats.norm.ppf(1 - flo) - stats.norm.ppf(mlo), rel=1e-9)
    # cost ratio: brute force over the box of the three level^(1/3) intervals
    g3 = 0.95 ** (1 / 3)
    box = [
        np.linspace(*proportion_confint(k, n, alpha=1 - g3, method="beta"), 201)
        for k, n in ((fp, fp + tn), (fn, tp + fn), (tp + fn, tp + fn + fp + tn))
    ]
    F, M, P = np.meshgrid(*box, indexing="ij")
    logc = np.log((1 - P) / P) + stats.norm.ppf(M) ** 2 / 2 - stats.norm.ppf(1 - F) ** 2 / 2
    assert np.log(e.cost_ratio_ci_low) == pytest.approx(logc.min(), abs=1e-9)
    assert np.log(e.cost_ratio_ci_high) == pytest.approx(logc.max(), abs=1e-9)
    assert e.cost_ratio_ci_low <= e.cost_ratio <= e.cost_ratio_ci_high


def test_sdt_no_false_negative_is_corrected_flagged_and_unbounded_above():
    e = sdt_estimate(tp=20, fn=0, fp=9, tn=171)
    assert e.corrected and e.ci_method == "exact"
    assert e.fnr == pytest.approx(0.5 / 21)
    assert e.cost_ratio_ci_high == np.inf and e.implied_threshold_ci[0] == 0.0
    assert "no finite upper bound" in e.reason and "log-linear" in e.reason
    # delta away from 0 and 1
    assert sdt_estimate(400, 100, 300, 3000).ci_method == "delta"


@pytest.mark.coverage
def test_sdt_near_zero_fnr_coverage_in_simulation():
    """FNR = 0.001 with ~20 gold positives used to cover 0.000; the exact bounds cover."""
    rng = np.random.default_rng(13)
    fpr, phi = 0.05, 0.1
    for fnr, n in ((0.001, 200), (0.01, 2000)):
        _, _, tau, c = sdt_from_rates(fpr, fnr, phi)
        n_pos = rng.binomial(n, phi, 300)
        tp = rng.binomial(n_pos, 1 - fnr)
        fp = rng.binomial(n - n_pos, fpr)
        hits = total = 0
        for i in range(300):
            e = sdt_estimate(int(tp[i]), int(n_pos[i] - tp[i]), int(fp[i]), int(n - n_pos[i] - fp[i]))
            if e.ci_method is None:
                assert e.reason
                continue
            lo, hi = e.implied_threshold_ci
            assert (e.cost_ratio_ci_low <= c <= e.cost_ratio_ci_high) == (lo <= tau <= hi)
            hits += lo <= tau <= hi
            total += 1
        assert total > 250 and hits / total >= 0.9, (fnr, n, hits / total)


@pytest.mark.coverage
def test_interval_overlap_p_value_is_valid_under_the_null():
    rng = np.random.default_rng(14)
    reject = 0
    for _ in range(200):
        a = rng.binomial([30, 400], [0.997, 0.05])
        b = rng.binomial([300, 4000], [0.997, 0.05])
        ea = sdt_estimate(int(a[0]), int(30 - a[0]), int(a[1]), int(400 - a[1]))
        eb = sdt_estimate(int(b[0]), int(300 - b[0]), int(b[1]), int(4000 - b[1]))
        p, how = compare_cost_ratios(ea, eb)
        assert 0 <= p <= 1 and "overlap" in how
        reject += p < 0.05
    assert reject / 200 <= 0.05


# --- q-values ---------------------------------------------------------------------------


def test_bh_q_values_by_hand_and_scipy():
    p = np.array([0.01, 0.04, 0.03, np.nan, 0.2])
    # by hand over the four defined p: sorted 0.01, 0.03, 0.04, 0.2 → p·m/i = 0.04, 0.06, 0.0533, 0.2; running minima
    expected = np.array([0.04, 0.04 * 4 / 3, 0.04 * 4 / 3, np.nan, 0.2])
    q = bh_q_values(p)
    assert q == pytest.approx(expected, nan_ok=True)
    assert q[[0, 1, 2, 4]] == pytest.approx(stats.false_discovery_control(p[[0, 1, 2, 4]], method="bh"))
    assert np.isnan(bh_q_values(np.array([np.nan]))).all()


# --- tables over edge inputs: no NaN without a reason ----------------------------------------


def _edge_scores() -> pl.DataFrame:
    rng = np.random.default_rng(15)
    parts = []

    def add(model, group, s, y):
        parts.append(pl.DataFrame({"model": model, "score": s, "outcome": y.astype(bool), "attr__g": group}))

    s = rng.normal(0, 1, 3000)
    add("m", "big", s, rng.random(3000) < 1 / (1 + np.exp(-(-1 + 2 * s))))
    add("m", "zeros", np.linspace(-1, 1, 60), np.zeros(60))  # all outcomes equal
    add("m", "ones", np.linspace(-1, 1, 15), np.ones(15))  # all equal, small
    add("m", "tiny", np.array([0.1, -0.2, 0.3]), np.array([1, 0, 1]))  # below the minimum
    add("m", "one_score", np.zeros(40), rng.random(40) < 0.5)  # singular design
    add("m", "two_scores", np.repeat([-0.5, 0.5], 20), rng.random(40) < 0.3)  # no quadratic fit
    add("m", "far", rng.normal(5, 0.1, 50), rng.random(50) < 0.5)  # nothing in the window
    add("m", "rare", rng.normal(0, 1, 400), rng.random(400) < 0.01)  # few events
    out = pl.concat(parts)
    return out.with_columns(pl.when(pl.col("attr__g") == "big").then(None).otherwise(pl.col("attr__g")).alias("h"))


def _assert_every_nan_has_a_reason(frame: pl.DataFrame) -> None:
    floats = [c for c, t in frame.schema.items() if t == pl.Float64]
    for r in frame.iter_rows(named=True):
        nan_cols = [c for c in floats if r[c] is None or np.isnan(r[c])]
        if nan_cols:
            assert r["reason"], (nan_cols, r)


@pytest.mark.parametrize("ci", ["robust", "conventional"])
def test_threshold_tables_over_edge_inputs(ci):
    prev, diff = threshold_tables(
        _edge_scores(), D, (D, D), [("m", 0.0, 1.0), ("m", 0.0, 0.05), ("absent", 0.0, 1.0)], ["g"], ci=ci, hc="HC3"
    )
    _assert_every_nan_has_a_reason(prev)
    _assert_every_nan_has_a_reason(diff)
    ok = prev.filter(pl.col("ci_low").is_not_nan())
    assert (ok["ci_low"] >= 0).all() and (ok["ci_high"] <= 1).all() and (ok["ci_high"] > ok["ci_low"]).all()
    rows = {(r["d"], r["group"]): r for r in prev.iter_rows(named=True)}
    assert rows[(1.0, "zeros")]["ci_method"].endswith("wilson_neff")
    assert np.isnan(rows[(1.0, "tiny")]["prevalence_at_threshold"])
    assert "distinct scores" in rows[(1.0, "one_score")]["reason"]
    if ci == "robust":
        assert "no bias-corrected" in rows[(1.0, "two_scores")]["reason"]
    # q-values: BH over the day's diff p-values
    p = diff["p_value"].to_numpy()
    assert diff["q_value"].to_numpy() == pytest.approx(bh_q_values(p), nan_ok=True)
    ok = np.isfinite(p)
    assert ok.sum() >= 3
    assert diff["q_value"].to_numpy()[ok] == pytest.approx(stats.false_discovery_control(p[ok], method="bh"))


def test_sdt_table_over_edge_inputs():
    conf = pl.DataFrame(
        {
            "attribute": ["g"] * 9,
            "group": ["u", "u", "u", "u", "v", "v", "v", "w", "x"],
            "labeler_id": ["*", "L1", "L2", "L3", "*", "L1", "L2", "L1", "*"],
            "tp": [400, 20, 180, 200, 90, 45, 45, 3, 50],
            "fn": [3, 0, 1, 2, 30, 15, 15, 1, 0],
            "fp": [90, 9, 40, 41, 20, 0, 20, 2, 0],
            "tn": [1710, 171, 760, 779, 180, 100, 80, 50, 200],
        }
    )
    out = sdt_table(conf, D, (D, D))
    _assert_every_nan_has_a_reason(out)
    rows = {(r["group"], r["labeler_id"]): r for r in out.iter_rows(named=True)}
    assert rows[("u", "L1")]["ci_method"] == "exact" and rows[("u", "L1")]["corrected"]
    assert rows[("v", "*")]["ci_method"] == "delta"
    assert np.isnan(rows[("w", "L1")]["cost_ratio"]) and "below the minimum" in rows[("w", "L1")]["reason"]
    assert "pooled row" in rows[("u", "*")]["reason"]
    p = out["p_vs_pool"].to_numpy()
    ok = np.isfinite(p)
    assert ok.sum() == 5  # u: L1, L2, L3; v: L1, L2 (each against the other)
    assert out["q_value"].to_numpy()[ok] == pytest.approx(stats.false_discovery_control(p[ok], method="bh"))
    assert np.isnan(out["q_value"].to_numpy()[~ok]).all()
    for r in out.iter_rows(named=True):
        if r["ci_method"]:
            assert 0 <= r["implied_threshold_ci_low"] <= r["implied_threshold"] <= r["implied_threshold_ci_high"] <= 1


# --- config ------------------------------------------------------------------------------


def test_scores_config_fields():
    base = {"path": "s/{ds}.csv", "attributes": ["g"], "thresholds": [{"model": "m", "t": 0.5, "d": 0.1}]}
    cfg = ScoresConfig.model_validate(base)
    assert (cfg.min_window_rows, cfg.hc, cfg.ci) == (100, "HC1", "robust")
    assert ScoresConfig.model_validate({**base, "hc": "HC3"}).hc == "HC3"
    with pytest.raises(ValueError, match="min_rows was replaced by min_window_rows"):
        ScoresConfig.model_validate({**base, "min_rows": 10})
    with pytest.raises(ValueError):
        ScoresConfig.model_validate({**base, "hc": "HC2"})
    with pytest.raises(ValueError):
        ScoresConfig.model_validate({**base, "min_window_rows": 0})
    for name in ("hc", "min_window_rows", "ci"):
        assert ScoresConfig.model_fields[name].description
