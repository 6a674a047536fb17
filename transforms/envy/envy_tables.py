"""The envy-freeness tables of a day (DESIGN §3, §4.7; seed 004) from counts.

Pure: the counts come from the count stage (sql/envy_user_counts.sql); the
estimators are in :mod:`fairmon.transforms.envy.certify`. ``group_envy`` is
declared and computed in :mod:`fairmon.transforms.envy.group`.
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from fairmon.transforms.envy.certify import audit_verdict, ocef_decisions
from fairmon.transforms.registry import (
    DS,
    REASON,
    B,
    Bounds,
    Column,
    D,
    F,
    I,
    S,
    Table,
    declares,
    non_negative,
    polars_schema,
    probability,
)


def has_envy(cfg) -> bool:
    """Whether the config runs the envy-freeness audit (DESIGN §4.7)."""
    return cfg.envy is not None


ENVY_USER = Table(
    "envy_user",
    "Per target user: OCEF's certificate from the accumulated own-policy and swap rows.",
    "seed 004 Alg. 1 lines 7–9, Lemma 4, Alg. 2; DESIGN §4.7",
    ("ds", "user_id"),
    (
        DS,
        Column("user_id", S, "-", "Target user (a user with swap rows since window_start)."),
        Column("window_start", D, "date", "First day of the audit (config `envy.start`)."),
        Column(
            "n_donors",
            I,
            "users",
            "Donors whose policies served the user.",
            bounds=non_negative("n_donors_non_negative"),
        ),
        Column("n_own", I, "rows", "Own-policy rows accumulated.", bounds=non_negative("n_own_non_negative")),
        Column(
            "mean_own",
            F,
            "mean reward",
            "Mean reward under the user's own policy.",
            bounds=probability("mean_own_is_mean_reward"),
        ),
        Column("lower_own", F, "mean reward", "Lemma 4 lower bound of the own policy's mean."),
        Column("upper_own", F, "mean reward", "Lemma 4 upper bound of the own policy's mean."),
        Column("best_donor_mean", F, "mean reward", "Largest mean reward under a donor's policy."),
        Column("max_donor_lower", F, "mean reward", "Largest lower bound among the donors."),
        Column("max_donor_upper", F, "mean reward", "Largest upper bound among the donors."),
        Column(
            "delta_user",
            F,
            "probability",
            "δ of this certificate: δ/(3·targets) (Alg. 2 line 4).",
            bounds=probability("delta_user_is_probability"),
        ),
        Column("decision", S, "-", "`envy`, `eps_no_envy` or `undecided` (OCEF's stopping rules)."),
        REASON,
    ),
    "envy_user",
)

ENVY_AUDIT = Table(
    "envy_audit",
    "The day's AUDIT verdict on the whole system: (ε, γ, λ)-envy-free, not envy-free, or undecided.",
    "seed 004 Alg. 2, Th. 2, Def. 3.2; DESIGN §4.7",
    ("ds", "window_start"),
    (
        DS,
        Column("window_start", D, "date", "First day of the audit (config `envy.start`)."),
        Column(
            "M_tilde",
            I,
            "users",
            "Target users AUDIT needs: ⌈log(3/δ)/λ⌉.",
            bounds=Bounds("M_tilde_positive", min_value=1),
        ),
        Column(
            "K",
            I,
            "users",
            "Donors per target AUDIT needs: ⌈log(3M̃/δ)/log(1/(1−γ))⌉.",
            bounds=Bounds("K_positive", min_value=1),
        ),
        Column(
            "targets",
            I,
            "users",
            "Target users logged since window_start.",
            bounds=non_negative("targets_non_negative"),
        ),
        Column("min_donors", I, "users", "Fewest donors of a target."),
        Column("design_ok", B, "-", "Enough targets and donors per target (uniform draws are assumed)."),
        Column("design_reason", S, "-", "What the logged design lacks, or that it suffices."),
        Column("n_envy", I, "users", "Targets certified envious."),
        Column("n_eps_no_envy", I, "users", "Targets certified ε-free of envy."),
        Column("n_undecided", I, "users", "Targets not yet decided."),
        Column("epsilon", F, "mean reward", "ε (config `envy.epsilon`)."),
        Column("delta", F, "probability", "δ of the audit (config `envy.delta`)."),
        Column("lambda_share", F, "share", "λ: share of users allowed to be (ε, γ)-envious (config `envy.lambda`)."),
        Column("gamma_share", F, "share", "γ: share of other users a user may envy (config `envy.gamma`)."),
        Column(
            "verdict",
            S,
            "-",
            "`not_envy_free` (a target is envious), `envy_free` (certified (ε, γ, λ)) or `undecided`.",
        ),
    ),
    "envy_audit",
    summary=True,
    section="envy",
)


def envy_user_options(cfg) -> dict:
    """The keyword arguments of :func:`envy_user_tables` from ``[envy]`` (OCEF's ε, δ and AUDIT's λ, γ)."""
    env = cfg.envy
    return {"epsilon": env.epsilon, "delta": env.delta, "lam": env.lam, "gamma": env.gamma}


@declares(
    ENVY_USER,
    ENVY_AUDIT,
    stage="envy",
    inputs=("counts", "ds", "window_start"),
    enabled=has_envy,
    options=envy_user_options,
)
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
