"""External audits with differential privacy (seed 000) and traffic planning (seed 001 App. E)."""

import datetime as dt
import json
import math

import numpy as np
import polars as pl
import pytest
from pydantic import ValidationError
from scipy import stats
from typer.testing import CliRunner

from fairmon.pipelines.core.config import AuditConfig, ConfigError, load_config
from fairmon.pipelines.faces.cli import app
from fairmon.pipelines.orchestration.flows import daily
from fairmon.pipelines.privacy.audit_release import BudgetExceeded, export_release, private_release
from fairmon.transforms.private.release import (
    audit_decision,
    cell_error_bound,
    dedupe_latest,
    discrete_laplace_bound,
    fairness_gap,
    histogram_scale,
    laplace_release,
    min_sample_nonprivate,
    min_sample_private,
    privacy_loss,
    sample_size_ratio,
    score_distribution,
    score_histograms,
    survival_distribution,
)

# --- DESIGN §5, seed 000 §5.2 -------------------------------------------------------------


def test_seed_000_sample_sizes():
    assert min_sample_private(0.2, 2, 100, 0.05) == 1879
    assert min_sample_nonprivate(0.2, 2, 100, 0.05) == 450
    assert 1879 / 450 == pytest.approx(4.18, abs=0.005)
    assert sample_size_ratio(2, 100, 0.05) == pytest.approx(4.18, abs=0.005)  # the paper prints 4.17x
    sup = 4 * math.log(3) / math.log(2)
    assert sup == pytest.approx(6.34, abs=0.005)
    ratios = [sample_size_ratio(1, 1, d) for d in (0.5, 0.9, 0.99, 0.999999)]
    assert all(r < sup for r in ratios) and ratios == sorted(ratios)  # approached as |A||Y|/δ -> 1
    assert ratios[-1] == pytest.approx(sup, abs=1e-5)


def test_cli_sample_size():
    res = CliRunner().invoke(
        app, ["sample-size", "--alpha", "0.2", "--groups", "2", "--levels", "100", "--delta", "0.05"]
    )
    assert res.exit_code == 0 and "1879" in res.output and "450" in res.output


def test_opendp_discrete_laplace_scale_and_privacy_map():
    counts = np.array([[40, 10, 0], [5, 70, 25]])
    for eps in (0.5, 2.0):
        b = histogram_scale(eps, public_sizes=True)
        assert b == 2 / eps and privacy_loss(b, 2) == pytest.approx(eps)  # OpenDP's map: one changed score
        noise = laplace_release(np.tile(counts, (2000, 1)), b) - np.tile(counts, (2000, 1))
        assert noise.dtype == np.int64
        k = np.arange(-40, 41)
        pmf = np.exp(-np.abs(k) / b) * (1 - np.exp(-1 / b)) / (1 + np.exp(-1 / b))
        obs = np.array([(noise == x).sum() for x in k])
        keep = pmf * noise.size >= 5
        chi = stats.chisquare(obs[keep], pmf[keep] / pmf[keep].sum() * obs[keep].sum())
        assert chi.pvalue > 1e-4
    with pytest.raises(ValueError):
        laplace_release(counts, 0)


def test_discrete_laplace_tail_bound_is_tight():
    for b, p in ((2.0, 0.01), (9.0, 1e-4), (0.5, 0.05)):
        R = discrete_laplace_bound(b, p)

        def tail(k, b=b):  # P(|r| >= k), k >= 1
            return 2 * math.exp(-k / b) / (1 + math.exp(-1 / b))

        assert tail(R + 1) <= p and (R == 0 or tail(R) > p)


def test_histograms_use_declared_edges_only():
    edges = np.array([0.0, 0.5, 1.0])
    scores = np.array([-3.0, 0.2, 0.5, 0.99, 7.0, 0.3])
    groups = np.array(["a", "a", "a", "a", "a", "zz"])
    h = score_histograms(scores, groups, np.ones(6, bool), edges, ["a", "b"])
    assert h.tolist() == [[2, 3], [0, 0]]  # outer bins open-ended; undeclared group "zz" not counted


