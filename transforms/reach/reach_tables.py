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
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import polars as pl

from fairmon.transforms.reach.reachability import (
    BiasedMF,
    affine_scores,
    fit_biased_mf,
    max_reachability,
    softmax_probabilities,
    top1_reachable,
)
from fairmon.transforms.registry import polars_schema


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


def action_and_targets(pred_u: np.ndarray, hist: np.ndarray, budget: int) -> tuple[np.ndarray, np.ndarray]:
    """The action set A_u (the ``budget`` unseen items with the highest predicted
    ratings, DESIGN §4.8; ties broken by item index) and the targets T_u (the
    other unseen items) of one user; ``pred_u`` (I,) predicted ratings,
    ``hist`` the indices of the items the user rated. Returns two index
    arrays (≤ budget,) and (I − |hist| − |A_u|,). Raises nothing."""
    unseen = np.setdiff1d(np.arange(pred_u.size), hist)
    acts = unseen[np.argsort(-pred_u[unseen], kind="stable")[:budget]]
    return acts, np.setdiff1d(unseen, acts)


def reach_problems(
    model: BiasedMF,
    history: Ratings,
    *,
    beta: float,
    budget: int,
    r_min: float,
    r_max: float,
    progress: Callable[[int], None] | None = None,
) -> pl.DataFrame:
    """Every (user, target) problem of the snapshot (seed 003 Def. 1 in the
    computable form of DESIGN §4.8).

    For each user: actions A_u and targets T_u (:func:`action_and_targets`),
    baseline ρ_ui = π(i | a₀) at the model's own predictions a₀ (clipped to
    [r_min, r_max]), ρ*_ui (:func:`~fairmon.transforms.reach.reachability.max_reachability`)
    and top-1 reachability (:func:`~fairmon.transforms.reach.reachability.top1_reachable`).
    Returns columns user (index), item (index), n_targets, rho_base, rho_max,
    top1; one row per problem. ``progress`` is called with 1 after each user.
    Raises ValueError when r_max < r_min or β < 0.
    """
    pred = model.predict()
    parts = []
    for u in range(pred.shape[0]):
        hist, hr = history.of_user(u)
        acts, targ = action_and_targets(pred[u], hist, budget)
        if targ.size:
            B, c = affine_scores(model, hist, hr, acts, targ)
            base = softmax_probabilities(B, c, np.clip(pred[u, acts], r_min, r_max), beta)
            rho, best = max_reachability(B, c, beta, r_min, r_max)
            top1 = top1_reachable(B, c, r_min, r_max, start=(beta, best))
            parts.append(
                pl.DataFrame(
                    {
                        "user": np.full(targ.size, u, dtype=np.int64),
                        "item": targ.astype(np.int64),
                        "n_targets": np.full(targ.size, targ.size, dtype=np.int64),
                        "rho_base": base,
                        "rho_max": np.maximum(rho, base),  # the solver's optimum is never below a feasible point
                        "top1": top1,
                    }
                )
            )
        if progress is not None:
            progress(1)
    schema = {
        "user": pl.Int64,
        "item": pl.Int64,
        "n_targets": pl.Int64,
        "rho_base": pl.Float64,
        "rho_max": pl.Float64,
        "top1": pl.Boolean,
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


def reach_item_table(
    ds: dt.date, problems: pl.DataFrame, items: pl.DataFrame, attributes: list[str], beta: float, budget: int
) -> pl.DataFrame:
    """``reach_item`` rows: per item, availability A_i = mean over the users it
    is a target for of ρ (baseline) and ρ* (maximum), the availability of a
    uniform recommender (mean 1/|T_u|), whether the item is effectively
    unavailable (max availability below uniform), and the share of those users
    who can put it on top (DESIGN §4.8). ``items`` as ``users`` in :func:`reach_user_table`."""
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
    out = out.with_columns(
        ds=pl.lit(ds),
        n_users=pl.col("n_users").fill_null(0).cast(pl.Int64),
        unavailable=pl.col("availability_max") < pl.col("availability_uniform"),
        beta=pl.lit(float(beta)),
        budget=pl.lit(int(budget), dtype=pl.Int64),
        reason=pl.when(pl.col("availability_base").is_null()).then(
            pl.lit("a target of no user: every user rated it or acts on it")
        ),
    )
    return out.select(list(polars_schema("reach_item"))).cast(polars_schema("reach_item")).sort("item_id")


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
    not in 1..(users − 1) or ``perturbations`` < 1.
    """
    n_users = users.height
    budgets = sorted(set(int(b) for b in budgets))
    if perturbations < 1:
        raise ValueError("perturbations must be >= 1")
    if any(b < 1 or b >= n_users for b in budgets):
        raise ValueError(f"stability budgets must be in 1..{n_users - 1}, got {budgets}")
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


def _diff_of_means(x, y, axis=-1):
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def _mean(x, axis=-1):
    return np.mean(x, axis=axis)


def group_summary(
    values: np.ndarray, in_group: np.ndarray, *, level: float, n_resamples: int, seed: int
) -> dict[str, float | int | str | None]:
    """Mean, median and percentile-bootstrap CI (SciPy ``bootstrap``) of
    ``values`` (n,) over the units ``in_group`` (n,) bool, and the difference
    of its mean from the other units' mean with a two-sample bootstrap CI
    (units resampled within each side; DESIGN §3 reach_group). NaN values are
    left out. Fewer than 2 units on a side leave that CI NaN with a reason.
    Returns a dict of the reach_group columns n … diff_ci_high and reason.
    Raises ValueError (SciPy's) for a level outside (0, 1)."""
    from scipy import stats  # imported here, not at the top (fairmon.transforms)

    ok = ~np.isnan(values)
    x, y = values[ok & in_group], values[ok & ~in_group]
    out: dict = {
        "n": int(x.size),
        "mean": float(x.mean()) if x.size else float("nan"),
        "median": float(np.median(x)) if x.size else float("nan"),
        "ci_low": float("nan"),
        "ci_high": float("nan"),
        "diff_vs_rest": float(x.mean() - y.mean()) if x.size and y.size else float("nan"),
        "diff_ci_low": float("nan"),
        "diff_ci_high": float("nan"),
        "reason": None,
    }
    common = {"confidence_level": level, "n_resamples": n_resamples, "method": "percentile", "vectorized": True}
    if x.size >= 2:
        ci = stats.bootstrap((x,), _mean, rng=np.random.default_rng(seed), **common).confidence_interval
        out["ci_low"], out["ci_high"] = float(ci.low), float(ci.high)
    if x.size >= 2 and y.size >= 2:
        ci = stats.bootstrap((x, y), _diff_of_means, rng=np.random.default_rng(seed + 1), **common).confidence_interval
        out["diff_ci_low"], out["diff_ci_high"] = float(ci.low), float(ci.high)
    else:
        out["reason"] = f"{x.size} unit(s) in the group and {y.size} outside: no bootstrap interval from fewer than 2"
    return out


def reach_group_table(
    ds: dt.date,
    frames: dict[str, tuple[pl.DataFrame, list[str], list[str]]],
    *,
    level: float,
    n_resamples: int = 2000,
    seed: int = 0,
) -> pl.DataFrame:
    """``reach_group`` rows: for each side (``item`` | ``user``), attribute,
    group and metric, the group's n, mean, median and bootstrap CI over its
    units (items or users), and its difference from the rest of the units
    with a CI (:func:`group_summary`).

    ``frames`` maps a side to (unit frame with the metric columns and the
    attributes as JSON in ``attributes``, attribute names, metric names); a
    boolean metric is summarised as a share; a null attribute value is the
    group ``(missing)``, as in group_counts."""
    rows = []
    for side, (frame, attributes, metrics) in frames.items():
        attrs = [json.loads(x) for x in frame.get_column("attributes").to_list()]
        for attribute in attributes:
            labels = np.array(
                ["(missing)" if a.get(attribute) is None else str(a.get(attribute)) for a in attrs], dtype=object
            )
            for metric in metrics:
                values = frame.get_column(metric).cast(pl.Float64).fill_null(float("nan")).to_numpy()
                for k, group in enumerate(sorted(set(labels))):
                    s = group_summary(values, labels == group, level=level, n_resamples=n_resamples, seed=seed + k)
                    rows.append({"side": side, "attribute": attribute, "group": group, "metric": metric, **s})
    schema = polars_schema("reach_group")
    if not rows:
        return pl.DataFrame(schema=schema)
    out = pl.DataFrame(rows).with_columns(ds=pl.lit(ds), level=pl.lit(float(level)))
    return out.select(list(schema)).cast(schema)


ITEM_METRICS = ("availability_base", "availability_max", "top1_reachable_share", "unavailable")
USER_METRICS = ("discovery_base", "discovery_max", "mean_lift", "mean_gain", "top1_reachable_share")


def reach_group_inputs(
    reach_user: pl.DataFrame,
    reach_item: pl.DataFrame,
    stability_user: pl.DataFrame,
    user_attributes: list[str],
    item_attributes: list[str],
) -> dict[str, tuple[pl.DataFrame, list[str], list[str]]]:
    """The ``frames`` argument of :func:`reach_group_table`: items with
    :data:`ITEM_METRICS`; users with :data:`USER_METRICS`, their
    ``stability_lb_B<B>`` for each budget and ``noise_floor``."""
    users = reach_user
    metrics = list(USER_METRICS)
    if stability_user.height:
        wide = stability_user.pivot(on="B", index="user_id", values="stability_lb")
        wide = wide.rename({c: f"stability_lb_B{c}" for c in wide.columns if c != "user_id"})
        floor = stability_user.group_by("user_id").agg(pl.col("noise_floor").first())
        users = users.join(wide, on="user_id", how="left").join(floor, on="user_id", how="left")
        budgets = sorted(stability_user.get_column("B").unique().to_list())
        metrics += [f"stability_lb_B{b}" for b in budgets] + ["noise_floor"]
    return {
        "item": (reach_item, item_attributes, list(ITEM_METRICS)),
        "user": (users, user_attributes, metrics),
    }
