"""Simulated human labeling logs with a known truth (pure: returns frames).

Model (seed 002 §5.3, equal-variance Gaussian SDT): content group g has
prevalence φ_g of violating items (gold = 1). Labeler l, on an item of group
g, sees evidence x ~ N(d′_lg · gold, 1) and labels "violating" when
x > t_lg. So FPR = 1 − Φ(t), FNR = Φ(t − d′), and the implied threshold and
cost ratio follow from eq. 12. Each item is labeled by one labeler drawn at
random; a share ``gold_rate`` of items has an expert gold label (the rest
have gold_label = null and are left out of SDT).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from fairmon.transforms.decisions.sdt import rates_from_sdt, sdt_from_rates

GROUP_COLUMN = "producer_group"


@dataclass(frozen=True)
class LabelingSpec:
    """Groups {name: prevalence}; labelers {id: {group: (d_prime, criterion_t)}}."""

    start: dt.date = dt.date(2026, 1, 1)
    days: int = 7
    items_per_day: int = 20_000
    groups: dict[str, float] = field(default_factory=lambda: {"A": 0.10, "B": 0.20})
    labelers: dict[str, dict[str, tuple[float, float]]] = field(
        default_factory=lambda: {
            "L1": {"A": (2.0, 1.2), "B": (2.0, 1.2)},
            "L2": {"A": (1.5, 0.8), "B": (1.5, 1.6)},  # stricter on group B
            "L3": {"A": (2.5, 1.0), "B": (2.5, 1.0)},
        }
    )
    gold_rate: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if any(not 0 < p < 1 for p in self.groups.values()):
            raise ValueError("group prevalences must be in (0, 1)")
        for lab, per in self.labelers.items():
            if set(per) != set(self.groups):
                raise ValueError(f"labeler {lab} needs (d_prime, criterion) for every group {sorted(self.groups)}")
        if not 0 < self.gold_rate <= 1 or self.days < 1 or self.items_per_day < 1:
            raise ValueError("gold_rate in (0, 1], days >= 1 and items_per_day >= 1 are required")


def labeling_truth(spec: LabelingSpec) -> pl.DataFrame:
    """True FPR, FNR, criterion, d′, implied threshold and cost ratio per labeler × group."""
    rows = []
    for lab, per in spec.labelers.items():
        for g, (dp, t) in per.items():
            fpr, fnr = rates_from_sdt(t, dp)
            _, _, tau, c = sdt_from_rates(fpr, fnr, spec.groups[g])
            rows.append(
                {
                    "labeler_id": lab,
                    "group": g,
                    "prevalence": spec.groups[g],
                    "d_prime": dp,
                    "criterion_t": t,
                    "fpr": fpr,
                    "fnr": fnr,
                    "implied_threshold": tau,
                    "cost_ratio": c,
                }
            )
    return pl.DataFrame(rows)


def simulate_labels_day(spec: LabelingSpec, day: int) -> pl.DataFrame:
    """One day's labeling log (DESIGN §2 labels): ds, item_id, labeler_id,
    label, gold_label (null when not reviewed), producer_group. Deterministic
    in (seed, day)."""
    rng = np.random.default_rng([spec.seed, day, 2])
    n = spec.items_per_day
    groups = list(spec.groups)
    labelers = list(spec.labelers)
    g_idx = rng.integers(0, len(groups), n)
    l_idx = rng.integers(0, len(labelers), n)
    phi = np.array([spec.groups[g] for g in groups])[g_idx]
    gold = rng.random(n) < phi
    dp = np.array([[spec.labelers[lab][g][0] for g in groups] for lab in labelers])[l_idx, g_idx]
    t = np.array([[spec.labelers[lab][g][1] for g in groups] for lab in labelers])[l_idx, g_idx]
    label = rng.normal(dp * gold, 1.0) > t
    reviewed = rng.random(n) < spec.gold_rate
    ds = spec.start + dt.timedelta(days=day)
    return pl.DataFrame(
        {
            "ds": [ds] * n,
            "item_id": [f"{ds}-{i}" for i in range(n)],
            "labeler_id": np.array(labelers)[l_idx],
            "label": label,
            "gold_label": pl.Series(gold).set(pl.Series(~reviewed), None),
            GROUP_COLUMN: np.array(groups)[g_idx],
        }
    )
