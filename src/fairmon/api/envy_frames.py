"""The envy audit on a frame of swap rows (seed 004 Alg. 1–2; DESIGN §4.7):
per target user, the rewards under its own policy and under each donor's,
counted as ``sql/envy_user_counts.sql`` counts staged rows, then the
pipeline's certificates
(:func:`fairmon.transforms.envy.envy_tables.envy_user_tables`)."""

from __future__ import annotations

from typing import Any

import polars as pl

from fairmon.api.counting import UNDATED
from fairmon.api.frames import as_caller, as_polars, require_columns
from fairmon.transforms.contract_values import parse_float
from fairmon.transforms.envy.envy_tables import envy_user_tables

#: Columns of :func:`envy_users`' result.
ENVY_USER_COLUMNS = ("user_id", "n_donors", "n_own", "mean_own", "lower_own", "upper_own")
ENVY_USER_COLUMNS += ("best_donor_mean", "max_donor_lower", "max_donor_upper", "delta_user", "decision", "reason")
#: Columns of :func:`envy_audit`'s result.
ENVY_AUDIT_COLUMNS = ("M_tilde", "K", "targets", "min_donors", "design_ok", "design_reason", "n_envy")
ENVY_AUDIT_COLUMNS += ("n_eps_no_envy", "n_undecided", "epsilon", "delta", "lambda_share", "gamma_share", "verdict")


def user_arm_counts(frame: pl.DataFrame, *, user: str, donor: str, reward: str) -> pl.DataFrame:
    """Pulls ``n`` and ``reward_sum`` per target user and serving policy
    (``donor`` null, or the user itself, = own policy), for users with at
    least one donor row. Raises ValueError for a missing column, a reward that
    is not a number in [0, 1] (naming the row) or a null user."""
    require_columns(frame, [user, donor, reward])
    r = parse_float(frame.get_column(reward), file="rows", column=reward)
    bad = r.is_null() | (r < 0) | (r > 1)
    if bad.any():
        i = int(bad.arg_true()[0])
        raise ValueError(f"rows, column {reward!r}, row {i + 1}: reward must be a number in [0, 1], got {r[i]!r}")
    if frame.get_column(user).null_count():
        raise ValueError(f"rows, column {user!r}: null user id")
    rows = pl.DataFrame(
        [
            frame.get_column(user).cast(pl.String).alias("user_id"),
            frame.get_column(donor).cast(pl.String).alias("donor"),
            r.alias("reward"),
        ]
    ).with_columns(pl.when(pl.col("donor") == pl.col("user_id")).then(None).otherwise(pl.col("donor")).alias("donor"))
    counts = rows.group_by("user_id", "donor").agg(
        pl.len().cast(pl.Int64).alias("n"), pl.col("reward").sum().alias("reward_sum")
    )
    return counts.filter(pl.col("donor").is_not_null().any().over("user_id")).sort("user_id", "donor")


def _tables(rows, *, user, donor, reward, epsilon, delta, lam, gamma):
    frame, kind = as_polars(rows)
    counts = user_arm_counts(frame, user=user, donor=donor, reward=reward)
    users, audit = envy_user_tables(counts, UNDATED, UNDATED, epsilon=epsilon, delta=delta, lam=lam, gamma=gamma)
    return users, audit, kind


def envy_users(
    rows: Any, *, user: str, donor: str, reward: str, epsilon: float, delta: float, lam: float, gamma: float
) -> Any:
    """Per-user envy certificates (OCEF offline, seed 004 Alg. 1) inside AUDIT (Alg. 2).

    ``rows``: a pandas, Polars or PyArrow frame, one row per logged
    recommendation to a target user: ``user`` (the target user m), ``donor``
    (whose policy served the row: null or m itself for m's own policy, another
    user n for a swap row) and ``reward`` (a number in [0, 1], e.g. an engagement
    given as 0/1). Users without any donor row are not targets.
    ``epsilon``: the envy margin (reward units), in (0, 1]; ``delta``: the
    audit's error probability, in (0, 1/2) (Th. 2); ``lam`` (λ): the share of
    users allowed to be envious; ``gamma`` (γ): the share of other users one
    may envy; both in (0, 1).

    Returns a frame of the caller's kind, one row per target user, columns
    :data:`ENVY_USER_COLUMNS`: donors, own pulls and mean reward with its
    anytime bounds (Lemma 4), the best donor's mean and bounds, the δ each
    certificate ran at (δ/(3·max(M̃, targets))) and the ``decision``:
    ``envy`` (a donor's lower bound above the own upper bound),
    ``eps_no_envy`` (every donor's upper bound ≤ own lower bound + ε) or
    ``undecided``, with a reason.

    Raises ValueError for a missing column (naming it and the columns
    present), a reward outside [0, 1], a null user, ε outside (0, 1] (NaN
    included), δ outside (0, 1/2), or λ, γ outside (0, 1).

    Source: seed 004 Alg. 1–2, Lemma 4, Th. 2 (DESIGN §4.7).
    """
    users, _, kind = _tables(
        rows, user=user, donor=donor, reward=reward, epsilon=epsilon, delta=delta, lam=lam, gamma=gamma
    )
    return as_caller(users.select(ENVY_USER_COLUMNS), kind)


def envy_audit(
    rows: Any, *, user: str, donor: str, reward: str, epsilon: float, delta: float, lam: float, gamma: float
) -> Any:
    """The system's (ε, γ, λ)-envy-freeness verdict from AUDIT (seed 004 Alg. 2, Def. 3.2, Th. 2).

    Inputs as :func:`envy_users`. Raises ValueError as :func:`envy_users`
    does. Returns a one-row frame of the
    caller's kind, columns :data:`ENVY_AUDIT_COLUMNS`: M̃ = ⌈log(3/δ)/λ⌉
    target users and K = ⌈log(3M̃/δ)/log(1/(1−γ))⌉ donors each that AUDIT
    needs, the targets logged and their fewest donors, ``design_ok`` with its
    reason, counts per decision, the parameters, and ``verdict``:
    ``not_envy_free`` when any target is certified envious, ``envy_free``
    when the design suffices and every target is ``eps_no_envy``, else
    ``undecided``.

    Source: seed 004 Alg. 2, Th. 2 (DESIGN §4.7).
    """
    _, audit, kind = _tables(
        rows, user=user, donor=donor, reward=reward, epsilon=epsilon, delta=delta, lam=lam, gamma=gamma
    )
    return as_caller(audit.select(ENVY_AUDIT_COLUMNS), kind)