def test_dedupe_keeps_latest_row_per_item():
    rows = pl.DataFrame({"item_id": ["x", "y", "x", "x"], "ds": [1, 1, 2, 3], "score": [0.1, 0.2, 0.3, 0.4]})
    kept, dropped = dedupe_latest(rows)
    assert dropped == 2 and dict(zip(kept["item_id"], kept["score"], strict=True)) == {"x": 0.4, "y": 0.2}


def test_efg_without_noise_is_the_exact_gap():
    rng = np.random.default_rng(3)
    scores = rng.integers(1, 11, 5000).astype(float)
    groups = rng.choice(["a", "b", "c"], 5000)
    qualified = rng.random(5000) < 0.6
    edges = np.arange(0.5, 11.5, 1.0)
    counts = score_histograms(scores, groups, qualified, edges, ["a", "b", "c"])
    exact = {}
    for g in "abc":
        s = scores[(groups == g) & qualified]
        exact[g] = np.array([(s == y).mean() for y in range(1, 11)])
    gap = max(max(exact[g][y] for g in "abc") - min(exact[g][y] for g in "abc") for y in range(10))
    P = score_distribution(counts, counts.sum(axis=1))
    assert fairness_gap(P) == pytest.approx(gap, rel=1e-12)
    surv = survival_distribution(P)
    assert surv[:, 0] == pytest.approx([1, 1, 1]) and surv[0, 4] == pytest.approx(exact["a"][4:].sum())
    # eq. 4 divides by n_{a,q}, not by the noisy total: a negative noisy bin is kept, not clipped
    assert score_distribution(np.array([[-2, 12]]), np.array([10])).tolist() == [[-0.2, 1.2]]


def test_cell_error_bound_at_the_seed_sample_size():
    n = min_sample_private(0.2, 2, 100, 0.05)  # 1,879
    b = 1 / 0.11  # the seed's Lap(1/ε) with ε = 0.11 > α/2
    t = cell_error_bound(np.array([n, n + 500]), b, 100, 0.05)["t"]
    assert t <= 0.1  # ≤ α/2: FG ∈ [EFG − α, EFG + α] (DESIGN §4.6)
    assert audit_decision(0.25, t, 0.2)["fg_interval"][1] == pytest.approx(0.25 + 2 * t)
    small = cell_error_bound(np.array([100, 5000]), b, 100, 0.05)["t"]
    assert small > 0.2  # too few individuals: the interval is wide
    noisy = cell_error_bound(np.array([n, n]), b, 100, 0.05, size_scale=b)
    assert noisy["t"] > t and noisy["n_min"] < n  # noisy sizes cost width


def test_audit_decision_needs_margin():
    assert audit_decision(0.05, 0.04, 0.2)["decision"] == "fair"  # [0.0, 0.13] ≤ 0.2
    assert audit_decision(0.15, 0.04, 0.2)["decision"] == "inconclusive"  # [0.07, 0.23] straddles α
    assert audit_decision(0.3, 0.04, 0.2)["decision"] == "unfair"  # [0.22, 0.38] > α
    assert audit_decision(0.05, math.inf, 0.2)["fg_interval"] == [0.0, 1.0]


def _simulate(fg: float, n: int, eps: float, public: bool, reps: int, rng) -> np.ndarray:
    """Decisions of the release + rule over ``reps`` samples of two groups whose
    true score distributions over 5 bins differ by ``fg`` in two bins."""
    p0 = np.array([0.1, 0.45, 0.15, 0.15, 0.15])
    p1 = p0 + np.array([fg, -fg, 0, 0, 0])
    counts = np.stack([np.stack([rng.multinomial(n, p0), rng.multinomial(n, p1)]) for _ in range(reps)])
    noisy = laplace_release(counts, 2 / eps)
    sizes = np.full((reps, 2), n) if public else laplace_release(counts.sum(axis=2), 2 / eps)
    out = []
    for r in range(reps):
        P = score_distribution(noisy[r], sizes[r])
        t = cell_error_bound(sizes[r], 2 / eps, 5, 0.05, None if public else 2 / eps)["t"]
        out.append((audit_decision(fairness_gap(P), t, 0.2)["decision"], fairness_gap(P) <= 0.2))
    return np.array(out, dtype=object)


