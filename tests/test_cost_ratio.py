"""The ratio of two groups' implied cost ratios, c_a / c_b (seed 002 §4.3 eq. 5, §4.4 eq. 6, §5.1;
DESIGN §4.2): exact on a hand-derived pair, its MOVER interval on log c written out by hand, the delta
method it reduces to, reciprocity, NaN and unbounded sides with reasons, and coverage at a known truth."""

import datetime as dt

import numpy as np
import polars as pl
import pytest
from scipy import stats

from fairmon.transforms.decisions.cost_ratio import cost_ratio_ratio, log_cost_ratio_interval
from fairmon.transforms.decisions.decision_tables import threshold_tables
from fairmon.transforms.decisions.local_poly import IntervalPart
from fairmon.transforms.decisions.threshold import ThresholdPrevalence, prevalence_at_threshold

D = dt.date(2026, 3, 1)
Z = float(stats.norm.ppf(0.975))


def _two_point_rows(group: str, positives_low: int, positives_high: int, n: int = 100) -> pl.DataFrame:
    """n rows at s = 0.4 and n at s = 0.6 (t = 0.5): the tricube weights are equal and the design is
    symmetric, so the local linear intercept is the mean of the two points' outcome rates."""
    y = [True] * positives_low + [False] * (n - positives_low)
    y += [True] * positives_high + [False] * (n - positives_high)
    return pl.DataFrame(
        {"model": "m", "score": [0.4] * n + [0.6] * n, "outcome": y, "attr__g": group},
        schema={"model": pl.String, "score": pl.Float64, "outcome": pl.Boolean, "attr__g": pl.String},
    )


def _log_c(p: float) -> float:
    return float(np.log((1 - p) / p))


def test_hand_derived_pair_gives_the_exact_ratio_and_the_mover_interval_on_log_c():
    # seed 002 §4.4's example: prevalence at the threshold 0.25 (c = 3) against 0.16 (c = 5.25)
    rows = pl.concat([_two_point_rows("a", 20, 30), _two_point_rows("b", 12, 20)])
    prev, diff = threshold_tables(rows, D, (D, D), [("m", 0.5, 0.2)], ["g"], ci="conventional", hc="HC1")
    by = {r["group"]: r for r in prev.iter_rows(named=True)}
    assert by["a"]["prevalence_at_threshold"] == pytest.approx(0.25, abs=1e-13)
    assert by["b"]["prevalence_at_threshold"] == pytest.approx(0.16, abs=1e-13)
    row = diff.row(0, named=True)
    assert (row["group_a"], row["group_b"]) == ("a", "b")
    assert row["cost_ratio_ratio"] == pytest.approx(3 / 5.25, abs=1e-12)  # = 4/7
    # HC1 variance of a two-point mean: (N/(N − 2))·Σ lᵢ² eᵢ², lᵢ = 1/(2n), eᵢ = y − the point's rate
    se = {
        g: np.sqrt(200 / 198 * 100 * (lo * (1 - lo) + hi * (1 - hi)) / 200**2)
        for g, lo, hi in (("a", 0.2, 0.3), ("b", 0.12, 0.2))
    }
    assert by["a"]["se"] == pytest.approx(se["a"], rel=1e-12) and by["a"]["ci_method"] == "hc_normal"
    # each β0 interval b ± z·se carried to log c (decreasing), then MOVER for log c_a − log c_b
    bounds = {g: (_log_c(p + Z * se[g]), _log_c(p), _log_c(p - Z * se[g])) for g, p in (("a", 0.25), ("b", 0.16))}
    (la, ca, ua), (lb, cb, ub) = bounds["a"], bounds["b"]
    low = np.exp(ca - cb - np.sqrt((ca - la) ** 2 + (ub - cb) ** 2))
    high = np.exp(ca - cb + np.sqrt((ua - ca) ** 2 + (cb - lb) ** 2))
    assert (row["cost_ratio_ratio_ci_low"], row["cost_ratio_ratio_ci_high"]) == pytest.approx((low, high), rel=1e-12)
    # the per-group cost-ratio intervals the prevalence table publishes are the same bounds, exponentiated
    assert by["a"]["cost_ratio_ci_low"] == pytest.approx(np.exp(la), rel=1e-12)
    assert by["b"]["cost_ratio_ci_high"] == pytest.approx(np.exp(ub), rel=1e-12)
    assert row["reason"] is None
    # existing columns unchanged by the new ones
    assert row["diff"] == pytest.approx(0.09, abs=1e-13) and row["se"] == pytest.approx(np.hypot(se["a"], se["b"]))


def _window(n, d, a, rng):
    """n scores in |s| < d from N(0, 1), outcomes from logistic(a + s); t = 0, truth β0 = logistic(a)."""
    s = stats.norm.ppf(rng.uniform(stats.norm.cdf(-d), stats.norm.cdf(d), n))
    return s, (rng.random(n) < 1 / (1 + np.exp(-(a + s)))).astype(float)


