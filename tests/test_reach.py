"""Reachability of a biased MF recommender (seed 003 Def. 1; DESIGN §4.8): property tests."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fairmon.transforms.reach.reachability import affine_scores, fit_biased_mf, max_reachability, softmax_probabilities


@pytest.fixture(scope="module")
def model_and_user():
    rng = np.random.default_rng(0)
    U, I = 30, 40
    users = np.repeat(np.arange(U), 10)
    items = np.concatenate([rng.choice(I, 10, replace=False) for _ in range(U)])
    ratings = rng.integers(1, 6, size=users.size).astype(float)
    model = fit_biased_mf(users, items, ratings, n_users=U, n_items=I, rank=3, lam=1.0, iters=20)
    u = 3
    hist, hr = items[users == u], ratings[users == u]
    unseen = np.setdiff1d(np.arange(I), hist)
    pred = model.predict()[u]
    return model, hist, hr, unseen, pred


def _setup(model_and_user, k):
    model, hist, hr, unseen, pred = model_and_user
    acts = unseen[np.argsort(-pred[unseen])[:k]]
    targ = np.setdiff1d(unseen, acts)
    B, c = affine_scores(model, hist, hr, acts, targ)
    return model, hist, hr, acts, targ, B, c, pred


def test_affine_scores_equal_a_refit_from_scratch(model_and_user):
    """s_T(a) = B a + c equals the targets' scores after refitting the user's
    factor and bias by ridge on the edited history, for random actions."""
    model, hist, hr, acts, targ, B, c, _ = _setup(model_and_user, 4)
    rng = np.random.default_rng(1)
    F, b = model.item_factors, model.item_bias
    for _ in range(5):
        a = rng.uniform(1, 5, size=acts.size)
        ix = np.r_[hist, acts]
        Z = np.hstack([F[ix], np.ones((ix.size, 1))])
        y = np.r_[hr, a] - model.mu - b[ix]
        x = np.linalg.solve(Z.T @ Z + model.lam * np.eye(Z.shape[1]), Z.T @ y)
        s = model.mu + b[targ] + np.hstack([F[targ], np.ones((targ.size, 1))]) @ x
        np.testing.assert_allclose(B @ a + c, s, atol=1e-10)
    # with no action the refit of the own history gives back the model's predictions (ALS ends with a user step)
    B0, c0 = affine_scores(model, hist, hr, np.array([], dtype=int), targ)
    np.testing.assert_allclose(c0, model_and_user[4][targ], atol=1e-10)
    assert B0.shape == (targ.size, 0)


@pytest.mark.parametrize("k", [1, 2])
def test_optimum_equals_a_brute_force_grid(model_and_user, k):
    """For K = 1 and 2 actions ρ* matches the best point of a fine grid over the box
    (never below it, and above it by no more than the grid's resolution allows)."""
    *_, B, c, _ = _setup(model_and_user, k)
    rho, a = max_reachability(B, c, beta=2.0, lower=1.0, upper=5.0)
    g = np.linspace(1, 5, 401 if k == 1 else 161)
    grid = np.array(list(itertools.product(g, repeat=k)))
    best = softmax_probabilities(B, c, grid, 2.0).max(axis=0)
    assert (rho >= best - 1e-9).all()
    np.testing.assert_allclose(rho, best, rtol=2e-3, atol=1e-9)
    assert ((a >= 1.0) & (a <= 5.0)).all()


def test_properties(model_and_user):
    model, hist, hr, acts, targ, B, c, pred = _setup(model_and_user, 5)
    # ρ* ≤ 1, and ρ* ≥ ρ at the baseline action (the model's predictions, inside the box)
    base_a = np.clip(pred[acts], 1.0, 5.0)
    rho0 = softmax_probabilities(B, c, base_a, 3.0)
    rho, _ = max_reachability(B, c, beta=3.0, lower=1.0, upper=5.0)
    assert (rho <= 1 + 1e-12).all() and (rho >= rho0 - 1e-9).all()
    # β → 0: ρ = ρ* = 1/|T|
    tiny, _ = max_reachability(B, c, beta=1e-6, lower=1.0, upper=5.0)
    np.testing.assert_allclose(tiny, 1 / targ.size, rtol=1e-4)
    np.testing.assert_allclose(softmax_probabilities(B, c, base_a, 1e-6), 1 / targ.size, rtol=1e-4)
    zero, _ = max_reachability(B, c, beta=0.0, lower=1.0, upper=5.0)
    np.testing.assert_allclose(zero, 1 / targ.size)
    with pytest.raises(ValueError, match="empty action box"):
        max_reachability(B, c, beta=1.0, lower=5.0, upper=1.0)
    with pytest.raises(ValueError, match="action items"):
        affine_scores(model, hist, hr, acts, np.r_[targ, acts[:1]])


def test_fit_biased_mf_recovers_a_low_rank_matrix():
    """Fully observed rank-2 ratings plus biases: the fit predicts them to within the ridge's shrinkage."""
    rng = np.random.default_rng(3)
    U, I = 40, 30
    truth = 3 + rng.normal(scale=0.3, size=(U, 1)) + rng.normal(scale=0.3, size=(1, I))
    truth = truth + rng.normal(size=(U, 2)) @ rng.normal(size=(2, I)) * 0.5
    uu, ii = np.meshgrid(np.arange(U), np.arange(I), indexing="ij")
    m = fit_biased_mf(uu.ravel(), ii.ravel(), truth.ravel(), n_users=U, n_items=I, rank=2, lam=0.01, iters=50)
    assert np.abs(m.predict() - truth).max() < 0.05
    with pytest.raises(ValueError, match="lam"):
        fit_biased_mf(uu.ravel(), ii.ravel(), truth.ravel(), n_users=U, n_items=I, rank=2, lam=0)


def test_top1_reachable_matches_the_linear_program(model_and_user):
    """Each certificate agrees with the LP max t s.t. (B_i − B_j) a + c_i − c_j ≥ t solved directly."""
    from scipy.optimize import linprog

    from fairmon.transforms.reach.reachability import top1_reachable

    *_, B, c, _ = _setup(model_and_user, 3)
    got = top1_reachable(B, c, 1.0, 5.0)
    T, K = B.shape
    want = []
    for i in range(T):
        o = np.delete(np.arange(T), i)
        res = linprog(
            np.r_[np.zeros(K), -1.0],
            A_ub=np.hstack([-(B[i] - B[o]), np.ones((T - 1, 1))]),
            b_ub=c[i] - c[o],
            bounds=[(1.0, 5.0)] * K + [(None, None)],
            method="highs",
        )
        want.append(-res.fun >= -1e-12)
    np.testing.assert_array_equal(got, want)
    # certificates tried first from a softmax solution at another β change no answer
    _, a2 = max_reachability(B, c, beta=2.0, lower=1.0, upper=5.0)
    np.testing.assert_array_equal(top1_reachable(B, c, 1.0, 5.0, start=(2.0, a2)), want)
    assert 0 < got.sum() < T  # the case is informative: some targets reachable, some not
    # the deterministic answer is the β → ∞ limit: a reachable target's ρ* tends to 1, and an
    # unreachable one is always beaten by some j, so its ρ* < 1/2 at every β
    rho, _ = max_reachability(B, c, beta=200.0, lower=1.0, upper=5.0)
    assert (rho[got] > 0.9).all() and (rho[~got] < 0.5).all()
