"""Reachability and stability tables of one model snapshot (seed 003 Def. 1; DESIGN §3, §4.8).

Pure: arrays and Polars frames in, frames out, no I/O.

* :func:`reach_problems` — ρ, ρ* and top-1 reachability of every (user, target item).
* :func:`reach_user_table`, :func:`reach_item_table` — discovery per user, availability per item.
* :func:`stability_table` — stability lower bounds per user beside the training-noise floor.
* :func:`reach_group_table` — group means, medians and between-group differences with bootstrap CIs.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from fairmon.transforms.blas import single_blas_thread
from fairmon.transforms.reach.reachability import (
    BiasedMF,
    affine_scores,
    max_reachability,
    softmax_probabilities,
    top1_reachable,
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
    probability,
)


@dataclass(frozen=True)
class Ratings:
    """The training history a snapshot saw, as indices: ``users`` (n,),
    ``items`` (n,) into the snapshot's user and item lists, ``ratings`` (n,)."""

    users: np.ndarray
    items: np.ndarray
    ratings: np.ndarray

    def of_user(self, u: int) -> tuple[np.ndarray, np.ndarray]:
        """(items, ratings) of user index ``u``."""
        m = self.users == u
        return self.items[m], self.ratings[m]


def has_reach(cfg) -> bool:
    """Whether the config audits a model snapshot's reachability (DESIGN §4.8)."""
    return cfg.reach is not None


def reach_options(cfg) -> dict:
    """The keyword arguments of :func:`reach_user_table` from ``[reach]``."""
    return {"beta": cfg.reach.beta, "budget": cfg.reach.budget}


def reach_item_options(cfg) -> dict:
    """The keyword arguments of :func:`reach_item_table` from ``[reach]``."""
    return {**reach_options(cfg), "thin_users": cfg.reach.thin_users}


REACH_USER = Table(
    "reach_user",
    "Per user of a model snapshot: how many items the user can make the recommender show (discovery); a lower "
    "bound: the action set is fixed (the user's top unseen items) and only the user's own factors are refitted.",
    "seed 003 Def. 1 (reachability); DESIGN §4.8 after Curmei, Dean and Recht (ICML 2021)",
    ("ds", "user_id"),
    (
        DS,
        Column("user_id", S, "-", "User of the snapshot.", nullable=False),
        Column("attributes", S, "JSON", "The user's attributes {attribute: group} (config `reach.user_attributes`)."),
        Column(
            "n_targets",
            I,
            "items",
            "|T_u|: unseen items outside the action set.",
            bounds=non_negative("n_targets_in_range"),
        ),
        Column(
            "discovery_base",
            F,
            "share",
            "Share of targets with baseline ρ > 1/|T_u| (at the model's predictions).",
            bounds=probability("discovery_base_in_range"),
        ),
        Column(
            "discovery_max",
            F,
            "share",
            "Share of targets with ρ* > 1/|T_u| (best ratings of the action set).",
            bounds=probability("discovery_max_in_range"),
        ),
        Column(
            "mean_lift",
            F,
            "ratio",
            "Mean over targets of ρ*/ρ.",
            bounds=Bounds("lift_at_least_one", min_value=0.999999999),
        ),
        Column("mean_gain", F, "probability", "Mean over targets of ρ* − ρ.", bounds=probability("gain_in_range")),
        Column(
            "top1_reachable_share",
            F,
            "share",
            "Share of targets the user can put on top (β → ∞, exact).",
            bounds=probability("top1_reachable_share_in_range"),
        ),
        Column("beta", F, "1/rating", "Softmax inverse temperature β (config `reach.beta`)."),
        Column("budget", I, "items", "K: size of the action set (config `reach.budget`)."),
        REASON,
    ),
    "reach_user",
    section="reach",
)

