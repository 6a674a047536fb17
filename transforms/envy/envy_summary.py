"""The day's degree of envy (seed 004 §5.1): average envy and the share of ε-envious users, with bounds.

Pure: computed from the day's ``envy_user`` rows (OCEF's certificates,
:mod:`fairmon.transforms.envy.envy_tables`). §5.1 measures a system by
Δ^m = max(max_n u^m(π^n) − u^m(π^m), 0) per user: its mean over the users
(average envy) and the share of users with Δ^m > ε. From logs, user m's
certificate gives u^m(π^m) and u^m(π^n) for the donors n that served it,
each with Lemma 4's anytime bounds, all of m's arms at once at δ_user
(Alg. 1's union over the arms). So per target

* Δ̂^m = max(best donor mean − own mean, 0), the plug-in;
* Δ^m ≥ max(max donor lower − own upper, 0) and
  Δ^m ≤ max(max donor upper − own lower, 0) on the certificate's event;

and the means of these bounds, and the shares of targets whose lower (upper)
bound exceeds ε, bound the average envy and the ε-envious share of the
targets together with probability at least ``confidence`` = 1 − Σ δ_user
(a union bound over the day's targets; AUDIT's δ/(3·max(M̃, targets)) each
makes it ≥ 1 − δ/3). Lemma 4's bounds hold at every t at once, so this holds
on every day at once while the targets and each target's donors stay the
same; a target or donor that comes later is certified at that day's δ_user,
and the days before and after it together hold with a little less.

What is estimated: the targets' average over the donors that served them.
§5.1 takes the max over every user's policy, so with few donors Δ^m here is
the envy towards the logged donors, a lower bound of §5.1's; the targets are
AUDIT's uniform sample of users, not every user.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl

from fairmon.transforms.envy.envy_tables import has_envy
from fairmon.transforms.registry import (
    DS,
    REASON,
    Column,
    D,
    F,
    I,
    Table,
    declares,
    non_negative,
    polars_schema,
    probability,
)

ENVY_SUMMARY = Table(
    "envy_summary",
    "The day's degree of envy among the audited users: average envy and the share of ε-envious users, "
    "each with bounds from OCEF's certificates (Δ over the donors that served each user).",
    "seed 004 §5.1 (average envy, share of ε-envious users), Lemma 4, Alg. 2 line 4",
    ("ds", "window_start"),
    (
        DS,
        Column("window_start", D, "date", "First day of the audit (config `envy.start`)."),
        Column("targets", I, "users", "Target users with a certificate.", bounds=non_negative("targets_non_negative")),
        Column(
            "users_measured",
            I,
            "users",
            "Targets with own-policy rows and at least one donor (the others have no Δ yet).",
            bounds=non_negative("users_measured_non_negative"),
        ),
        Column("epsilon", F, "mean reward", "ε of an ε-envious user (config `envy.epsilon`)."),
        Column("average_envy", F, "mean reward", "Mean over the measured targets of Δ̂ = max(best donor − own, 0)."),
        Column("average_envy_lower", F, "mean reward", "Mean of the targets' lower bounds of Δ."),
        Column("average_envy_upper", F, "mean reward", "Mean of the targets' upper bounds of Δ."),
        Column(
            "share_envious",
            F,
            "share",
            "Share of the measured targets with Δ̂ > ε.",
            bounds=probability("share_envious_is_share"),
        ),
        Column(
            "share_envious_lower",
            F,
            "share",
            "Share of the measured targets whose lower bound of Δ exceeds ε (certified ε-envious).",
            bounds=probability("share_envious_lower_is_share"),
        ),
        Column(
            "share_envious_upper",
            F,
            "share",
            "Share of the measured targets whose upper bound of Δ exceeds ε (not certified free of ε-envy).",
            bounds=probability("share_envious_upper_is_share"),
        ),
        Column(
            "confidence",
            F,
            "probability",
            "Probability that every bound of the day holds: 1 − Σ δ_user (union over the targets); on every day at "
            "once while the targets and their donors stay the same.",
            bounds=probability("confidence_is_probability"),
        ),
        REASON,
    ),
    "envy_summary",
    section="envy",
)


def envy_summary_options(cfg) -> dict:
    """The keyword arguments of :func:`envy_summary` from ``[envy]``: ε."""
    return {"epsilon": cfg.envy.epsilon}


@declares(
    ENVY_SUMMARY,
    stage="envy",
    inputs=("envy_user", "ds", "window_start"),
    enabled=has_envy,
    options=envy_summary_options,
)
def envy_summary(envy_user: pl.DataFrame, ds: dt.date, window_start: dt.date, *, epsilon: float) -> pl.DataFrame:
    """The ``envy_summary`` row of day ``ds`` (module docstring; seed 004 §5.1, Lemma 4).

    ``envy_user``: the day's certificates, one row per target (columns
    ``mean_own``, ``lower_own``, ``upper_own``, ``best_donor_mean``,
    ``max_donor_lower``, ``max_donor_upper`` in [0, 1] or NaN/null, and
    ``delta_user``). ``epsilon`` ≥ 0 in mean reward. Targets without own rows
    or without a donor are counted in ``targets`` but not measured; with none
    measured every estimate is NaN and ``reason`` says why. Returns one row
    with the registry schema. Raises ValueError for a negative ``epsilon``.
    """
    if not epsilon >= 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon}")
    cols = ("mean_own", "lower_own", "upper_own", "best_donor_mean", "max_donor_lower", "max_donor_upper")
    values = {c: envy_user.get_column(c).cast(pl.Float64).fill_null(np.nan).to_numpy() for c in cols}
    measured = np.isfinite(values["mean_own"]) & np.isfinite(values["best_donor_mean"])
    v = {c: x[measured] for c, x in values.items()}
    envy = np.maximum(v["best_donor_mean"] - v["mean_own"], 0.0)
    lower = np.maximum(v["max_donor_lower"] - v["upper_own"], 0.0)
    upper = np.maximum(v["max_donor_upper"] - v["lower_own"], 0.0)
    m, targets = int(measured.sum()), envy_user.height
    nan = float("nan")
    reasons = []
    if m == 0:
        reasons.append("no target has own-policy rows and a donor yet: no envy measured")
    elif m < targets:
        reasons.append(f"{targets - m} of {targets} targets lack own-policy rows or a donor and are left out")
    row = {
        "ds": ds,
        "window_start": window_start,
        "targets": targets,
        "users_measured": m,
        "epsilon": float(epsilon),
        "average_envy": float(envy.mean()) if m else nan,
        "average_envy_lower": float(lower.mean()) if m else nan,
        "average_envy_upper": float(upper.mean()) if m else nan,
        "share_envious": float((envy > epsilon).mean()) if m else nan,
        "share_envious_lower": float((lower > epsilon).mean()) if m else nan,
        "share_envious_upper": float((upper > epsilon).mean()) if m else nan,
        "confidence": max(0.0, 1.0 - float(envy_user.get_column("delta_user").sum())) if targets else nan,
        "reason": "; ".join(reasons) or None,
    }
    return pl.DataFrame([row], schema=polars_schema("envy_summary"))
