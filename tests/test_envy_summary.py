"""envy_summary (seed 004 §5.1 with Lemma 4's bounds) by hand and against a simulated system's truth."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import polars as pl
import pytest

from fairmon.transforms.envy.envy_summary import envy_summary
from fairmon.transforms.envy.envy_tables import envy_user_tables
from fairmon.transforms.registry import polars_schema
from fairmon.transforms.simulators import envy_world as se

DS, START = dt.date(2026, 1, 5), dt.date(2026, 1, 1)


def _users(rows: list[tuple]) -> pl.DataFrame:
    cols = ("mean_own", "lower_own", "upper_own", "best_donor_mean", "max_donor_lower", "max_donor_upper")
    frame = pl.DataFrame([dict(zip(cols, r)) for r in rows], schema=dict.fromkeys(cols, pl.Float64))
    return frame.with_columns(pl.lit(0.01).alias("delta_user"))


def test_envy_summary_by_hand():
    # u1: Δ̂ = 0.7 − 0.5 = 0.2, bounds max(0.62 − 0.6, 0) = 0.02 and 0.8 − 0.4 = 0.4
    # u2: Δ̂ = max(0.55 − 0.6, 0) = 0, bounds 0 and 0.65 − 0.5 = 0.15
    # u3: no own rows: counted, not measured
    # u4: Δ̂ = 0.2, bounds 0.44 − 0.35 = 0.09 and 0.55 − 0.25 = 0.3
    users = _users(
        [
            (0.5, 0.4, 0.6, 0.7, 0.62, 0.8),
            (0.6, 0.5, 0.7, 0.55, 0.45, 0.65),
            (None, None, None, 0.5, 0.4, 0.6),
            (0.3, 0.25, 0.35, 0.5, 0.44, 0.55),
        ]
    )
    row = envy_summary(users, DS, START, epsilon=0.1).row(0, named=True)
    assert (row["targets"], row["users_measured"]) == (4, 3)
    assert row["average_envy"] == pytest.approx(0.4 / 3, abs=1e-15)
    assert row["average_envy_lower"] == pytest.approx(0.11 / 3, abs=1e-15)
    assert row["average_envy_upper"] == pytest.approx(0.85 / 3, abs=1e-15)
    # Δ̂ > 0.1: u1, u4; lower > 0.1: none; upper > 0.1: all three
    assert (row["share_envious"], row["share_envious_lower"], row["share_envious_upper"]) == (2 / 3, 0.0, 1.0)
    assert row["confidence"] == pytest.approx(0.96) and row["reason"].startswith("1 of 4 targets")
    assert (
        envy_summary(users.filter(pl.col("mean_own").is_not_null()), DS, START, epsilon=0.1)["reason"].is_null().all()
    )
    empty = envy_summary(_users([(None,) * 6]), DS, START, epsilon=0.1).row(0, named=True)
    assert empty["users_measured"] == 0 and math.isnan(empty["average_envy"]) and "no target" in empty["reason"]
    assert envy_summary(_users([]), DS, START, epsilon=0.1).schema == polars_schema("envy_summary")
    with pytest.raises(ValueError, match="epsilon"):
        envy_summary(users, DS, START, epsilon=-0.1)


@pytest.mark.parametrize("scenario", ["envious", "envy-free"])
def test_envy_summary_bounds_hold_the_simulated_truth_on_every_day(scenario):
    """AUDIT's targets and donors on a simulated system (exact utilities u^m(π^n)), logs accumulated for
    6 days (300 own rows, 100 per donor a day): every day the bounds hold the targets' average envy and
    ε-envious share over their donors, computed from the exact utilities; the plug-in ends near them."""
    rng = np.random.default_rng(7)
    system = se.build_system(se.EnvySpec(scenario, seed=2))
    targets, donors = se.audit_design(system, delta=0.05, lam=0.1, gamma=0.3, rng=rng)
    mu = system.utility[targets[:, None], donors]
    envy = np.maximum(mu.max(axis=1) - np.diag(system.utility)[targets], 0)  # over each target's donors
    for day, counts in enumerate(se.audit_counts(system, targets, donors, 6, 300, 100, rng)):
        users, _ = envy_user_tables(counts, DS, START, epsilon=0.1, delta=0.05, lam=0.1, gamma=0.3)
        r = envy_summary(users, DS, START, epsilon=0.1).row(0, named=True)
        assert r["average_envy_lower"] <= envy.mean() <= r["average_envy_upper"], (day, r)
        assert r["share_envious_lower"] <= (envy > 0.1).mean() <= r["share_envious_upper"], (day, r)
    assert r["average_envy"] == pytest.approx(envy.mean(), abs=0.02)


def test_the_report_says_the_degree_of_envy_of_the_latest_day():
    from fairmon.pipelines.report.report_data import envy_degree

    users = _users([(0.5, 0.4, 0.6, 0.7, 0.62, 0.8), (0.6, 0.5, 0.7, 0.55, 0.45, 0.65)])
    row = envy_summary(users, DS, START, epsilon=0.1).row(0, named=True)
    assert envy_degree(row).startswith(
        "Degree of envy among the 2 measured target users (seed 004 §5.1): average envy 0.100 (bounds [0.010, "
        "0.275]), 50 % envious beyond ε = 0.10 (bounds [0 %, 100 %]); the bounds hold together with probability "
        "0.980."
    )
    none = envy_summary(_users([]), DS, START, epsilon=0.1).row(0, named=True)
    assert envy_degree(none) == f"Degree of envy: not measured yet ({none['reason']})."


def test_a_report_of_envy_days_published_before_envy_summary_existed_has_no_degree_sentence():
    from fairmon.pipelines.report.report_data import envy_findings

    audit = pl.DataFrame(
        [
            {
                "ds": DS, "window_start": START, "M_tilde": 21, "K": 11, "targets": 21, "min_donors": 11,
                "design_ok": True, "design_reason": "ok", "n_envy": 0, "n_eps_no_envy": 0, "n_undecided": 21,
                "epsilon": 0.1, "delta": 0.05, "lambda_share": 0.2, "gamma_share": 0.3, "verdict": "undecided",
            }
        ]
    )  # fmt: skip
    lines = envy_findings(audit, pl.DataFrame(), pl.DataFrame())  # read_table of a table with no partition
    assert len(lines) == 1 and lines[0].startswith(f"Envy-freeness on {DS}: undecided so far")
    summary = envy_summary(_users([(0.5, 0.4, 0.6, 0.7, 0.62, 0.8)]), DS, START, epsilon=0.1)
    assert envy_findings(audit, pl.DataFrame(), summary)[1].startswith("Degree of envy among the 1 measured")
