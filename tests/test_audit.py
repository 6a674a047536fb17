"""External audits with differential privacy (seed 000) and traffic planning (seed 001 App. E)."""

import datetime as dt
import json
import math

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from fairmon.pipelines.audit import BudgetExceeded, export_release
from fairmon.pipelines.config import load_config
from fairmon.pipelines.faces.cli import app
from fairmon.pipelines.flows import daily
from fairmon.transforms.audit import (
    audit_decision,
    fairness_gap,
    laplace_release,
    min_sample_nonprivate,
    min_sample_private,
    sample_size_ratio,
    score_distribution,
    score_histograms,
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


def test_laplace_noise_has_the_configured_scale():
    rng = np.random.default_rng(0)
    counts = np.array([[40, 10, 0], [5, 70, 25]])
    for eps in (0.2, 1.0):
        noise = np.concatenate([(laplace_release(counts, eps, rng) - counts).ravel() for _ in range(2000)])
        assert stats.kstest(noise, "laplace", args=(0, 1 / eps)).pvalue > 0.001
        assert stats.kstest(noise, "laplace", args=(0, 2 / eps)).pvalue < 1e-6  # a wrong scale is rejected
    with pytest.raises(ValueError):
        laplace_release(counts, 0, rng)


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
    assert fairness_gap(score_distribution(counts)) == pytest.approx(gap, rel=1e-12)
    surv = score_distribution(counts, survival=True)
    assert surv[:, 0] == pytest.approx([1, 1, 1]) and surv[0, 4] == pytest.approx(exact["a"][4:].sum())


def test_audit_decision_conditions():
    ok = audit_decision(0.05, 5000, 0.2, 0.05, 0.5, 2, 10)
    assert ok["decision"] == "fair" and ok["conditions_failed"] == []
    assert audit_decision(0.3, 5000, 0.2, 0.05, 0.5, 2, 10)["decision"] == "unfair"
    small = audit_decision(0.05, 100, 0.2, 0.05, 0.5, 2, 10)
    assert small["decision"] == "inconclusive" and "needs" in small["conditions_failed"][0]
    assert audit_decision(0.05, 5000, 0.2, 0.05, 0.05, 2, 10)["decision"] == "inconclusive"  # ε <= α/2


# --- COMPAS end to end with the privacy ledger -----------------------------------------


@pytest.mark.usefixtures("prefect_harness")
def test_compas_audit_export_and_ledger(tmp_path):
    from conftest import REPO

    csv = REPO / "data" / "compas" / "compas_two_year.csv"
    cfg_path = tmp_path / "c.toml"
    cfg_path.write_text(
        f'warehouse = "wh"\nduckdb = "c.duckdb"\n[scores]\nformat = "compas"\npath = "{csv}"\n'
        'attributes = ["sex", "race"]\nwindow_days = 730\n[[scores.thresholds]]\nmodel = "compas"\n'
        "t = 5\nd = 3\n[audit]\ntotal_epsilon = 1.0\nqualified_outcome = false\nalpha = 0.3\n"
    )
    ds = dt.date(2014, 12, 31)
    daily(str(cfg_path), ds)
    cfg = load_config(cfg_path)
    r = export_release(cfg, ds, "sex", "compas", 0.6, out=tmp_path / "r.json", rng=np.random.default_rng(1))
    assert json.loads((tmp_path / "r.json").read_text())["release_id"] == r["release_id"]
    assert r["groups"] == ["Female", "Male"] and len(r["bin_edges"]) == 11  # deciles 1..10
    # qualified = not re-arrested within two years, ProPublica rows: independent count
    import polars as pl

    raw = pl.read_csv(csv).filter(pl.col("propublica_filter") & (pl.col("two_year_recid") == 0))
    assert r["min_group_n"] == raw.filter(pl.col("sex") == "Female").height
    assert r["required_n"] == min_sample_private(0.3, 2, 10, 0.05)
    assert r["decision"] in ("fair", "unfair") and r["conditions_failed"] == []
    # 0.6 + 0.6 > 1.0: the ledger refuses, and nothing is released
    with pytest.raises(BudgetExceeded, match="spent"):
        export_release(cfg, ds, "race", "compas", 0.6)
    res = CliRunner().invoke(
        app, ["audit-export", "-c", str(cfg_path), "--date", str(ds), "--attribute", "race", "--epsilon", "0.4"]
    )
    assert res.exit_code == 0 and "decision:" in res.output  # 0.6 + 0.4 = 1.0 fits exactly
    res = CliRunner().invoke(
        app, ["audit-export", "-c", str(cfg_path), "--date", str(ds), "--attribute", "sex", "--epsilon", "0.01"]
    )
    assert res.exit_code == 3 and "refused" in res.output
