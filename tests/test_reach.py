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
    from fairmon.transforms.reach.reachability import top1_reachable

    *_, B, c, _ = _setup(model_and_user, 3)
    got = top1_reachable(B, c, 1.0, 5.0)
    T = B.shape[0]
    want = _top1_by_lp(B, c)
    np.testing.assert_array_equal(got, want)
    # certificates tried first from a softmax solution at another β change no answer
    _, a2 = max_reachability(B, c, beta=2.0, lower=1.0, upper=5.0)
    np.testing.assert_array_equal(top1_reachable(B, c, 1.0, 5.0, start=(2.0, a2)), want)
    assert 0 < got.sum() < T  # the case is informative: some targets reachable, some not
    # the deterministic answer is the β → ∞ limit: a reachable target's ρ* tends to 1, and an
    # unreachable one is always beaten by some j, so its ρ* < 1/2 at every β
    rho, _ = max_reachability(B, c, beta=200.0, lower=1.0, upper=5.0)
    assert (rho[got] > 0.9).all() and (rho[~got] < 0.5).all()


def _scipy_reference(B, c, beta, lower, upper, i, starts):
    """min over the box of f_i(a) = LSE_j β s_j(a) − β s_i(a) by SciPy's L-BFGS-B with its analytic
    gradient β Bᵀ(π − e_i), from several starts, written out here independently of fairmon's solver."""
    from scipy.optimize import minimize
    from scipy.special import logsumexp, softmax

    def f(a):
        s = beta * (B @ a + c)
        return logsumexp(s) - s[i], beta * (softmax(s) - np.eye(len(c))[i]) @ B

    runs = [
        minimize(f, x0, jac=True, bounds=[(lower, upper)] * B.shape[1], method="L-BFGS-B",
                 options={"ftol": 1e-15, "gtol": 1e-13, "maxiter": 5000})
        for x0 in starts
    ]  # fmt: skip
    return min(r.fun for r in runs), f


@pytest.mark.parametrize("beta", [0.5, 1.0, 3.0, 10.0])
def test_max_reachability_agrees_with_scipy_and_satisfies_kkt(beta):
    """Random affine scores (|T| = 14, K = 4, box [1, 5]): fairmon's ρ* is never below SciPy's best of
    four starts and agrees with it to 1e-9 relatively, and its maximiser meets the box's KKT
    conditions (gradient ≥ 0 at the lower end, ≤ 0 at the upper end, ≈ 0 inside) with the gradient
    computed here from SciPy's softmax: for a convex f that certifies the optimum whatever the start.
    The default start (corner search) and the box's centre as x0 reach the same ρ*."""
    rng = np.random.default_rng(int(beta * 10))
    T, K, lo, hi = 14, 4, 1.0, 5.0
    B = rng.normal(scale=0.3, size=(T, K))
    c = rng.normal(scale=0.8, size=T)
    rho, a = max_reachability(B, c, beta, lo, hi)
    rho_c, _ = max_reachability(B, c, beta, lo, hi, x0=np.full((T, K), 3.0))
    np.testing.assert_allclose(rho, rho_c, rtol=1e-10)
    corners = 0
    for i in range(T):
        starts = [np.full(K, 3.0), np.full(K, lo), np.full(K, hi), rng.uniform(lo, hi, K)]
        best, f = _scipy_reference(B, c, beta, lo, hi, i, starts)
        assert rho[i] >= np.exp(-best) * (1 - 1e-12)
        np.testing.assert_allclose(rho[i], np.exp(-best), rtol=1e-9)
        value, g = f(a[i])
        np.testing.assert_allclose(rho[i], np.exp(-value), rtol=1e-12)
        at_lo, at_hi = a[i] == lo, a[i] == hi
        inside = ~at_lo & ~at_hi
        assert (g[at_lo] >= -1e-9).all() and (g[at_hi] <= 1e-9).all() and (np.abs(g[inside]) <= 1e-7).all()
        corners += not inside.any()
    if beta <= 1.0:
        assert corners > 0  # some optima are corners: the corner search's case is covered


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_top1_reachable_agrees_with_the_lp_on_random_problems(seed):
    """Random scores with a wide spread of c (most unreachable targets are beaten outright by one
    competitor, the closed-form "no"), a target duplicated (an exact tie: reachable when the original
    is) and a competitor that beats target 0 by exactly nothing at best: each answer equals the LP's."""
    from fairmon.transforms.reach.reachability import top1_reachable

    rng = np.random.default_rng(seed)
    T, K = 25, 3
    B = rng.normal(scale=0.2, size=(T, K))
    c = rng.normal(scale=1.5, size=T)
    B[5], c[5] = B[4], c[4]  # a duplicate of target 4
    # target 0 above every other item but 1, which at best ties it: c_0 − c_1 + Σ max(v_k, 5 v_k) = 0
    c[0] = c.max() + 5.0
    v = B[0] - B[1]
    c[1] = c[0] + np.maximum(v, 5 * v).sum()
    got = top1_reachable(B, c, 1.0, 5.0)
    want = _top1_by_lp(B, c)
    np.testing.assert_array_equal(got, want)
    assert got[4] == got[5] and got[0] and 0 < got.sum() < T


def _top1_by_lp(B: np.ndarray, c: np.ndarray) -> list[bool]:
    """Top-1 reachability of each target by scipy's LP (HiGHS), independently of fairmon: target i can be put
    on top iff max_{a ∈ [1, 5]^K, s} s subject to (B_i − B_o)·a + c_i − c_o ≥ s for every other o has s ≥ 0."""
    from scipy.optimize import linprog

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
    return want