@pytest.mark.coverage
@pytest.mark.parametrize("public", [True, False])
def test_false_fair_rate_is_below_delta(public):
    rng = np.random.default_rng(11)
    bad = _simulate(0.205, 4000, 1.0, public, 400, rng)  # FG just above α = 0.2
    false_fair = np.mean(bad[:, 0] == "fair")
    assert false_fair <= 0.05
    assert np.mean(bad[:, 1].astype(bool)) > 2 * 0.05  # the naive EFG ≤ α rule says "fair" too often
    good = _simulate(0.05, 4000, 1.0, public, 100, rng)  # a fair estimator is recognised
    assert np.mean(good[:, 0] == "fair") > 0.9
    assert np.mean(_simulate(0.4, 4000, 1.0, public, 100, rng)[:, 0] == "unfair") > 0.9


def _max_log_ratio(x: np.ndarray, y: np.ndarray, min_count: int = 400) -> float:
    vals = np.union1d(x, y)
    hx = np.array([(x == v).sum() for v in vals])
    hy = np.array([(y == v).sum() for v in vals])
    ok = (hx >= min_count) & (hy >= min_count)
    return float(np.abs(np.log(hx[ok] / hy[ok])).max())


@pytest.mark.coverage
def test_empirical_privacy_loss_for_one_changed_score():
    """Neighbours differ in one individual's score (bin 0 -> bin 1 of group a),
    ε = 1, 20,000 releases each: the log ratio of the frequencies of a released
    count, and of the bin difference (post-processing of the joint release,
    whose loss is the full ε), stays within ε + 0.25. The seed's scale 1/ε
    (right for add/remove) breaks this for a changed score."""
    eps, N = 1.0, 20_000
    d1 = np.array([[30, 40], [25, 25]])
    d2 = d1 + np.array([[-1, 1], [0, 0]])
    for scale, ok in ((histogram_scale(eps, public_sizes=True), True), (1 / eps, False)):
        A = laplace_release(np.tile(d1, (N, 1, 1)), scale)
        B = laplace_release(np.tile(d2, (N, 1, 1)), scale)
        diff = _max_log_ratio(A[:, 0, 1] - A[:, 0, 0], B[:, 0, 1] - B[:, 0, 0])
        if ok:
            assert _max_log_ratio(A[:, 0, 0], B[:, 0, 0]) <= eps / 2 + 0.25
            assert diff <= eps + 0.25
            assert _max_log_ratio(A[:, 1, 1], B[:, 1, 1]) <= 0.25  # untouched bins: same distribution
        else:
            assert diff > eps + 0.25


# --- the release: declared, noised or computed from those -------------------------------


def _window(rng, n=3000, lo=0.0123457, hi=0.987653) -> pl.DataFrame:
    """A score window with a distinctive min and max score and 40 duplicated item_ids."""
    s = rng.uniform(0.2, 0.8, n)
    s[0], s[1] = lo, hi
    df = pl.DataFrame(
        {
            "item_id": [f"i{j}" for j in range(n)],
            "score": s,
            "outcome": rng.random(n) < 0.7,
            "attr__grp": rng.choice(["x", "y"], n),
        }
    )
    dup = df.head(40).with_columns(pl.lit(0.5).alias("score"))  # later rows of the same items
    return pl.concat([df, dup])


def _audit(**kw) -> AuditConfig:
    return AuditConfig(qualified_outcome=True, total_epsilon=10, bins=[0.0, 1.0, 10], **kw)