REACH_ITEM = Table(
    "reach_item",
    "Per item of a model snapshot: how available it is to the users it is a target for; a lower bound (fixed "
    "action sets, only the acting user's factors refitted).",
    "seed 003 Def. 1 (reachability); DESIGN §4.8",
    ("ds", "item_id"),
    (
        DS,
        Column("item_id", S, "-", "Item of the snapshot.", nullable=False),
        Column("attributes", S, "JSON", "The item's attributes {attribute: group} (config `reach.item_attributes`)."),
        Column(
            "n_users",
            I,
            "users",
            "Users the item is targetable for (a target: unseen by them and outside their action set); "
            "the availability figures are means over them.",
            bounds=non_negative("n_users_in_range"),
        ),
        Column(
            "n_rated",
            I,
            "users",
            "Users who rated the item (their history): never a target for them.",
            bounds=non_negative("n_rated_in_range"),
        ),
        Column(
            "n_in_action_set",
            I,
            "users",
            "Users whose action set holds the item (among their K top-predicted unseen items): not a target.",
            bounds=non_negative("n_in_action_set_in_range"),
        ),
        Column(
            "thin",
            B,
            "-",
            "n_users < thin_users: the availability stands for too few users to compare (also at 0 users).",
        ),
        Column(
            "thin_users",
            I,
            "users",
            "Threshold of `thin` (config `reach.thin_users`, default 30).",
            bounds=Bounds("thin_users_positive", min_value=1),
        ),
        Column(
            "availability_base",
            F,
            "probability",
            "Mean baseline ρ over those users.",
            bounds=probability("availability_base_in_range"),
        ),
        Column(
            "availability_max",
            F,
            "probability",
            "Mean ρ* over those users (DESIGN §4.8 availability).",
            bounds=probability("availability_max_in_range"),
        ),
        Column(
            "availability_uniform",
            F,
            "probability",
            "Mean 1/|T_u|: the availability of a uniform recommender.",
            bounds=probability("availability_uniform_in_range"),
        ),
        Column("unavailable", B, "-", "availability_max < availability_uniform: effectively unavailable."),
        Column(
            "top1_reachable_share",
            F,
            "share",
            "Share of those users who can put the item on top.",
            bounds=probability("top1_reachable_share_in_range"),
        ),
        Column("beta", F, "1/rating", "Softmax inverse temperature β (config `reach.beta`)."),
        Column("budget", I, "items", "K: size of the action set (config `reach.budget`)."),
        REASON,
    ),
    "reach_item",
    section="reach",
)


def beta_columns(beta: float) -> tuple[str, str]:
    """The names of the baseline and ρ* columns :func:`reach_problems` adds for
    a β other than the configured one, e.g. ``("rho_base@2", "rho_max@2")``."""
    return f"rho_base@{beta:g}", f"rho_max@{beta:g}"


def action_and_targets(pred_u: np.ndarray, hist: np.ndarray, budget: int) -> tuple[np.ndarray, np.ndarray]:
    """The action set A_u (the ``budget`` unseen items with the highest predicted
    ratings, DESIGN §4.8; ties broken by item index) and the targets T_u (the
    other unseen items) of one user; ``pred_u`` (I,) predicted ratings,
    ``hist`` the indices of the items the user rated. Returns two index
    arrays (≤ budget,) and (I − |hist| − |A_u|,). Raises nothing."""
    unseen = np.setdiff1d(np.arange(pred_u.size), hist)
    acts = unseen[np.argsort(-pred_u[unseen], kind="stable")[:budget]]
    return acts, np.setdiff1d(unseen, acts)


