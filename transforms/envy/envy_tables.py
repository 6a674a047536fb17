"""The envy-freeness tables of a day (DESIGN §3, §4.7; seed 004) from counts.

Pure: the counts come from the count stage (sql/envy_group_counts.sql,
sql/envy_user_counts.sql); the estimators are in :mod:`fairmon.transforms.envy.certify`.
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from fairmon.transforms.envy.certify import audit_verdict, ocef_decisions
from fairmon.transforms.envy.group import group_envy
from fairmon.transforms.registry import polars_schema


def group_envy_table(
    counts: pl.DataFrame,
    ds: dt.date,
    window_start: dt.date,
    *,
    epsilon: float,
    delta: float,
    level: float = 0.95,
) -> pl.DataFrame:
    """Rows of ``group_envy`` for day ``ds`` (:func:`fairmon.transforms.envy.group.group_envy` per attribute).

    ``counts``: columns attribute, group, donor_group (the serving donor's
    group of a swap row; null for default traffic, used only by the
    own-policy diagnostic), is_day (the row counts rows of ``ds`` itself; the others are
    earlier days of the window), n, n_pos. The window (everything from
    ``window_start``) gives the anytime bounds, the day the normal interval;
    a pair with window rows but none on the day has NaN day estimates.
    Returns a frame with the registry schema (empty when no group has same-group
    swap rows: Def. B.1 needs U(g, g) from them, seed 004 App. B).
    """
    schema = polars_schema("group_envy")
    frames = []
    for (attribute,), part in counts.partition_by("attribute", as_dict=True, maintain_order=True).items():
        window = part.group_by("group", "donor_group").agg(pl.col("n").sum(), pl.col("n_pos").sum())
        day = part.filter(pl.col("is_day")).select("group", "donor_group", "n", "n_pos")
        out = group_envy(day, window, epsilon=epsilon, delta=delta, level=level)
        if out.height:
            frames.append(
                out.with_columns(
                    pl.lit(ds).alias("ds"),
                    pl.lit(attribute).alias("attribute"),
                    pl.lit(window_start).alias("window_start"),
                    pl.lit(epsilon).alias("epsilon"),
                    pl.lit(level).alias("level"),
                )
            )
    if not frames:
        return pl.DataFrame(schema=schema)
    return pl.concat(frames, how="vertical_relaxed").select(list(schema)).cast(schema)


def envy_user_tables(
    counts: pl.DataFrame,
    ds: dt.date,
    window_start: dt.date,
    *,
    epsilon: float,
    delta: float,
    lam: float,
    gamma: float,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Rows of ``envy_user`` and ``envy_audit`` for day ``ds`` (seed 004 Alg. 1–2).

    ``counts``: per target user and serving policy (sql/envy_user_counts.sql:
    user_id, donor (null = own policy), n, reward_sum), accumulated since
    ``window_start``. Every target's certificate runs at δ/(3·max(M̃,
    targets)) (Alg. 2 line 4; more targets only tighten it) and AUDIT's
    verdict follows (:func:`fairmon.transforms.envy.certify.audit_verdict`). Without
    any target the audit row says ``undecided`` with the reason.
    Returns (envy_user, envy_audit) with the registry schemas.
    """
    from fairmon.transforms.envy.certify import audit_sizes

    m_tilde, _ = audit_sizes(delta, lam, gamma)
    targets = counts.get_column("user_id").n_unique() if counts.height else 0
    delta_user = delta / (3 * max(m_tilde, targets))
    users = ocef_decisions(counts, delta=delta_user, epsilon=epsilon)
    audit = audit_verdict(users, delta=delta, lam=lam, gamma=gamma)
    user_schema = polars_schema("envy_user")
    user_rows = users.with_columns(
        pl.lit(ds).alias("ds"),
        pl.col("user_id").cast(pl.String),
        pl.lit(window_start).alias("window_start"),
        pl.lit(delta_user).alias("delta_user"),
    )
    user_rows = user_rows.select(list(user_schema)).cast(user_schema)
    audit_schema = polars_schema("envy_audit")
    row = {
        "ds": ds,
        "window_start": window_start,
        **{k: audit[k] for k in ("M_tilde", "K", "targets", "min_donors", "design_ok", "design_reason")},
        **{k: audit[k] for k in ("n_envy", "n_eps_no_envy", "n_undecided")},
        "epsilon": epsilon,
        "delta": delta,
        "lambda_share": lam,
        "gamma_share": gamma,
        "verdict": audit["verdict"],
    }
    if not targets:
        row["design_reason"] = "no swap rows since window_start: no target users to audit"
    return user_rows, pl.DataFrame([row], schema=audit_schema)
