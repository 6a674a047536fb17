"""The ``stability_user`` table: how much a user's recommendations change when
B other users' data change, against the noise of retraining (seed 003 Def. 1
"stability"; DESIGN §4.8). Pure: arrays and frames in, frames out, no I/O.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import polars as pl

from fairmon.transforms.reach.reach_tables import Ratings, has_reach
from fairmon.transforms.reach.reachability import (
    BiasedMF,
    fit_biased_mf,
)
from fairmon.transforms.registry import (
    DS,
    REASON,
    B,
    Bounds,
    Column,
    F,
    I,
    S,
    Table,
    declares,
    non_negative,
    polars_schema,
)

STABILITY_USER = Table(
    "stability_user",
    "Per user and budget B: the largest change of the user's recommendations found when B other users' data "
    "change; a lower bound: the perturbations tried redraw existing ratings and retrain fairmon's own model.",
    "seed 003 Def. 1 (stability); DESIGN §4.8",
    ("ds", "user_id", "B"),
    (
        DS,
        Column("user_id", S, "-", "User of the snapshot.", nullable=False),
        Column(
            "B",
            I,
            "users",
            "Other users whose ratings were replaced (config `reach.stability_budgets`).",
            bounds=Bounds("B_in_range", min_value=1),
        ),
        Column(
            "n_perturbations",
            I,
            "retrainings",
            "Perturbations that left this user's own data unchanged.",
            bounds=non_negative("n_perturbations_in_range"),
        ),
        Column(
            "stability_lb",
            F,
            "total variation",
            "Largest TV change seen: a lower bound of the stability metric.",
            bounds=Bounds("stability_lb_is_tv", min_value=0, max_value=1.000000001),
        ),
        Column(
            "noise_floor",
            F,
            "total variation",
            "Largest TV change from retraining the same data with other seeds.",
            bounds=Bounds("noise_floor_is_tv", min_value=0, max_value=1.000000001),
        ),
        Column("noise_seeds", I, "retrainings", "Seeds behind noise_floor (config `reach.noise_seeds`)."),
        Column("above_noise", B, "-", "stability_lb > noise_floor: the change is more than training noise."),
        REASON,
    ),
    None,
    section="reach",
)


def recommendation_distribution(model: BiasedMF, history: Ratings, beta: float) -> np.ndarray:
    """π_u over the items user u has not rated: softmax(β · predicted rating),
    rated items get 0 (the recommendation whose change seed 003 Def. 1
    "stability" measures). Shape (U, I), rows sum to 1. Raises nothing; a
    user who rated every item gets a row of NaN."""
    s = beta * model.predict()
    s[history.users, history.items] = -np.inf
    s -= s.max(axis=1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=1, keepdims=True)


def total_variation(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Total variation ½ Σ |p − q| along the last axis: the distance d of seed
    003 Def. 1 (stability) between two recommendation distributions. Shapes
    broadcast; returns values in [0, 1] for distributions."""
    return 0.5 * np.abs(p - q).sum(axis=-1)


@dataclass(frozen=True)
class Training:
    """How the snapshot's model is retrained for stability: rank, ridge ``lam``,
    ALS ``iters`` and the ``seed`` of the initial factors."""

    rank: int
    lam: float
    iters: int
    seed: int


def _fit(history: Ratings, ratings: np.ndarray, n_users: int, n_items: int, training: Training, seed: int):
    return fit_biased_mf(
        history.users,
        history.items,
        ratings,
        n_users=n_users,
        n_items=n_items,
        rank=training.rank,
        lam=training.lam,
        iters=training.iters,
        seed=seed,
    )


def stability_options(cfg) -> dict:
    """The keyword arguments of :func:`stability_table` from ``[reach]`` (the
    budgets are an input: the reach stage keeps those below the snapshot's users)."""
    rc = cfg.reach
    return dict(beta=rc.beta, perturbations=rc.perturbations, noise_seeds=rc.noise_seeds, r_min=rc.rating_min,
                r_max=rc.rating_max, seed=rc.seed)  # fmt: skip