def test_large_normal_groups_give_the_delta_method_on_log_c_and_swapping_inverts():
    rng = np.random.default_rng(3)
    a = prevalence_at_threshold(*_window(40_000, 0.5, -1.0, rng), 0.0, 0.5)
    b = prevalence_at_threshold(*_window(40_000, 0.5, -1.5, rng), 0.0, 0.5)
    r = cost_ratio_ratio(a, b)
    pa, pb = a.prevalence_at_threshold, b.prevalence_at_threshold
    assert r.ratio == pytest.approx(((1 - pa) / pa) / ((1 - pb) / pb), rel=1e-14)
    # delta method: d log c / dβ0 = −1/(β0(1 − β0))
    se_log = np.hypot(a.se / (pa * (1 - pa)), b.se / (pb * (1 - pb)))
    delta = (r.ratio * np.exp(-Z * se_log), r.ratio * np.exp(Z * se_log))
    assert (r.ci_low, r.ci_high) == pytest.approx(delta, rel=2e-3)
    back = cost_ratio_ratio(b, a)
    assert back.ratio == pytest.approx(1 / r.ratio, rel=1e-14)
    assert (back.ci_low, back.ci_high) == pytest.approx((1 / r.ci_high, 1 / r.ci_low), rel=1e-12)


def _made(estimate: float, se: float, method: str = "hc_normal", n_eff: float = 100.0) -> ThresholdPrevalence:
    """A group's estimate built from one interval part, as prevalence_at_threshold builds it."""
    part = IntervalPart(method, estimate, se, n_eff)
    lo, hi = part.at(0.95)
    c = (1 - estimate) / estimate if 0 < estimate < 1 else float("nan")
    return ThresholdPrevalence(
        200, estimate, se, lo, hi, c, float("nan"), float("nan"), estimate, 0.0, n_eff=n_eff, parts=(part,)
    )


def test_a_beta_interval_reaching_0_or_1_leaves_that_side_unbounded_with_a_reason():
    wide = _made(0.05, 0.04)  # 0.05 − 1.96·0.04 < 0: the β0 interval reaches 0, c's reaches inf
    other = _made(0.3, 0.01)
    assert log_cost_ratio_interval(wide)[2] == np.inf
    up = cost_ratio_ratio(wide, other)
    assert up.ci_high == np.inf and 0 < up.ci_low < up.ratio and "up to inf" in up.reason
    down = cost_ratio_ratio(other, wide)
    assert down.ci_low == 0 and np.isfinite(down.ci_high) and "down to 0" in down.reason
    assert down.ratio == pytest.approx(1 / up.ratio, rel=1e-14)


def test_an_undefined_cost_ratio_gives_nan_with_a_reason():
    rng = np.random.default_rng(4)
    s = rng.uniform(-1, 1, 300)
    ones = prevalence_at_threshold(s, np.ones(300), 0.0, 1.0)  # β0 = 1: c = 0/1 = 0 is not a trade-off; NaN
    fine = prevalence_at_threshold(*_window(500, 1.0, -1.0, rng), 0.0, 1.0)
    r = cost_ratio_ratio(fine, ones)
    assert np.isnan([r.ratio, r.ci_low, r.ci_high]).all() and r.reason.startswith("group_b's prevalence")
    none = prevalence_at_threshold(s[:5], np.ones(5), 0.0, 1.0)  # too few rows: no estimate at all
    assert "group_a has no estimate" in cost_ratio_ratio(none, fine).reason
    # in the table, the reason says why both the diff and the ratio are NaN once
    rows = pl.DataFrame({"model": "m", "score": np.r_[s[:5], s], "outcome": np.r_[np.ones(5), np.ones(300)] > 0})
    rows = rows.with_columns(attr__g=pl.Series(["a"] * 5 + ["b"] * 300))
    _, diff = threshold_tables(rows, D, (D, D), [("m", 0.0, 1.0)], ["g"])
    row = diff.row(0, named=True)
    assert np.isnan(row["cost_ratio_ratio"]) and row["reason"].count("no estimate") == 1


@pytest.mark.coverage
def test_interval_covers_the_true_ratio_at_its_level():
    """600 pairs of windows per regime at a known truth c_a/c_b = exp(a_b − a_a): large normal windows,
    a 30-row (Wilson) window against a large one, and rare events; both interval kinds. About 6 CPU-s."""
    rng = np.random.default_rng(20)
    reps = 600
    regimes = [(1000, 1000, -1.0, -1.5, 0.5), (30, 1000, -1.0, -1.5, 0.5), (80, 80, -2.5, -3.0, 0.5)]
    for n_a, n_b, a_a, a_b, d in regimes:
        truth = np.exp(-a_a) / np.exp(-a_b)  # c = (1 − β0)/β0 = exp(−a) at β0 = logistic(a)
        for ci in ("conventional", "robust"):
            hits, defined = 0, 0
            for _ in range(reps):
                ea = prevalence_at_threshold(*_window(n_a, d, a_a, rng), 0.0, d, ci=ci)
                eb = prevalence_at_threshold(*_window(n_b, d, a_b, rng), 0.0, d, ci=ci)
                r = cost_ratio_ratio(ea, eb)
                if np.isnan(r.ratio):
                    continue
                defined += 1
                hits += r.ci_low <= truth <= r.ci_high
            cov = hits / defined  # Monte Carlo SE about 0.009
            # small and rare-event windows get Wilson intervals and the robust one is widened to hold the
            # point: conservative by construction; the large normal windows hold the level on both sides
            top = 0.98 if n_a == n_b == 1000 else 1.0
            assert defined > 0.9 * reps and 0.925 <= cov <= top, (n_a, n_b, a_a, ci, cov)