@single_blas_thread
def reach_problems(
    model: BiasedMF,
    history: Ratings,
    *,
    beta: float,
    budget: int,
    r_min: float,
    r_max: float,
    betas: tuple[float, ...] = (),
    progress: Callable[[int], None] | None = None,
) -> pl.DataFrame:
    """Every (user, target) problem of the snapshot (seed 003 Def. 1 in the
    computable form of DESIGN §4.8).

    For each user: actions A_u and targets T_u (:func:`action_and_targets`),
    baseline ρ_ui = π(i | a₀) at the model's own predictions a₀ (clipped to
    [r_min, r_max]), ρ*_ui (:func:`~fairmon.transforms.reach.reachability.max_reachability`)
    and top-1 reachability (:func:`~fairmon.transforms.reach.reachability.top1_reachable`).
    Returns columns user (index), item (index), n_targets, rho_base, rho_max,
    top1; one row per problem; and for each β′ of ``betas`` other than
    ``beta`` the baseline and ρ* at β′ (:func:`beta_columns`), each solved from
    the previous β's maximisers (continuation: the optimum does not depend on
    the start, the Newton steps do). Top-1 reachability does not depend on β.
    ``progress`` is called with 1 after each user.
    Runs with one BLAS thread (:mod:`fairmon.transforms.blas`), like the
    stages' tables: its products are small (|T_u| × K), so OpenBLAS's other
    threads would mostly spin, and the last bits would follow their timing.
    Raises ValueError when r_max < r_min or β < 0.
    """
    pred = model.predict()
    others = sorted({float(b) for b in betas} - {float(beta)})
    parts = []
    for u in range(pred.shape[0]):
        hist, hr = history.of_user(u)
        acts, targ = action_and_targets(pred[u], hist, budget)
        if targ.size:
            B, c = affine_scores(model, hist, hr, acts, targ)
            base = softmax_probabilities(B, c, np.clip(pred[u, acts], r_min, r_max), beta)
            rho, best = max_reachability(B, c, beta, r_min, r_max)
            top1 = top1_reachable(B, c, r_min, r_max, start=(beta, best))
            cols = {
                "user": np.full(targ.size, u, dtype=np.int64),
                "item": targ.astype(np.int64),
                "n_targets": np.full(targ.size, targ.size, dtype=np.int64),
                "rho_base": base,
                "rho_max": np.maximum(rho, base),  # the solver's optimum is never below a feasible point
                "top1": top1,
            }
            x = best
            for b in others:
                base_b = softmax_probabilities(B, c, np.clip(pred[u, acts], r_min, r_max), b)
                rho_b, x = max_reachability(B, c, b, r_min, r_max, x0=x)
                name_base, name_max = beta_columns(b)
                cols[name_base], cols[name_max] = base_b, np.maximum(rho_b, base_b)
            parts.append(pl.DataFrame(cols))
        if progress is not None:
            progress(1)
    schema = {
        "user": pl.Int64,
        "item": pl.Int64,
        "n_targets": pl.Int64,
        "rho_base": pl.Float64,
        "rho_max": pl.Float64,
        "top1": pl.Boolean,
        **{name: pl.Float64 for b in others for name in beta_columns(b)},
    }
    return pl.concat(parts) if parts else pl.DataFrame(schema=schema)


def _attributes_json(frame: pl.DataFrame, attributes: list[str]) -> pl.Series:
    return pl.Series(
        "attributes",
        [
            json.dumps({a: r[a] for a in attributes}, sort_keys=True)
            for r in frame.select(attributes).iter_rows(named=True)
        ]
        if attributes
        else ["{}"] * frame.height,
        dtype=pl.String,
    )


@declares(
    REACH_USER,
    stage="reach",
    inputs=("ds", "problems", "users", "attributes=user_attributes"),
    enabled=has_reach,
    options=reach_options,
)
def reach_user_table(
    ds: dt.date, problems: pl.DataFrame, users: pl.DataFrame, attributes: list[str], beta: float, budget: int
) -> pl.DataFrame:
    """``reach_user`` rows: per user, discovery D_u = share of targets with
    ρ > 1/|T_u| at baseline and at the maximum, the mean lift ρ*/ρ and gain
    ρ* − ρ, and the share of targets the user can put on top (DESIGN §4.8). ``users``: one row
    per user index (column ``user_id`` and the attribute columns) in index order."""
    per = (
        problems.with_columns(uniform=1.0 / pl.col("n_targets"))
        .group_by("user")
        .agg(
            n_targets=pl.len(),
            discovery_base=(pl.col("rho_base") > pl.col("uniform")).mean(),
            discovery_max=(pl.col("rho_max") > pl.col("uniform")).mean(),
            mean_lift=(pl.col("rho_max") / pl.col("rho_base")).mean(),
            mean_gain=(pl.col("rho_max") - pl.col("rho_base")).mean(),
            top1_reachable_share=pl.col("top1").mean(),
        )
    )
    base = users.with_row_index("user").with_columns(pl.col("user").cast(pl.Int64), _attributes_json(users, attributes))
    out = base.select("user", "user_id", "attributes").join(per, on="user", how="left")
    out = out.with_columns(
        ds=pl.lit(ds),
        n_targets=pl.col("n_targets").fill_null(0).cast(pl.Int64),
        beta=pl.lit(float(beta)),
        budget=pl.lit(int(budget), dtype=pl.Int64),
        reason=pl.when(pl.col("discovery_base").is_null()).then(
            pl.lit("no target items: every item rated or acted on")
        ),
    )
    return out.select(list(polars_schema("reach_user"))).cast(polars_schema("reach_user")).sort("user_id")


