"""Reachability at several softmax temperatures β (DESIGN §4.8; Curmei, Dean and Recht, ICML 2021).

Pure: the problems frame of :func:`fairmon.transforms.reach.reach_tables.reach_problems`
in, one summary row per β out. Why several β: seed 003 leaves the
recommender's randomness open (Def. 1 takes the probability under the
recommender), and the stochastic form of DESIGN §4.8 needs a selection rule;
the softmax's β decides how concentrated it is. Curmei, Dean and Recht
report reachability at β ∈ {1, 2, 4, 10} on rating scales like Coat's (their
code's default is 1), and the conclusions move with β (bench/README.md,
"reach_beta"), so the table shows the configured β beside theirs.
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from fairmon.transforms.reach.reach_tables import beta_columns, has_reach
from fairmon.transforms.registry import (
    DS,
    REASON,
    B,
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

#: The β grid of Curmei, Dean and Recht's experiments (their code's run_experiments.py; default 1).
PAPER_BETAS = (1.0, 2.0, 4.0, 10.0)
#: Where the β values beside the configured one come from.
PAPER_SOURCE = "Curmei, Dean and Recht (ICML 2021): β ∈ {1, 2, 4, 10}"

REACH_BETA = Table(
    "reach_beta",
    "Reachability of a model snapshot at the configured softmax β and at the β values of Curmei et al.",
    "seed 003 Def. 1; DESIGN §4.8; Curmei, Dean and Recht (ICML 2021) β grid",
    ("ds", "beta"),
    (
        DS,
        Column("beta", F, "1/rating", "Softmax inverse temperature β of this row.", nullable=False),
        Column("is_default", B, "-", "β is the configured one (`reach.beta`): reach_user and reach_item use it."),
        Column("source", S, "-", "Why this β: the config, or the grid of `reach.betas`."),
        Column(
            "n_problems",
            I,
            "(user, item)",
            "Reachability problems: every target of every user.",
            bounds=non_negative("n_problems_in_range"),
        ),  # fmt: skip
        Column(
            "rho_max_largest",
            F,
            "probability",
            "Largest ρ* over every (user, target).",
            bounds=probability("rho_max_largest_in_range"),
        ),  # fmt: skip
        Column(
            "rho_max_mean",
            F,
            "probability",
            "Mean ρ* over every (user, target).",
            bounds=probability("rho_max_mean_in_range"),
        ),  # fmt: skip
        Column(
            "uniform_mean",
            F,
            "probability",
            "Mean 1/|T_u| over the same problems (a uniform recommender).",
            bounds=probability("uniform_mean_in_range"),
        ),  # fmt: skip
        Column(
            "n_items",
            I,
            "items",
            "Items with at least one target user (their availability is defined).",
            bounds=non_negative("n_items_in_range"),
        ),  # fmt: skip
        Column(
            "availability_max_largest",
            F,
            "probability",
            "Largest item availability (mean ρ* over its users).",
            bounds=probability("availability_max_largest_in_range"),
        ),  # fmt: skip
        Column(
            "items_unavailable",
            I,
            "items",
            "Items whose availability is below a uniform recommender's.",
            bounds=non_negative("items_unavailable_in_range"),
        ),  # fmt: skip
        Column(
            "discovery_base_mean",
            F,
            "share",
            "Mean over users of the share of targets with ρ > 1/|T_u|.",
            bounds=probability("discovery_base_mean_in_range"),
        ),  # fmt: skip
        Column(
            "discovery_max_mean",
            F,
            "share",
            "Mean over users of the share of targets with ρ* > 1/|T_u|.",
            bounds=probability("discovery_max_mean_in_range"),
        ),  # fmt: skip
        Column("budget", I, "items", "K: size of the action set (config `reach.budget`)."),
        REASON,
    ),
    None,
    section="reach",
)


def reach_beta_options(cfg) -> dict:
    """The keyword arguments of :func:`reach_beta_table` from ``[reach]``."""
    return {"beta": cfg.reach.beta, "betas": tuple(cfg.reach.betas), "budget": cfg.reach.budget}


def _summary(problems: pl.DataFrame, base: str, best: str) -> dict:
    p = problems.with_columns(uniform=1.0 / pl.col("n_targets"))
    # groups in order of first appearance: a mean over the groups then adds in the same order on every run
    # (Polars' hash group-by returns its groups in an order that varies between runs: the last digit of
    # discovery_*_mean did)
    items = p.group_by("item", maintain_order=True).agg(a=pl.col(best).mean(), u=pl.col("uniform").mean())
    users = p.group_by("user", maintain_order=True).agg(
        db=(pl.col(base) > pl.col("uniform")).mean(), dm=(pl.col(best) > pl.col("uniform")).mean()
    )
    return {
        "n_problems": p.height,
        "rho_max_largest": p.get_column(best).max(),
        "rho_max_mean": p.get_column(best).mean(),
        "uniform_mean": p.get_column("uniform").mean(),
        "n_items": items.height,
        "availability_max_largest": items.get_column("a").max(),
        "items_unavailable": int((items.get_column("a") < items.get_column("u")).sum()),
        "discovery_base_mean": users.get_column("db").mean(),
        "discovery_max_mean": users.get_column("dm").mean(),
    }


@declares(REACH_BETA, stage="reach", inputs=("ds", "problems"), enabled=has_reach, options=reach_beta_options)
def reach_beta_table(
    ds: dt.date, problems: pl.DataFrame, *, beta: float, betas: tuple[float, ...], budget: int
) -> pl.DataFrame:
    """``reach_beta`` rows: one per β of {``beta``} ∪ ``betas`` in increasing
    order, from ``problems`` (:func:`~fairmon.transforms.reach.reach_tables.reach_problems`
    run with the same ``betas``: columns rho_base/rho_max at ``beta``, and
    :func:`~fairmon.transforms.reach.reach_tables.beta_columns` for the others).
    Per β: the largest and mean ρ* against the uniform 1/|T_u|, the items
    with a target user, the largest item availability and the items below
    uniform, the users' mean discovery at baseline and at best (DESIGN §4.8).
    Without problems every figure is null, with the reason. Raises Polars'
    ColumnNotFoundError when ``problems`` lacks a β's columns."""
    rows = []
    for b in sorted({float(beta), *map(float, betas)}):
        default = b == float(beta)
        base, best = ("rho_base", "rho_max") if default else beta_columns(b)
        paper = b in PAPER_BETAS
        if default:
            source = "config reach.beta" + (f"; in the grid of {PAPER_SOURCE}" if paper else "")
        else:
            source = PAPER_SOURCE if paper else "config reach.betas"
        row = {"ds": ds, "beta": b, "is_default": default, "source": source, "budget": int(budget), "reason": None}
        if problems.height:
            row |= _summary(problems, base, best)
        else:
            row["reason"] = "no reachability problems: no user has a target item"
        rows.append(row)
    schema = polars_schema("reach_beta")
    return pl.DataFrame(rows, schema=schema).select(list(schema))
