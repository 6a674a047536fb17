"""Bench: the degree of envy of seed 004 §5.1 (average envy, share of ε-envious users) from logs.

On the simulated systems of transforms/simulators/envy_world.py (the
``envy-free`` one is near-argmax on the true preferences, like §5.1's OPT
policies; the ``envious`` one has a model that knows nothing of a 30 %
minority, a source of envy like §5.1's misspecification), for ``--seeds``
seeds: AUDIT's targets and donors (δ = 0.05, λ = 0.1, γ = 0.3), logs
accumulated over ``--days`` days (300 own-policy rows and 100 per donor a
day, :func:`audit_counts`), OCEF's certificates and ``envy_summary``.

Prints per scenario, as means over seeds:
* §5.1's quantities over every user (Δ^m = max over all users' policies),
  the paper's definition, from the exact utilities;
* the same over the targets and their donors (what fairmon estimates);
* fairmon's estimate and bounds on the last day;
* seed 004 Table 1's figures (Last.fm and MovieLens, EUU and OPT policies)
  beside, as the paper's scale of these quantities (other systems: not a
  comparison of values).
Last line: the share of (seed, day) rows whose bounds hold both truths over
the targets (judged: ≥ 1 − δ/3 = 0.983).

    python bench/envy_degree.py [--seeds 20] [--days 6]
"""

from __future__ import annotations

import argparse
import datetime as dt

import numpy as np

from fairmon.transforms.envy.envy_summary import envy_summary
from fairmon.transforms.envy.envy_tables import envy_user_tables
from fairmon.transforms.simulators.envy_world import EnvySpec, audit_counts, audit_design, build_system

EPSILON, DELTA, LAM, GAMMA = 0.05, 0.05, 0.1, 0.3
#: seed 004 Table 1: (average envy, share of 0.05-envious users) per dataset and policy.
TABLE_1 = {
    "Last.fm EUU": (0.10, 0.61),
    "Last.fm OPT": (0.0, 0.0),
    "MovieLens EUU": (0.04, 0.13),
    "MovieLens OPT": (0.0, 0.0),
}
DS = dt.date(2026, 1, 1)


def run(scenario: str, seed: int, days: int) -> tuple[dict, list[bool]]:
    """One seed: the truths and the last day's envy_summary row, and whether each day's bounds held."""
    system = build_system(EnvySpec(scenario, seed=seed))
    rng = np.random.default_rng(1000 + seed)
    targets, donors = audit_design(system, delta=DELTA, lam=LAM, gamma=GAMMA, rng=rng)
    envy = np.maximum(system.utility[targets[:, None], donors].max(axis=1) - np.diag(system.utility)[targets], 0)
    truth = {
        "all_average": float(system.envy.mean()),
        "all_share": float((system.envy > EPSILON).mean()),
        "target_average": float(envy.mean()),
        "target_share": float((envy > EPSILON).mean()),
    }
    held = []
    for counts in audit_counts(system, targets, donors, days, 300, 100, rng):
        users, _ = envy_user_tables(counts, DS, DS, epsilon=EPSILON, delta=DELTA, lam=LAM, gamma=GAMMA)
        r = envy_summary(users, DS, DS, epsilon=EPSILON).row(0, named=True)
        held.append(
            r["average_envy_lower"] <= truth["target_average"] <= r["average_envy_upper"]
            and r["share_envious_lower"] <= truth["target_share"] <= r["share_envious_upper"]
        )
    return {**truth, **{k: r[k] for k in r if k.startswith(("average_envy", "share_envious"))}}, held


def main() -> None:
    """Both systems over ``--seeds`` seeds and ``--days`` days; the figures of the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--days", type=int, default=6)
    a = ap.parse_args()
    print(f"ε = {EPSILON}, δ = {DELTA}, λ = {LAM}, γ = {GAMMA}; {a.seeds} seeds × {a.days} days; means over seeds")
    held_all: list[bool] = []
    for scenario in ("envy-free", "envious"):
        rows, held = zip(*(run(scenario, s, a.days) for s in range(a.seeds)))
        mean = {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}
        held_all += [h for hs in held for h in hs]
        print(f"\n{scenario}:")
        print(f"  §5.1 over every user:        average envy {mean['all_average']:.4f}, share {mean['all_share']:.3f}")
        t_avg, t_share = mean["target_average"], mean["target_share"]
        print(f"  over the targets' donors:    average envy {t_avg:.4f}, share {t_share:.3f}")
        print(
            f"  fairmon, day {a.days}:              average envy {mean['average_envy']:.4f} "
            f"[{mean['average_envy_lower']:.4f}, {mean['average_envy_upper']:.4f}], share {mean['share_envious']:.3f} "
            f"[{mean['share_envious_lower']:.3f}, {mean['share_envious_upper']:.3f}]"
        )
    print("\nseed 004 Table 1 (average envy, share 0.05-envious):")
    for name, (avg, share) in TABLE_1.items():
        print(f"  {name:14} {avg:.2f}  {share:.2f}")
    print(f"\nbounds holding both truths over the targets: {np.mean(held_all):.3f} of {len(held_all)} seed × day rows")


if __name__ == "__main__":
    main()