@declares(
    REACH_ITEM,
    stage="reach",
    inputs=("ds", "problems", "items", "attributes=item_attributes", "history", "users"),
    enabled=has_reach,
    options=reach_item_options,
)
def reach_item_table(
    ds: dt.date,
    problems: pl.DataFrame,
    items: pl.DataFrame,
    attributes: list[str],
    history: Ratings,
    users: pl.DataFrame,
    beta: float,
    budget: int,
    thin_users: int = 30,
) -> pl.DataFrame:
    """``reach_item`` rows: per item, availability A_i = mean over the users it
    is a target for of ρ (baseline) and ρ* (maximum), the availability of a
    uniform recommender (mean 1/|T_u|), whether the item is effectively
    unavailable (max availability below uniform), and the share of those users
    who can put it on top (DESIGN §4.8). ``items`` as ``users`` in :func:`reach_user_table`.

    Targets are the unseen items outside the action set (DESIGN §4.8), so an
    item's figure stands for ``n_users`` users only: every one of the
    snapshot's users (``users``, one row each) either rated it (``n_rated``,
    from ``history``), holds it in their action set (``n_in_action_set``,
    popular items most often) or has it as a target. ``thin`` flags
    n_users < ``thin_users`` (30 by default: below that a mean over users is
    too noisy to rank or compare items, as with
    ``estimation.min_expected_positives``); an item with no target user has
    no availability (null, with the reason) and is thin."""
    per = (
        problems.with_columns(uniform=1.0 / pl.col("n_targets"))
        .group_by("item")
        .agg(
            n_users=pl.len(),
            availability_base=pl.col("rho_base").mean(),
            availability_max=pl.col("rho_max").mean(),
            availability_uniform=pl.col("uniform").mean(),
            top1_reachable_share=pl.col("top1").mean(),
        )
    )
    base = items.with_row_index("item").with_columns(pl.col("item").cast(pl.Int64), _attributes_json(items, attributes))
    out = base.select("item", "item_id", "attributes").join(per, on="item", how="left")
    pairs = np.unique(history.users.astype(np.int64) * items.height + history.items)  # each (user, item) once
    rated = np.bincount(pairs % items.height, minlength=items.height)
    out = out.with_columns(
        ds=pl.lit(ds),
        n_users=pl.col("n_users").fill_null(0).cast(pl.Int64),
        n_rated=pl.Series(rated[out.get_column("item").to_numpy()], dtype=pl.Int64),
        unavailable=pl.col("availability_max") < pl.col("availability_uniform"),
    ).with_columns(
        n_in_action_set=pl.lit(users.height, dtype=pl.Int64) - pl.col("n_users") - pl.col("n_rated"),
        thin=pl.col("n_users") < thin_users,
        thin_users=pl.lit(int(thin_users), dtype=pl.Int64),
        beta=pl.lit(float(beta)),
        budget=pl.lit(int(budget), dtype=pl.Int64),
        reason=pl.when(pl.col("availability_base").is_null()).then(
            pl.lit("a target of no user: every user rated it or acts on it")
        ),
    )
    return out.select(list(polars_schema("reach_item"))).cast(polars_schema("reach_item")).sort("item_id")
