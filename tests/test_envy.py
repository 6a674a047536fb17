"""Envy-freeness estimators (seed 004; DESIGN §4.7, §5)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from fairmon.transforms.envy import certify as envy


def test_table2_utilities():
    """Seed 004 App. A, Table 2: both users envy each other (DESIGN §5)."""
    rho = np.array([[1, 0, 0.8, 0.7], [0.8, 0.7, 1, 0]])
    pi = np.array([[0.4, 0, 0.6, 0], [0.6, 0, 0.4, 0]])
    u = envy.utilities(rho, pi)
    np.testing.assert_allclose(u, [[0.88, 0.92], [0.92, 0.88]], atol=1e-12)
    with pytest.raises(ValueError, match="sum to 1"):
        envy.utilities(rho, pi * 2)


def test_lemma4_beta_by_hand():
    """β of Lemma 4 at ω = 0.01, δ = 0.05, K + 1 = 10 arms, worked by hand:
    θ = ln(1.01)·(0.0005/4.02)^(1/1.01) = 1.35284e-6; β(1) = sqrt(0.5·1.21·1.01 ·
    ln(20/θ · ln 1.01)) = sqrt(0.61105 · 11.899) = 2.6964."""
    b = envy.lil_beta(np.array([1, 10, 100, 1000]), 10, 0.05)
    np.testing.assert_allclose(b, [2.69644, 1.02957, 0.33200, 0.10616], atol=5e-5)
    # N = 0: larger than at N = 1, so β decreases in N; monotone afterwards
    b0 = envy.lil_beta(0, 10, 0.05)
    assert b0 > b[0]
    assert np.all(np.diff(envy.lil_beta(np.arange(0, 5000), 10, 0.05)) < 0)
    # more arms or a smaller δ widen the bound
    assert envy.lil_beta(100, 20, 0.05) > b[2] and envy.lil_beta(100, 10, 0.01) > b[2]


def test_freedman_phi_by_hand():
    """|A| = 100, δ = 0.05: L = ln(6·100²/0.05) = 13.998; φ = 0.5·sqrt(200 L) + 2L/3 = 26.455 + 9.332 = 35.787."""
    assert envy.freedman_phi(100, 0.05) == pytest.approx(35.787, abs=1e-3)
    assert envy.freedman_phi(0, 0.05) == 0.0


def test_audit_sizes():
    """M̃ = ⌈ln(3/0.05)/0.1⌉ = ⌈40.94⌉ = 41; K = ⌈ln(3·41/0.05)/ln(1/0.9)⌉ = ⌈74.11⌉ = 75."""
    assert envy.audit_sizes(0.05, 0.1, 0.1) == (41, 75)
    with pytest.raises(ValueError, match="lambda"):
        envy.audit_sizes(0.05, 0, 0.1)


def test_bandit_problems_match_design():
    np.testing.assert_allclose(envy.bandit_problem("P1"), [0.6] + [0.3] * 9)
    np.testing.assert_allclose(envy.bandit_problem("P2"), [0.3, 0.6] + [0.3] * 8)
    p3 = envy.bandit_problem("P3")
    assert p3[0] == 0.7 and p3[1] == pytest.approx(0.7 - 0.7 * 0.1**0.6)
    p4 = envy.bandit_problem("P4")
    assert p4[0] == p3[1] and p4[1] == p3[0]


TRUTH = {"P1": "eps_no_envy", "P2": "envy", "P3": "eps_no_envy", "P4": "envy"}


@pytest.mark.coverage
@pytest.mark.parametrize("problem", ["P1", "P2", "P3", "P4"])
def test_ocef_online_on_the_seed_problems(problem):
    """100 runs each (δ = ε = 0.05, α = 0.3): wrong answers and violations of the
    conservative constraint (3) with the true means at most δ; P2's cost negative."""
    mu = envy.bandit_problem(problem)
    r = envy.ocef_online(mu, delta=0.05, alpha=0.3, epsilon=0.05, runs=100, rng=np.random.default_rng(7))
    wrong = np.mean(r["decision"] != TRUTH[problem])
    assert wrong <= 0.05
    assert r["violated"].mean() <= 0.05
    assert (r["duration"] < 200_000).all()
    if problem == "P2":
        assert r["cost"].mean() < 0
    else:
        assert r["cost"].mean() > 0


@pytest.mark.coverage
@pytest.mark.parametrize("problem", ["P2", "P3", "P4"])
def test_duration_is_minimal_at_an_interior_alpha(problem):
    """Seed 004 Fig. 3: for P2–P4 the mean duration over 100 runs is smaller at
    α = 0.3 than at the very conservative α = 0.05 and at α = 1."""
    mu = envy.bandit_problem(problem)
    d = {
        a: envy.ocef_online(mu, delta=0.05, alpha=a, epsilon=0.05, runs=100, rng=np.random.default_rng(3))[
            "duration"
        ].mean()
        for a in (0.05, 0.3, 1.0)
    }
    assert d[0.3] < d[0.05] and d[0.3] < d[1.0], d


