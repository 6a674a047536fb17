"""Benchmark: the envy-freeness audit (issue 16; seed 004, DESIGN §4.7).

Three parts, each printing its figures:

1. OCEF as the interactive loop (transforms/envy.py ``ocef_online``) on the
   seed's bandit problems P1–P4 (App. D.1; δ = ε = 0.05) over ``--runs``
   runs at several conservative-exploration levels α: mean duration, mean
   cost, the share of wrong answers and of runs that broke the conservative
   constraint (3) with the true means (each should be ≤ δ), and the α at
   which the duration is smallest (seed 004 Fig. 3: interior for P2–P4).
2. AUDIT day by day on the two simulated systems (transforms/simulate_envy.py;
   δ = 0.05, λ = 0.1, γ = 0.3, ε = 0.1, 2,000 own rows and 500 rows per
   donor per target and day) over ``--seeds`` seeds: the share of runs
   decided within the days, the median day of the (first) decision, and the
   share of runs with a wrong verdict on any day.
3. Per-user certificates at scale: ``--users`` users with 1 own arm and 5
   donors, 8 logged rows per arm, generated and counted per user × arm in
   DuckDB (one GROUP BY), then decided by ``ocef_decisions`` (vectorised):
   seconds for each step and users per second.

Last line: users/s of the certificate step at ``--users`` users.

    python bench/envy.py [--runs 100] [--seeds 50] [--users 1000000]
"""

from __future__ import annotations

import argparse
import time

import duckdb
import numpy as np

from fairmon.transforms.envy import bandit_problem, ocef_decisions, ocef_online
from fairmon.transforms.simulate_envy import SCENARIOS, EnvySpec, build_system, simulate_audit

TRUTH = {"P1": "eps_no_envy", "P2": "envy", "P3": "eps_no_envy", "P4": "envy"}
ALPHAS = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)


def bandits(runs: int) -> None:
    print(f"OCEF on seed 004's bandit problems, {runs} runs each, δ = ε = 0.05")
    print(f"{'problem':8}{'alpha':>7}{'duration':>11}{'cost':>9}{'wrong':>8}{'violated':>10}")
    for name, truth in TRUTH.items():
        durations = {}
        for a in ALPHAS:
            r = ocef_online(
                bandit_problem(name), delta=0.05, alpha=a, epsilon=0.05, runs=runs, rng=np.random.default_rng(1)
            )
            durations[a] = r["duration"].mean()
            print(
                f"{name:8}{a:>7.2f}{durations[a]:>11.0f}{r['cost'].mean():>9.1f}"
                f"{np.mean(r['decision'] != truth):>8.3f}{r['violated'].mean():>10.3f}"
            )
        best = min(durations, key=durations.get)
        print(f"{name}: shortest mean duration at alpha = {best}")


def scenarios(seeds: int, days: int) -> None:
    print(f"\nAUDIT day by day, {seeds} seeds × {days} days, δ = 0.05, λ = 0.1, γ = 0.3, ε = 0.1")
    for sc in SCENARIOS:
        want = "not_envy_free" if sc == "envious" else "envy_free"
        first, wrong, decided = [], 0, 0
        for seed in range(seeds):
            out = simulate_audit(
                build_system(EnvySpec(sc, seed=seed)),
                days=days,
                delta=0.05,
                lam=0.1,
                gamma=0.3,
                epsilon=0.1,
                pulls_own=2000,
                pulls_per_donor=500,
                rng=np.random.default_rng(1000 + seed),
            )
            verdicts = [d["verdict"] for d in out]
            wrong += any(v not in ("undecided", want) for v in verdicts)
            if want in verdicts:
                decided += 1
                first.append(verdicts.index(want) + 1)
        med = float(np.median(first)) if first else float("nan")
        print(
            f"{sc:10} decided {decided}/{seeds}, median day of the decision {med:.0f} "
            f"(range {min(first, default=0)}–{max(first, default=0)}), wrong verdicts {wrong / seeds:.3f}"
        )


def certificates(users: int) -> float:
    con = duckdb.connect()
    t0 = time.perf_counter()
    counts = con.sql(
        f"""
        WITH rows AS (
            SELECT i // 48 AS user_id, (i % 48) // 8 AS arm,
                   (hash(i) % 1000) < CASE WHEN (i // 48) % 10 = 0 AND (i % 48) // 8 = 1 THEN 900 ELSE 400 END AS reward
            FROM range({users} * 48) t(i)
        )
        SELECT user_id, CASE WHEN arm = 0 THEN NULL ELSE 'd' || arm END AS donor,
               count(*)::BIGINT AS n, sum(reward::INT)::BIGINT AS reward_sum
        FROM rows GROUP BY ALL
        """
    ).pl()
    t1 = time.perf_counter()
    out = ocef_decisions(counts, delta=0.05 / (3 * users), epsilon=0.1)
    t2 = time.perf_counter()
    rate = users / (t2 - t1)
    print(
        f"\nper-user certificates: {users:,} users × 6 arms ({users * 48:,} rows): "
        f"DuckDB count {t1 - t0:.2f} s, decisions {t2 - t1:.2f} s ({out.height:,} users)"
    )
    print(f"users/s (certificate step): {rate:,.0f}")
    return rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--days", type=int, default=14)
    ap.add_argument("--users", type=int, default=1_000_000)
    a = ap.parse_args()
    bandits(a.runs)
    scenarios(a.seeds, a.days)
    certificates(a.users)


if __name__ == "__main__":
    main()