@declares(
    STABILITY_USER,
    stage="reach",
    inputs=("ds", "history", "users", "items_count", "training", "budgets"),
    enabled=has_reach,
    options=stability_options,
)
def stability_table(
    ds: dt.date,
    history: Ratings,
    users: pl.DataFrame,
    items_count: int,
    training: Training,
    *,
    beta: float,
    budgets: Iterable[int],
    perturbations: int,
    noise_seeds: int,
    r_min: float,
    r_max: float,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
) -> pl.DataFrame:
    """``stability_user`` rows (seed 003 Def. 1, "individual-level stability").

    The model is retrained from the snapshot's ratings (``training``; the base
    fit uses ``training.seed``). For each budget B, ``perturbations`` times: B
    users drawn at random have every rating replaced by a uniform draw from
    the rating scale (integers when the ratings are), the model is retrained
    with the same seed, and every other user's recommendation distribution
    (:func:`recommendation_distribution`) is compared with the base one in
    total variation. ``stability_lb`` is the largest change seen: a lower bound
    of the maximum over all B-user changes. ``noise_floor`` is the largest
    change from retraining the unchanged data with ``noise_seeds`` other seeds:
    a change below it cannot be told from training noise. ``progress`` is
    called with 1 after each retraining. Raises ValueError when a budget is
    not in 1..(users − 1) or ``perturbations`` < 1. Without budgets: no rows.
    """
    n_users = users.height
    budgets = sorted(set(int(b) for b in budgets))
    if perturbations < 1:
        raise ValueError("perturbations must be >= 1")
    if any(b < 1 or b >= n_users for b in budgets):
        raise ValueError(f"stability budgets must be in 1..{n_users - 1}, got {budgets}")
    if not budgets:  # no budget to perturb: no row, and no retraining
        return pl.DataFrame(schema=polars_schema("stability_user"))
    tick = progress or (lambda _n: None)
    base_pi = recommendation_distribution(
        _fit(history, history.ratings, n_users, items_count, training, training.seed), history, beta
    )
    tick(1)
    floor = np.zeros(n_users)
    for k in range(noise_seeds):
        other = _fit(history, history.ratings, n_users, items_count, training, training.seed + 1 + k)
        floor = np.maximum(floor, total_variation(base_pi, recommendation_distribution(other, history, beta)))
        tick(1)
    rng = np.random.default_rng(seed)
    integral = bool(np.all(history.ratings == np.round(history.ratings))) and np.floor(r_max) >= np.ceil(r_min)
    rows = []
    for b in budgets:
        worst = np.full(n_users, np.nan)
        tried = np.zeros(n_users, dtype=np.int64)
        for _ in range(perturbations):
            changed = rng.choice(n_users, size=b, replace=False)
            ratings = history.ratings.copy()
            edit = np.isin(history.users, changed)
            draw = (
                rng.integers(int(np.ceil(r_min)), int(np.floor(r_max)) + 1, size=int(edit.sum()))
                if integral
                else rng.uniform(r_min, r_max, size=int(edit.sum()))
            )
            ratings[edit] = draw
            pi = recommendation_distribution(
                _fit(history, ratings, n_users, items_count, training, training.seed), history, beta
            )
            tv = total_variation(base_pi, pi)
            keep = np.ones(n_users, dtype=bool)
            keep[changed] = False  # τ_j must stay unchanged for user j (seed 003 Def. 1)
            worst[keep] = np.fmax(worst[keep], tv[keep])
            tried[keep] += 1
            tick(1)
        rows.append(
            pl.DataFrame(
                {
                    "user_id": users.get_column("user_id"),
                    "B": np.full(n_users, b, dtype=np.int64),
                    "n_perturbations": tried,
                    "stability_lb": worst,
                    "noise_floor": floor if noise_seeds else np.full(n_users, np.nan),
                }
            )
        )
    out = pl.concat(rows).with_columns(
        ds=pl.lit(ds),
        noise_seeds=pl.lit(int(noise_seeds), dtype=pl.Int64),
        above_noise=pl.col("stability_lb") > pl.col("noise_floor"),
        reason=pl.when(pl.col("n_perturbations") == 0)
        .then(pl.lit("every perturbation changed this user's own data"))
        .when(pl.col("noise_floor").is_nan())
        .then(pl.lit("no training-noise floor (noise_seeds = 0)")),
    )
    out = out.with_columns(pl.col("stability_lb").fill_nan(None).fill_null(float("nan")))
    return out.select(list(polars_schema("stability_user"))).cast(polars_schema("stability_user")).sort("B", "user_id")