@pytest.mark.coverage
def test_conservative_constraint_binds():
    """With α small the constraint holds on every run while an unconstrained
    (α = 1) run explores freely and falls below (1 − 0.05)μ_0 on P1."""
    mu = envy.bandit_problem("P1")
    tight = envy.ocef_online(mu, delta=0.05, alpha=0.05, epsilon=0.05, runs=50, rng=np.random.default_rng(1))
    free = envy.ocef_online(mu, delta=0.05, alpha=1.0, epsilon=0.05, runs=50, rng=np.random.default_rng(1))
    assert not tight["violated"].any()
    # cost per round: the free run gives up far more of μ_0 while it explores
    assert (free["cost"] / free["duration"]).mean() > 0.05 * 0.6 > (tight["cost"] / tight["duration"]).mean()


def _counts(rows):
    """(user, arm k, n, sum) rows -> counts with donor = None for k = 0, else "d<k>"."""
    return pl.DataFrame(
        [(u, None if k == 0 else f"d{k}", n, s) for u, k, n, s in rows],
        schema={"user_id": pl.String, "donor": pl.String, "n": pl.Int64, "reward_sum": pl.Int64},
        orient="row",
    )


def test_ocef_decisions_by_hand():
    """Three users with 10 arms' worth of union bound (own + 9 donors would be
    10; here own + 1 donor = 2 arms): β(N = 10,000, 2 arms, δ = 0.05)."""
    b = float(envy.lil_beta(10_000, 2, 0.05))
    counts = _counts(
        [
            ("a", 0, 10_000, 5_000),  # own 0.5, donor 0.7: envy
            ("a", 1, 10_000, 7_000),
            ("b", 0, 10_000, 7_000),  # own 0.7, donor 0.5: no envy at ε = 0.05
            ("b", 1, 10_000, 5_000),
            ("c", 0, 10_000, 5_000),  # equal: undecided at ε = 0.01 < 2β
            ("c", 1, 10_000, 5_000),
            ("d", 1, 10, 5),  # no own rows
        ]
    )
    out = envy.ocef_decisions(counts, delta=0.05, epsilon=0.05)
    got = dict(zip(out["user_id"], out["decision"], strict=True))
    assert got == {"a": "envy", "b": "eps_no_envy", "c": "undecided", "d": "undecided"}
    a = out.filter(pl.col("user_id") == "a").row(0, named=True)
    assert a["upper_own"] == pytest.approx(0.5 + b) and a["max_donor_lower"] == pytest.approx(0.7 - b)
    assert "own policy" in out.filter(pl.col("user_id") == "d")["reason"][0]
    # c with ε = 2β + a hair is certified: upper_d = 0.5 + β <= lower_own + ε = 0.5 - β + ε
    c2 = envy.ocef_decisions(counts.filter(pl.col("user_id") == "c"), delta=0.05, epsilon=2 * b + 1e-9)
    assert c2["decision"][0] == "eps_no_envy"
    with pytest.raises(ValueError, match="reward_sum"):
        envy.ocef_decisions(_counts([("x", 0, 3, 4)]), delta=0.05, epsilon=0.05)