def _numbers(obj) -> list[float]:
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _numbers(v)]
    if isinstance(obj, list):
        return [x for v in obj for x in _numbers(v)]
    return [float(obj)] if isinstance(obj, int | float) and not isinstance(obj, bool) else []


# how each field of the release is obtained: declared (config or request), noised, or post-processing
DECLARED = {"privacy", "qualified_outcome", "score_bins", "bin_edges_declared", "groups", "group_sizes", "alpha"}
DECLARED |= {"delta", "required_n", "P_formula"}
NOISED = {"noisy_counts"}
DERIVED = {"P", "P_survival", "efg", "fg_interval", "cell_error_t", "decision", "n_min_for_bound"}
DERIVED |= {"seed_conditions_failed", "efg_reason"}


@pytest.mark.parametrize("public", [True, False])
def test_release_numbers_are_declared_noised_or_derived(public):
    rng = np.random.default_rng(5)
    rows = _window(rng)
    dedup = rows.unique("item_id", keep="last")
    q = dedup.filter(pl.col("outcome"))
    true_n = {g: q.filter(pl.col("attr__grp") == g).height for g in ("x", "y")}
    a = _audit(public_group_sizes={"grp": true_n}) if public else _audit(groups={"grp": ["x", "y"]})
    spent = []
    core, platform = private_release(a, rows, "grp", 1.0, survival=True, before_noise=lambda p, d: spent.append(p))
    assert platform["duplicate_rows_dropped"] == 40
    assert spent == ([[("bins", 1.0)]] if public else [[("bins", 0.5), ("sizes", 0.5)]])
    assert set(core) == DECLARED | NOISED | DERIVED | {"n_q"}  # a new field must be classified here
    if public:
        assert core["n_q"] == list(true_n.values())  # declared in config
    # no data-derived edge, min, max, row count or true bin count is published
    nums = set(_numbers(core))
    assert not nums & {0.0123457, 0.987653, rows.height, dedup.height, q.height}
    assert core["bin_edges_declared"] == [i / 10 for i in range(11)]
    # everything derived is recomputed from the noised and declared fields alone
    noisy, n_q = np.array(core["noisy_counts"]), np.array(core["n_q"])
    P = score_distribution(noisy, n_q)
    assert core["P"] == [[round(float(x), 6) for x in r] for r in P]
    bound = cell_error_bound(n_q, core["privacy"]["bins_scale"], 10, 0.05, core["privacy"]["sizes_scale"])
    assert core["efg"] == fairness_gap(P) and core["cell_error_t"] == bound["t"]
    assert core["fg_interval"] == audit_decision(fairness_gap(P), bound["t"], a.alpha)["fg_interval"]


def test_release_refuses_undeclared_bins_groups_and_wrong_public_sizes():
    rows = _window(np.random.default_rng(1), n=200)
    with pytest.raises(ConfigError, match="audit.score_values / audit.bins / audit.edges"):
        private_release(AuditConfig(groups={"grp": ["x"]}), rows, "grp", 1.0)
    with pytest.raises(ConfigError, match="audit.public_group_sizes.grp / audit.groups.grp"):
        private_release(_audit(), rows, "grp", 1.0)
    called = []
    with pytest.raises(ConfigError, match="do not match"):
        a = _audit(public_group_sizes={"grp": {"x": 1, "y": 1}})
        private_release(a, rows, "grp", 1.0, before_noise=lambda p, d: called.append(p))
    assert called == []  # nothing spent
    with pytest.raises(ValidationError, match="bins is now the declared"):
        AuditConfig(bins=0)
    with pytest.raises(ValidationError, match="one of"):
        AuditConfig(bins=[0, 1, 10], score_values=[1, 2])


