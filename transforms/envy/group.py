"""Group envy from swap traffic (seed 004 App. B: eq. 6, Def. B.1, Prop. 2; DESIGN §4.7).

Pure estimators on counts and the table they compute (:data:`GROUP_ENVY`,
declared with :func:`group_envy_table`); no I/O. Def. B.1 compares U(g, g'),
the mean reward of g's users served by the policy of a uniformly drawn member
of g' (eq. 6), with U(g, g), the same quantity at g' = g. Both come from swap
traffic: the (g, g') and (g, g) cells. The users' own policies (default
traffic) are not eq. 6's U(g, g) unless every group is a single user; their
comparison is kept as a named diagnostic only.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl

from fairmon.transforms.envy.envy_bounds import OMEGA, check_delta, confidence_bounds
from fairmon.transforms.envy.envy_tables import has_envy
from fairmon.transforms.registry import (
    CI_HIGH,
    CI_LOW,
    DS,
    LEVEL,
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
from fairmon.transforms.reo.multiplicity import bh_q_values

NEED = ("group", "donor_group", "n", "n_pos")


def _cells(f: pl.DataFrame) -> pl.DataFrame:
    return f.group_by("group", "donor_group").agg(pl.col("n").sum(), pl.col("n_pos").sum())


def _pairs(d: pl.DataFrame, w: pl.DataFrame) -> pl.DataFrame:
    """One row per swap cell (g, g') of the window with its same-group cell (g, g) and g's default rows.

    Columns: the day's and window's rows/positives of the cross cell
    (n_c, p_c, wn_c, wp_c), of the same-group cell (n_s, p_s, wn_s, wp_s) and
    the day's default rows of g (n_o, p_o). Pairs whose group has no
    same-group swap rows in the window have no Def. B.1 baseline and are left out.
    """
    swap_w = w.filter(pl.col("donor_group").is_not_null())
    swap_d = d.filter(pl.col("donor_group").is_not_null())
    same_w = swap_w.filter(pl.col("group") == pl.col("donor_group")).select(
        "group", pl.col("n").alias("wn_s"), pl.col("n_pos").alias("wp_s")
    )
    same_d = swap_d.filter(pl.col("group") == pl.col("donor_group")).select(
        "group", pl.col("n").alias("n_s"), pl.col("n_pos").alias("p_s")
    )
    own_d = d.filter(pl.col("donor_group").is_null()).select(
        "group", pl.col("n").alias("n_o"), pl.col("n_pos").alias("p_o")
    )
    return (
        swap_w.rename({"n": "wn_c", "n_pos": "wp_c"})
        .join(swap_d.rename({"n": "n_c", "n_pos": "p_c"}), on=["group", "donor_group"], how="left")
        .join(same_w, on="group", how="inner")
        .join(same_d, on="group", how="left")
        .join(own_d, on="group", how="left")
        .fill_null(0)
        .sort("group", "donor_group")
    )


def group_envy(
    day: pl.DataFrame,
    window: pl.DataFrame,
    *,
    epsilon: float,
    delta: float,
    level: float = 0.95,
    omega: float = OMEGA,
) -> pl.DataFrame:
    """Group envy per ordered pair (g, g') of one attribute's groups (seed 004 App. B, eq. 6, Def. B.1).

    ``day`` and ``window``: counts with columns ``group`` (target users'
    group g), ``donor_group`` (the group g' of the user whose policy served a
    swap row; null for default traffic, the users' own policies), ``n``
    (rows) and ``n_pos`` (rows with reward 1). ``day`` holds one day,
    ``window`` everything accumulated up to and including it.

    U(g, g') = n_pos/n of the (g, g') swap cell estimates eq. 6 when donors
    are drawn uniformly from g'; U(g, g) (``U_same``) is the (g, g) swap
    cell, eq. 6 at g' = g. Def. B.1: g envies g' when U(g, g') > U(g, g) + ε.
    ``diff`` = U_cross − U_same (mean reward, in [−1, 1]) with a normal
    (Wald) CI at ``level`` and a one-sided p-value of H0: diff ≤ 0 on the
    day, BH q-values over the attribute's off-diagonal pairs, and
    ``anytime_lower``/``anytime_upper`` from Lemma 4 over the window (union
    bound over the attribute's swap cells), valid at every day at once.
    ``verdict``: ``envy`` when anytime_lower > 0, ``eps_envy_free`` when
    anytime_upper ≤ ε, else ``undecided``. The diagonal (g' = g) is 0 by
    definition: diff, se, CI and bounds 0, p/q NaN, verdict
    ``eps_envy_free`` (Def. B.1 holds there trivially); its row keeps U(g, g).
    A pair whose group has no same-group swap rows in the window has no
    baseline and no row. With donors drawn among *other* users (AUDIT,
    Alg. 2) U(g, g) misses eq. 6's n = m term, of weight 1/|g|.

    Diagnostic, not Def. B.1: ``U_own_policy`` = n_pos/n of g's default rows
    of the day and ``diff_own_policy`` = U_cross − U_own_policy (NaN without
    default rows). Both intervals treat rows as independent; rows of one user
    are not, so they are optimistic when users repeat. Group envy-freeness
    implies individual envy-freeness only for homogeneous groups (Prop. 2).
    Raises ValueError on missing columns or δ outside (0, 1).
    """
    from scipy import stats  # imported here, not at the top (fairmon.transforms)

    for name, f in (("day", day), ("window", window)):
        if missing := set(NEED) - set(f.columns):
            raise ValueError(f"{name}: missing columns {sorted(missing)}")
    check_delta(delta)
    z = stats.norm.ppf(0.5 + level / 2)
    w = _cells(window)
    n_cells = max(w.filter(pl.col("donor_group").is_not_null()).height, 1)
    c = _pairs(_cells(day), w)
    diag = (c["group"] == c["donor_group"]).to_numpy()
    col = {k: c[k].to_numpy().astype(float) for k in ("n_c", "p_c", "n_s", "p_s", "n_o", "p_o")}
    with np.errstate(divide="ignore", invalid="ignore"):
        u_c, u_s, u_o = col["p_c"] / col["n_c"], col["p_s"] / col["n_s"], col["p_o"] / col["n_o"]
        diff = np.where(diag, 0.0, u_c - u_s)
        se = np.where(diag, 0.0, np.sqrt(u_c * (1 - u_c) / col["n_c"] + u_s * (1 - u_s) / col["n_s"]))
        p = np.where(se > 0, stats.norm.sf(diff / se), np.where(diff > 0, 0.0, 1.0))
    p = np.where(np.isfinite(diff) & ~diag, p, np.nan)
    _, lo_c, hi_c = confidence_bounds(c["wn_c"], c["wp_c"], n_cells, delta, omega=omega)
    _, lo_s, hi_s = confidence_bounds(c["wn_s"], c["wp_s"], n_cells, delta, omega=omega)
    a_lo, a_hi = np.where(diag, 0.0, lo_c - hi_s), np.where(diag, 0.0, hi_c - lo_s)
    verdict = np.where(a_lo > 0, "envy", np.where(a_hi <= epsilon, "eps_envy_free", "undecided"))
    return pl.DataFrame(
        {
            "group": c["group"],
            "donor_group": c["donor_group"],
            "n_cross": c["n_c"].cast(pl.Int64),
            "n_same": c["n_s"].cast(pl.Int64),
            "U_cross": u_c,
            "U_same": u_s,
            "diff": diff,
            "se": se,
            "ci_low": diff - z * se,
            "ci_high": diff + z * se,
            "p_value": p,
            "q_value": bh_q_values(p),
            "window_n_cross": c["wn_c"].cast(pl.Int64),
            "window_n_same": c["wn_s"].cast(pl.Int64),
            "anytime_lower": a_lo,
            "anytime_upper": a_hi,
            "verdict": verdict,
            "n_own_policy": c["n_o"].cast(pl.Int64),
            "U_own_policy": u_o,
            "diff_own_policy": u_c - u_o,
        }
    )


GROUP_ENVY = Table(
    "group_envy",
    "Group envy per user attribute and ordered pair (target group, donor group) from swap traffic.",
    "seed 004 App. B, eq. 6, Def. B.1, Lemma 4, Prop. 2; DESIGN §4.7",
    ("ds", "attribute", "group", "donor_group"),
    (
        DS,
        Column("attribute", S, "-", "User attribute (config `envy.attributes`)."),
        Column("group", S, "-", "Target users' group g."),
        Column("donor_group", S, "-", "Group g' whose users' policies served the swap rows."),
        Column("n_cross", I, "rows", "Swap rows of the day: users of g served by policies of g'."),
        Column("n_same", I, "rows", "Swap rows of the day: users of g served by policies of g (same-group donors)."),
        Column(
            "U_cross",
            F,
            "mean reward",
            "U(g, g'): mean reward of the day's (g, g') swap rows (eq. 6).",
            bounds=probability("U_cross_is_mean_reward"),
        ),
        Column(
            "U_same",
            F,
            "mean reward",
            "U(g, g): mean reward of the day's (g, g) swap rows (eq. 6 at g' = g).",
            bounds=probability("U_same_is_mean_reward"),
        ),
        Column(
            "diff",
            F,
            "mean reward",
            "U_cross − U_same (Def. B.1): > 0: g gains from the policies of g'; 0 on the diagonal.",
            bounds=Bounds("diff_in_range", min_value=-1, max_value=1),
        ),
        Column("se", F, "mean reward", "Standard error of diff (independent binomial rows)."),
        CI_LOW,
        CI_HIGH,
        Column("p_value", F, "probability", "One-sided p-value of H0: diff ≤ 0 (normal test); NaN on the diagonal."),
        Column("q_value", F, "probability", "Benjamini–Hochberg q-value over the attribute's pairs of the day."),
        Column("window_start", D, "date", "First day of the audit (config `envy.start`): the bounds accumulate."),
        Column(
            "window_n_cross",
            I,
            "rows",
            "(g, g') swap rows accumulated since window_start.",
            bounds=Bounds("window_n_cross_positive", min_value=1),
        ),
        Column(
            "window_n_same",
            I,
            "rows",
            "(g, g) swap rows accumulated since window_start.",
            bounds=Bounds("window_n_same_positive", min_value=1),
        ),
        Column("anytime_lower", F, "mean reward", "Lower bound of diff valid at every day at once (Lemma 4)."),
        Column("anytime_upper", F, "mean reward", "Upper bound of diff valid at every day at once (Lemma 4)."),
        Column("epsilon", F, "mean reward", "ε of the verdict (config `envy.epsilon`)."),
        Column(
            "verdict",
            S,
            "-",
            "`envy` (anytime_lower > 0), `eps_envy_free` (anytime_upper ≤ ε; always on the diagonal) or `undecided`.",
        ),
        LEVEL,
        Column(
            "n_own_policy", I, "rows", "Diagnostic, not Def. B.1: default-traffic (own-policy) rows of g of the day."
        ),
        Column(
            "U_own_policy", F, "mean reward", "Diagnostic, not Def. B.1: mean reward of g's own-policy rows of the day."
        ),
        Column("diff_own_policy", F, "mean reward", "Diagnostic, not Def. B.1: U_cross − U_own_policy."),
        Column(
            "donor_rows_left_out",
            I,
            "rows",
            "Swap rows since window_start left out of this attribute's cells: their donor's group is known "
            "nowhere (user table, the donor's own rows, policy_group); check swap_donor_group_resolved names them.",
            bounds=non_negative("donor_rows_left_out_non_negative"),
        ),
    ),
    "group_envy",
    section="envy",
)


def _left_out(unresolved: pl.DataFrame | None, attribute: str) -> int:
    """Window swap rows whose donor group ``attribute`` cannot resolve (``unresolved``'s rows naming it)."""
    if unresolved is None or not unresolved.height:
        return 0
    names = unresolved.get_column("attributes").str.split(", ")
    return int(unresolved.filter(names.list.contains(attribute)).get_column("n_window").sum() or 0)


def group_envy_options(cfg) -> dict:
    """The keyword arguments of :func:`group_envy_table` from ``[envy]`` and the confidence level."""
    return {"epsilon": cfg.envy.epsilon, "delta": cfg.envy.delta, "level": cfg.estimation.confidence_level}


@declares(
    GROUP_ENVY,
    stage="envy",
    inputs=("counts", "ds", "window_start", "unresolved"),
    enabled=has_envy,
    options=group_envy_options,
)
def group_envy_table(
    counts: pl.DataFrame,
    ds: dt.date,
    window_start: dt.date,
    unresolved: pl.DataFrame | None = None,
    *,
    epsilon: float,
    delta: float,
    level: float = 0.95,
) -> pl.DataFrame:
    """Rows of ``group_envy`` for day ``ds`` (:func:`group_envy` per attribute).

    ``counts`` (sql/envy_group_counts.sql): columns attribute, group,
    donor_group (the serving donor's group of a swap row; null for default
    traffic, used only by the own-policy diagnostic), is_day (the row counts
    rows of ``ds`` itself; the others are earlier days of the window), n,
    n_pos. The window (everything from ``window_start``) gives the anytime
    bounds, the day the normal interval; a pair with window rows but none on
    the day has NaN day estimates. ``unresolved``
    (sql/envy_unresolved_donors.sql: per donor the attributes it leaves
    unresolved, as ``"a, b"``, and its window rows ``n_window``; None: none)
    gives each attribute's ``donor_rows_left_out``. Returns a frame with the schema of
    :data:`GROUP_ENVY` (empty when no group has same-group swap rows: Def.
    B.1 needs U(g, g) from them, seed 004 App. B).
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
                    pl.lit(_left_out(unresolved, attribute)).alias("donor_rows_left_out"),
                )
            )
    if not frames:
        return pl.DataFrame(schema=schema)
    return pl.concat(frames, how="vertical_relaxed").select(list(schema)).cast(schema)