def test_ocef_decisions_are_never_wrong_on_simulated_users():
    """2,000 users, 5 donors each, true means known: every decision is correct
    (the bounds hold for all users at δ' = δ/(3M); a wrong one would be a bug)."""
    rng = np.random.default_rng(11)
    M, K, n = 2000, 5, 4000
    mu = rng.uniform(0.2, 0.8, size=(M, K + 1))
    mu[: M // 2, 1:] = np.minimum(mu[: M // 2, 1:], mu[: M // 2, [0]] - 0.1).clip(0)  # half clearly envy-free
    pulls = rng.binomial(n, mu)
    rows = [(f"u{m}", k, n, int(pulls[m, k])) for m in range(M) for k in range(K + 1)]
    out = envy.ocef_decisions(_counts(rows), delta=0.05 / (3 * M), epsilon=0.05)
    truth_envy = mu[:, 1:].max(axis=1) > mu[:, 0]
    truth_free = mu[:, 1:].max(axis=1) <= mu[:, 0] + 0.05
    idx = np.array([int(u[1:]) for u in out["user_id"]])
    dec = out["decision"].to_numpy()
    assert not (dec == "envy")[~truth_envy[idx]].any()
    assert not (dec == "eps_no_envy")[~truth_free[idx]].any()
    # and the audit decides most users at this depth
    assert (dec != "undecided").mean() > 0.5


def test_audit_verdict():
    users = pl.DataFrame(
        {"user_id": [f"u{i}" for i in range(41)], "n_donors": [75] * 41, "decision": ["eps_no_envy"] * 41}
    )
    v = envy.audit_verdict(users, delta=0.05, lam=0.1, gamma=0.1)
    assert v["verdict"] == "envy_free" and v["design_ok"] and (v["M_tilde"], v["K"]) == (41, 75)
    few = envy.audit_verdict(users.head(40), delta=0.05, lam=0.1, gamma=0.1)
    assert few["verdict"] == "undecided" and not few["design_ok"] and "needs 41" in few["design_reason"]
    thin = envy.audit_verdict(users.with_columns(pl.lit(74).alias("n_donors")), delta=0.05, lam=0.1, gamma=0.1)
    assert thin["verdict"] == "undecided" and "needs 75" in thin["design_reason"]
    one = envy.audit_verdict(
        users.head(3).with_columns(pl.Series("decision", ["envy", "undecided", "eps_no_envy"])),
        delta=0.05,
        lam=0.1,
        gamma=0.1,
    )
    assert one["verdict"] == "not_envy_free" and one["n_envy"] == 1


# --- the simulated recommender (transforms/simulators/envy_world.py) ---

from fairmon.transforms.simulators import envy_world as se  # noqa: E402


def test_scenarios_have_the_truth_they_claim():
    """envy-free: nobody gains from another user's policy (Δ < 0.001); envious:
    over a fifth of the users are (0.1, 0.3)-envious (measurement bias of the minority)."""
    free = se.build_system(se.EnvySpec("envy-free"))
    envious = se.build_system(se.EnvySpec("envious"))
    assert free.envy.max() < 1e-3 and free.envious_share(0.1, 0.3) == 0.0
    assert envious.envious_share(0.1, 0.3) > 0.2
    # the envious users are the minority, served by policies that know nothing of them
    assert (envious.envy[envious.group == "1"] > 0.1).mean() > 0.5
    assert (envious.envy[envious.group == "0"] > 0.1).mean() < 0.05


def test_rows_reward_like_the_exact_utilities():
    """Logged rows draw the item from the serving policy and the reward from the
    target's preference: per (target, policy) the mean reward of 20,000 rows is
    u^m(π^n) within 4 standard errors."""
    system = se.build_system(se.EnvySpec("envious", seed=2))
    targets, donors = np.array([0, 1, 2]), np.array([[5, 6], [7, 8], [9, 10]])
    rows = se.simulate_envy_day(
        system,
        ds=__import__("datetime").date(2026, 1, 1),
        targets=targets,
        donors=donors,
        pulls_own=20_000,
        pulls_per_donor=20_000,
        rng=np.random.default_rng(0),
    )
    got = rows.group_by("user_id", "policy_user_id").agg(pl.col("like").mean(), pl.len())
    for r in got.iter_rows(named=True):
        m = int(r["user_id"][1:])
        n = m if r["policy_user_id"] is None else int(r["policy_user_id"][1:])
        u = system.utility[m, n]
        assert abs(r["like"] - u) < 4 * math.sqrt(u * (1 - u) / r["len"]) + 1e-9
    assert set(rows["traffic"]) == {"default", "swap"}
    assert rows.filter(pl.col("traffic") == "swap")["policy_user_id"].null_count() == 0


@pytest.mark.coverage
@pytest.mark.parametrize("scenario", ["envious", "envy-free"])
def test_daily_audit_reaches_the_truth_and_never_the_wrong_one(scenario):
    """20 seeds × 14 days at δ = 0.05, λ = 0.1, γ = 0.3, ε = 0.1: every run
    ends with the true verdict, no day ever gives the wrong one, and no user's
    decision contradicts the exact utilities."""
    want = "not_envy_free" if scenario == "envious" else "envy_free"
    wrong = "envy_free" if scenario == "envious" else "not_envy_free"
    for seed in range(20):
        system = se.build_system(se.EnvySpec(scenario, seed=seed))
        days = se.simulate_audit(
            system,
            days=14,
            delta=0.05,
            lam=0.1,
            gamma=0.3,
            epsilon=0.1,
            pulls_own=2000,
            pulls_per_donor=500,
            rng=np.random.default_rng(100 + seed),
        )
        assert days[-1]["verdict"] == want, (seed, days[-1])
        assert all(d["verdict"] != wrong and d["wrong_users"] == 0 for d in days)
        assert days[-1]["design_ok"]


@pytest.mark.coverage
@pytest.mark.parametrize("scenario", ["envious", "envy-free"])
def test_online_audit_with_conservative_exploration(scenario):
    """AUDIT run interactively (OCEF per target at δ/(3M̃), α = 0.1) on the
    simulated systems, 2 seeds: the true verdict, no user decided wrongly, the
    conservative constraint (3) never broken."""
    want = "not_envy_free" if scenario == "envious" else "envy_free"
    for seed in range(2):
        r = se.online_audit(
            se.build_system(se.EnvySpec(scenario, seed=seed)),
            delta=0.05,
            alpha=0.1,
            lam=0.2,
            gamma=0.3,
            epsilon=0.1,
            rng=np.random.default_rng(seed),
        )
        assert r["verdict"] == want and r["wrong_users"] == 0 and not r["violated"].any()
        assert len(r["decision"]) == 21 and (r["duration"] < 200_000).all()