@pytest.mark.usefixtures("prefect_harness")
def test_compas_audit_export_and_ledger(tmp_path):
    from conftest import REPO

    csv = REPO / "data" / "compas" / "compas_two_year.csv"
    # qualified = not re-arrested within two years, ProPublica rows: independent count, declared public
    raw = pl.read_csv(csv).filter(pl.col("propublica_filter") & (pl.col("two_year_recid") == 0))
    n_sex = {g: raw.filter(pl.col("sex") == g).height for g in ("Female", "Male")}
    races = sorted(raw.get_column("race").unique().to_list())
    cfg_path = tmp_path / "c.toml"
    cfg_path.write_text(
        f'warehouse = "wh"\nduckdb = "c.duckdb"\n[scores]\nformat = "compas"\npath = "{csv}"\n'
        'attributes = ["sex", "race"]\nwindow_days = 730\n[[scores.thresholds]]\nmodel = "compas"\n'
        "t = 5\nd = 3\n[audit]\ntotal_epsilon = 1.0\nqualified_outcome = false\nalpha = 0.3\n"
        "score_values = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n"
        f"public_group_sizes = {{ sex = {{ Female = {n_sex['Female']}, Male = {n_sex['Male']} }} }}\n"
        f"groups = {{ race = {json.dumps(races)} }}\n"
    )
    ds = dt.date(2014, 12, 31)
    daily(str(cfg_path), ds)
    cfg = load_config(cfg_path)
    r = export_release(cfg, ds, "sex", "compas", 0.6, out=tmp_path / "r.json")
    written = json.loads((tmp_path / "r.json").read_text())
    assert written["release_id"] == r["release_id"] and "platform_only" not in written
    assert r["groups"] == ["Female", "Male"] and r["score_bins"] == [str(k) for k in range(1, 11)]
    assert r["n_q"] == [n_sex["Female"], n_sex["Male"]] and r["group_sizes"] == "public (config)"
    assert r["required_n"] == min_sample_private(0.3, 2, 10, 0.05)
    assert r["decision"] in ("fair", "unfair", "inconclusive") and r["privacy"]["bins_scale"] == 2 / 0.6
    assert r["platform_only"]["duplicate_rows_dropped"] == 0
    # 0.6 + 0.6 > 1.0: the ledger refuses, and nothing is released
    with pytest.raises(BudgetExceeded, match="spent"):
        export_release(cfg, ds, "race", "compas", 0.6)
    res = CliRunner().invoke(
        app, ["audit-export", "-c", str(cfg_path), "--date", str(ds), "--attribute", "race", "--epsilon", "0.4"]
    )
    assert res.exit_code == 0 and "decision:" in res.output and "noisy" in res.output  # 0.6 + 0.4 = 1.0 fits
    res = CliRunner().invoke(
        app, ["audit-export", "-c", str(cfg_path), "--date", str(ds), "--attribute", "sex", "--epsilon", "0.01"]
    )
    assert res.exit_code == 3 and "refused" in res.output
    import duckdb

    with duckdb.connect(str(tmp_path / "c.duckdb"), read_only=True) as con:
        led = con.sql("SELECT release_id, epsilon FROM privacy_ledger ORDER BY released_at, release_id").fetchall()
    assert [e for _, e in led] == [0.6, 0.2, 0.2]  # public sizes: one row; noisy sizes: ε/2 + ε/2
    assert led[0][0].endswith(":bins") and led[2][0].endswith(":sizes")


@pytest.mark.parametrize(
    ("option", "value"), [("--alpha", "0"), ("--alpha", "nan"), ("--alpha", "-0.2"), ("--alpha", "5"), ("--delta", "0")]
)
def test_sample_size_refuses_levels_outside_the_unit_interval(option, value):
    """α and δ of seed 000 eqs. 6-8 lie in (0, 1): anything else (0 divided by, NaN, a negative α that
    squared gives +α's answer) is a usage error naming the option, exit 2, no traceback."""
    from typer.testing import CliRunner

    from fairmon.pipelines.faces.cli import app

    res = CliRunner().invoke(app, ["sample-size", option, value, "--json"])
    assert res.exit_code == 2, res.output
    assert option in res.stderr and "(0, 1)" in res.stderr and "Traceback" not in res.output
    with pytest.raises(ValueError, match=r"must be in \(0, 1\)"):
        min_sample_private(
            float(value) if option == "--alpha" else 0.2, 2, 100, float(value) if option == "--delta" else 0.05
        )


