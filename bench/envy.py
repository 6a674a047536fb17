"""Benchmark: the envy-freeness audit (issue 16; seed 004, DESIGN §4.7).

Four parts, each printing its figures:

1. OCEF as the interactive loop (transforms/envy/certify.py ``ocef_online``) on the
   seed's bandit problems P1–P4 (App. D.1; δ = ε = 0.05) over ``--runs``
   runs at several conservative-exploration levels α: mean duration, mean
   cost, the share of wrong answers and of runs that broke the conservative
   constraint (3) with the true means (each should be ≤ δ), and the α at
   which the duration is smallest (seed 004 Fig. 3: interior for P2–P4).
2. AUDIT day by day on the two simulated systems (transforms/simulators/envy_world.py;
   δ = 0.05, λ = 0.1, γ = 0.3, ε = 0.1, 2,000 own rows and 500 rows per
   donor per target and day) over ``--seeds`` seeds: the share of runs
   decided within the days, the median day of the (first) decision, and the
   share of runs with a wrong verdict on any day.
3. AUDIT run interactively on the simulated systems (``online_audit``:
   OCEF per target with the conservative check, α = 0.1) over ``--seeds``/5
   seeds: true verdicts, wrongly decided users, broken constraints, mean
   rounds and cost per target.
4. Per-user certificates at scale: a staged envy_rows table for ``--users``
   target users with their own policy and 5 donors over 8 days (400 logged
   rows per arm; 10 % of the users envy their first donor), counted per user
   × arm by the pipeline's sql/envy_user_counts.sql in DuckDB and decided by
   ``ocef_decisions`` (vectorised): seconds for each step.

Last line: users/s of counts + certificates at ``--users`` users.

    python bench/envy.py [--runs 100] [--seeds 50] [--users 1000000]
"""

from __future__ import annotations

import argparse
import datetime as dt
import time

import duckdb
import numpy as np
import polars as pl

from fairmon.pipelines.storage import db
from fairmon.transforms.envy.certify import bandit_problem, ocef_decisions, ocef_online
from fairmon.transforms.simulators.envy_world import SCENARIOS, EnvySpec, build_system, online_audit, simulate_audit

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


def online(seeds: int) -> None:
    print(f"\nAUDIT run interactively (OCEF per target, α = 0.1), {seeds} seeds, δ = 0.05, λ = 0.2, γ = 0.3, ε = 0.1")
    for sc in SCENARIOS:
        want = "not_envy_free" if sc == "envious" else "envy_free"
        got, wrong, dur, cost, viol = 0, 0, [], [], 0
        for seed in range(seeds):
            r = online_audit(
                build_system(EnvySpec(sc, seed=seed)),
                delta=0.05,
                alpha=0.1,
                lam=0.2,
                gamma=0.3,
                epsilon=0.1,
                rng=np.random.default_rng(seed),
            )
            got += r["verdict"] == want
            wrong += r["wrong_users"]
            viol += int(r["violated"].sum())
            dur.append(r["duration"].mean())
            cost.append(r["cost"].mean())
        print(
            f"{sc:10} true verdict {got}/{seeds}, users decided wrongly {wrong}, constraint broken {viol}; "
            f"mean rounds per target {np.mean(dur):,.0f}, mean cost per target {np.mean(cost):,.1f}"
        )


def certificates(users: int) -> float:
    """The pipeline's own SQL (sql/envy_user_counts.sql) over a staged envy_rows
    table of ``users`` targets × (own + 5 donors) × 8 days, then the decisions."""
    con = duckdb.connect()
    t0 = time.perf_counter()
    con.execute(
        f"""
        CREATE TABLE envy_rows AS
        SELECT DATE '2026-01-01' + (i % 8)::INTEGER AS ds, 'f' || (i % 8) AS src_file,
               'u' || (i // 48) AS user_id,
               CASE WHEN (i % 48) // 8 = 0 THEN NULL ELSE 'd' || ((i % 48) // 8) END AS donor_user_id,
               NULL::VARCHAR AS donor_group, '0' AS attr__g, 50::BIGINT AS n,
               CASE WHEN (i // 48) % 10 = 0 AND (i % 48) // 8 = 1 THEN 45 ELSE 20 END::BIGINT AS n_pos
        FROM range({users} * 48) t(i)
        """
    )
    con.register("envy_files", pl.DataFrame({"file": [f"f{d}" for d in range(8)]}))
    t1 = time.perf_counter()
    counts = db.query(con, "envy_user_counts", start=dt.date(2026, 1, 1), ds=dt.date(2026, 1, 8))
    t2 = time.perf_counter()
    out = ocef_decisions(counts, delta=0.05 / (3 * users), epsilon=0.1)
    t3 = time.perf_counter()
    rate = users / (t3 - t1)
    print(
        f"\nper-user certificates: {users:,} users × 6 arms × 8 days ({users * 48:,} staged rows, "
        f"{users * 48 * 50:,} logged rows; staging table built in {t1 - t0:.2f} s): "
        f"count per user × arm (sql/envy_user_counts.sql) {t2 - t1:.2f} s, decisions {t3 - t2:.2f} s; "
        f"{(out['decision'] == 'envy').sum():,} envious (truth: {users // 10:,})"
    )
    print(f"users/s (counts + certificates): {rate:,.0f}")
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
    online(max(1, a.seeds // 5))
    certificates(a.users)


if __name__ == "__main__":
    main()
