"""Seed 001 beyond REO (issue 15 item 3, DESIGN §4.4): stage-wise diagnosis
(App. I.4), RSP (App. H.1) and user-side precision (App. H.2)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl
import pytest

from fairmon.transforms.reo import estimate_reo, reo_of_utilities
from fairmon.transforms.stage_tables import precision_disparity, reo_stage_table, rsp_table, user_precision_table

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