def test_decision_sample_size_is_the_first_n_whose_interval_lies_below_alpha():
    """fairmon's 'fair' needs EFG + 2t(n) ≤ α, t(n) = sqrt(ln(2k/(2δ/3))/(2n)) + R/n (public sizes, k = |A||Y|),
    R the discrete Laplace bound at δ/(3k) for b = 2/ε: Pr[|r| ≥ j] = 2e^{−j/b}/(1 + e^{−1/b}), written here
    from scratch. At α = 0.2, |A| = 2, |Y| = 100, δ = 0.05, ε = 1 an EFG of 0.15 needs 8,970 per group (an
    independent review's figure), against seed 000's 1,879."""
    import math

    from fairmon.transforms.private.release import decision_sample_size

    alpha, A, Y, delta, eps = 0.2, 2, 100, 0.05, 1.0
    k, b = A * Y, 2 / eps
    p = delta / 3 / k
    R = next(j for j in range(1, 10**6) if 2 * math.exp(-j / b) / (1 + math.exp(-1 / b)) <= p) - 1

    def t(n):
        return math.sqrt(math.log(2 * k / (2 * delta / 3)) / (2 * n)) + R / n

    for efg in (0.0, 0.05, 0.15):
        n = decision_sample_size(alpha, A, Y, delta, eps, efg)
        assert efg + 2 * t(n) <= alpha < efg + 2 * t(n - 1)
    assert decision_sample_size(alpha, A, Y, delta, eps, 0.15) == 8970
    assert decision_sample_size(alpha, A, Y, delta, eps, 0.2) is None


def test_cli_sample_size_prints_fairmons_decision_too():
    res = CliRunner().invoke(app, ["sample-size", "--alpha", "0.2", "--epsilon", "1", "--json"])
    doc = json.loads(res.stdout)
    assert doc["private"] == 1879 and {"efg": 0.15, "n": 8970} in doc["decision"]
    res = CliRunner().invoke(app, ["sample-size", "--epsilon", "0"])
    assert res.exit_code == 2 and "epsilon" in res.output


def test_efg_is_nan_with_a_reason_when_a_group_has_no_distribution_or_is_too_small_for_the_noise():
    """A 3-member group with noisy sizes published EFG 21.1 (a probability gap), and a group whose noisy
    size came out negative was left out of EFG silently (the gap over 2 of 3 declared groups)."""
    from fairmon.transforms.private.release import efg_reason, fairness_gap

    P = np.array([[0.2, 0.8], [0.5, 0.5], [np.nan, np.nan]])  # the third group's size was <= 0
    assert math.isnan(fairness_gap(P)) and "EFG is undefined" in efg_reason(P, 0.1)
    assert fairness_gap(P[:2]) == pytest.approx(0.3) and efg_reason(P[:2], 0.1) is None
    assert "too small for the noise" in efg_reason(P[:2], math.inf)
    undefined = audit_decision(float("nan"), 0.1, 0.2)
    assert (undefined["decision"], undefined["fg_interval"]) == ("inconclusive", [0.0, 1.0])
    rng = np.random.default_rng(1)
    rows = _window(rng)
    q = rows.filter(pl.col("outcome")).unique("item_id", keep="last")
    tiny = q.filter(pl.col("attr__grp") == "y").head(3).get_column("item_id")
    rows = rows.filter((pl.col("attr__grp") == "x") | pl.col("item_id").is_in(tiny.implode()))
    core, _ = private_release(_audit(groups={"grp": ["x", "y"]}), rows, "grp", 0.2)
    assert math.isnan(core["efg"]) and core["efg_reason"] and core["decision"] == "inconclusive"
    assert core["fg_interval"] == [0.0, 1.0]
