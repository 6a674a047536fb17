"""Benchmark: the reachability audit's solver (issue 17; seed 003, DESIGN §4.8).

Two snapshots, each printing its figures:

1. Coat: the biased MF of ``fairmon train-snapshot`` (rank and ridge chosen
   on Coat's random-exposure ratings; 290 users × 300 items, 24 ratings per
   user), K = 10 actions, β = 1: every (user, target) problem, ~77,000.
2. A synthetic snapshot ``--scale`` (default 10) times Coat's users with the
   same items, ratings per user and rank: ``--scale`` × the problems.

For each: seconds and problems/s of ρ* alone (batched projected Newton,
``max_reachability``), of exact top-1 reachability given those solutions
(``top1_reachable`` with ``start``, as the pipeline runs it: certificates
from them, then sharper softmax solves, then the LPs they leave), and of the
whole ``reach_problems``
(baseline, ρ*, top-1; what the daily stage runs), plus how many top-1
problems needed an LP. A sample of ρ* is checked against SciPy's L-BFGS-B
from three starts: the worst relative shortfall is printed (≤ 1e-6 expected).

Last line: problems/s of ``reach_problems`` on the larger snapshot.

    python bench/reachability.py [--scale 10]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fairmon.resources import data_dir
from fairmon.transforms.reach.reach_tables import Ratings, action_and_targets, reach_problems
from fairmon.transforms.reach.reachability import affine_scores, fit_biased_mf, max_reachability, top1_reachable

BETA, BUDGET = 1.0, 10


def coat_model(rank: int = 16, lam: float = 10.0):
    """Coat's snapshot as `fairmon train-snapshot` chooses it (rank 16, λ = 10)."""
    train = np.loadtxt(data_dir("coat") / "train.ascii")
    u, i = np.nonzero(train)
    m = fit_biased_mf(u, i, train[u, i], n_users=train.shape[0], n_items=train.shape[1], rank=rank, lam=lam)
    return m, Ratings(u, i, train[u, i])


def synthetic_model(scale: int, rank: int = 16, seed: int = 0):
    """``scale`` × 290 users, 300 items, 24 ratings per user from a rank-4 truth plus noise, rounded to 1..5."""
    rng = np.random.default_rng(seed)
    n_users, n_items = 290 * scale, 300
    P, Q = rng.normal(size=(n_users, 4)), rng.normal(size=(n_items, 4))
    u = np.repeat(np.arange(n_users), 24)
    i = np.concatenate([rng.choice(n_items, 24, replace=False) for _ in range(n_users)])
    r = np.clip(np.round(3 + 0.6 * (P[u] * Q[i]).sum(axis=1) + rng.normal(scale=0.8, size=u.size)), 1, 5)
    m = fit_biased_mf(u, i, r, n_users=n_users, n_items=n_items, rank=rank, lam=10.0)
    return m, Ratings(u, i, r)


def per_user(model, hist):
    pred = model.predict()
    for u in range(pred.shape[0]):
        h, hr = hist.of_user(u)
        acts, targ = action_and_targets(pred[u], h, BUDGET)
        yield affine_scores(model, h, hr, acts, targ)


def lbfgs_shortfall(model, hist, users: int = 5, targets: int = 6) -> float:
    from scipy.optimize import minimize
    from scipy.special import logsumexp

    worst = 0.0
    rng = np.random.default_rng(0)
    for k, (B, c) in enumerate(per_user(model, hist)):
        if k >= users:
            break
        rho, _ = max_reachability(B, c, BETA, 1.0, 5.0)
        for t in rng.choice(len(c), targets, replace=False):

            def f(a, t=t, B=B, c=c):
                return logsumexp(BETA * (B @ a + c)) - BETA * (B[t] @ a + c[t])

            best = min(
                minimize(f, np.full(B.shape[1], x0), bounds=[(1, 5)] * B.shape[1], method="L-BFGS-B").fun
                for x0 in (1.0, 3.0, 5.0)
            )
            worst = max(worst, (np.exp(-best) - rho[t]) / np.exp(-best))
    return worst


def run(name: str, model, hist) -> float:
    print(f"\n== {name}: {model.user_factors.shape[0]} users × {model.item_factors.shape[0]} items, "
          f"rank {model.user_factors.shape[1]}, K = {BUDGET}, β = {BETA}")  # fmt: skip
    problems = [(B, c) for B, c in per_user(model, hist)]
    n = sum(len(c) for _, c in problems)
    t = time.perf_counter()
    solutions = [max_reachability(B, c, BETA, 1.0, 5.0)[1] for B, c in problems]
    t_max = time.perf_counter() - t
    lp_calls = [0]
    t = time.perf_counter()
    from scipy import optimize

    orig = optimize.linprog

    def counting(*a, **k):
        lp_calls[0] += 1
        return orig(*a, **k)

    optimize.linprog = counting
    try:
        for (B, c), a in zip(problems, solutions, strict=True):
            top1_reachable(B, c, 1.0, 5.0, start=(BETA, a))
    finally:
        optimize.linprog = orig
    t_top1 = time.perf_counter() - t
    t = time.perf_counter()
    reach_problems(model, hist, beta=BETA, budget=BUDGET, r_min=1.0, r_max=5.0)
    t_all = time.perf_counter() - t
    print(f"problems: {n:,}")
    print(f"rho* (max_reachability):      {t_max:7.1f} s  {n / t_max:9,.0f} problems/s")
    print(f"top-1 given the rho* solutions: {t_top1:5.1f} s  {n / t_top1:9,.0f} problems/s  ({lp_calls[0]} LPs)")
    print(f"reach_problems (all of it):   {t_all:7.1f} s  {n / t_all:9,.0f} problems/s")
    print(f"worst relative shortfall of rho* vs L-BFGS-B (30 problems): {lbfgs_shortfall(model, hist):.2e}")
    return n / t_all


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=10)
    args = ap.parse_args()
    run("Coat", *coat_model())
    rate = run(f"synthetic, {args.scale}× Coat's users", *synthetic_model(args.scale))
    print(f"\nreach_problems problems/s at {args.scale}× Coat: {rate:,.0f}")


if __name__ == "__main__":
    main()
