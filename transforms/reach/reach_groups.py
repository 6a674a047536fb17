"""The ``reach_group`` table: reachability and stability by item or user
attribute, group means with percentile-bootstrap CIs and gaps to the rest
(seed 003; DESIGN §3, §4.8). Pure: frames in, frames out, no I/O.
"""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import polars as pl

from fairmon.transforms.reach.reach_tables import has_reach
from fairmon.transforms.registry import (
    ATTR,
    CI_HIGH,
    CI_LOW,
    DS,
    GROUP,
    LEVEL,
    REASON,
    Column,
    F,
    I,
    S,
    Table,
    declares,
    non_negative,
    polars_schema,
)

REACH_GROUP = Table(
    "reach_group",
    "Reachability and stability by item or user attribute: group means with CIs and gaps to the rest.",
    "seed 003; DESIGN §3, §4.8 (percentile bootstrap over items or users, SciPy)",
    ("ds", "side", "attribute", "group", "metric"),
    (
        DS,
        Column("side", S, "-", "`item` (units: items of reach_item) or `user` (users of reach_user/stability_user)."),
        ATTR,
        GROUP,
        Column("metric", S, "-", "Column of reach_item / reach_user, or `stability_lb_B<B>` / `noise_floor`."),
        Column("n", I, "units", "Items or users of the group with a defined value.", bounds=non_negative("n_in_range")),
        Column("mean", F, "as the metric", "Mean of the metric over the group's units."),
        Column("median", F, "as the metric", "Median over the group's units."),
        CI_LOW,
        CI_HIGH,
        Column("diff_vs_rest", F, "as the metric", "Group mean − mean of the other units."),
        Column("diff_ci_low", F, "as the metric", "Lower bound of the two-sample bootstrap CI of diff_vs_rest."),
        Column("diff_ci_high", F, "as the metric", "Upper bound of the two-sample bootstrap CI of diff_vs_rest."),
        LEVEL,
        REASON,
    ),
    "reach_group",
    section="reach",
)


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


def reach_group_options(cfg) -> dict:
    """The keyword arguments of :func:`reach_group_day` from the config."""
    rc = cfg.reach
    return {"level": cfg.estimation.confidence_level, "n_resamples": rc.bootstrap_resamples, "seed": rc.seed}


@declares(
    REACH_GROUP,
    stage="reach",
    inputs=("ds", "reach_user", "reach_item", "stability_user", "user_attributes", "item_attributes"),
    enabled=has_reach,
    options=reach_group_options,
)
def reach_group_day(
    ds: dt.date,
    reach_user: pl.DataFrame,
    reach_item: pl.DataFrame,
    stability_user: pl.DataFrame,
    user_attributes: list[str],
    item_attributes: list[str],
    **kw,
) -> pl.DataFrame:
    """The day's ``reach_group`` from the reach stage's earlier tables
    (:func:`reach_group_inputs`, then :func:`reach_group_table` with ``kw``)."""
    frames = reach_group_inputs(reach_user, reach_item, stability_user, user_attributes, item_attributes)
    return reach_group_table(ds, frames, **kw)


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
