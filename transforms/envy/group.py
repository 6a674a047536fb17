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
import math

import numpy as np
import polars as pl

from fairmon.transforms.envy.envy_bounds import check_delta
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


def _per_user(f: pl.DataFrame) -> pl.DataFrame:
    """Rows and positives per (group, donor_group, user_id) of counts ``f``, users with rows only;
    without a ``user_id`` column a cell's rows count as one user's."""
    if "user_id" not in f.columns:
        f = f.with_columns(pl.lit("").alias("user_id"))
    return (
        f.group_by("group", "donor_group", "user_id")
        .agg(pl.col("n").sum(), pl.col("n_pos").sum())
        .filter(pl.col("n") > 0)
        .with_columns((pl.col("n_pos") / pl.col("n")).alias("u"))
        .sort("group", "donor_group", "user_id")  # float sums over users in one order: the same bits every run
    )


def _paired(swap: pl.DataFrame, tag: str) -> pl.DataFrame:
    """Per swap cell (g, g'), over the users of g with rows in both (g, g')
    and (g, g) (Def. B.1 compares them within each user): the users
    ``k_<tag>``; eq. 6's averages of their mean rewards ``uc_<tag>`` and
    ``us_<tag>``; Hoeffding's Σc² of each average, Σ 1/n_m / M² (``hc_``,
    ``hs_``); a variance of the difference with the users fixed that is never
    below the true one, ũ(1 − ũ)·Σc² per cell with ũ the Σc²-weighted mean
    of the users' rates (Jensen: the weighted mean of u(1 − u) is at most
    ũ(1 − ũ)), ``v_<tag>``; and their rows ``nc_``, ``ns_``."""
    users = _per_user(swap)
    same = users.filter(pl.col("group") == pl.col("donor_group")).select(
        "group", "user_id", pl.col("n").alias("n_s"), pl.col("u").alias("u_s")
    )
    both = users.join(same, on=["group", "user_id"], how="inner", maintain_order="left")
    k = pl.len().cast(pl.Float64)

    def tilde(u: str, n: str) -> pl.Expr:  # Σc²-weighted rate and its ũ(1 − ũ)·Σc²
        w = (1 / pl.col(n)).sum()
        rate = (pl.col(u) / pl.col(n)).sum() / w
        return rate * (1 - rate) * w / k**2

    return both.group_by("group", "donor_group").agg(
        pl.len().alias(f"k_{tag}"),
        pl.col("u").mean().alias(f"uc_{tag}"),
        pl.col("u_s").mean().alias(f"us_{tag}"),
        ((1 / pl.col("n")).sum() / k**2).alias(f"hc_{tag}"),
        ((1 / pl.col("n_s")).sum() / k**2).alias(f"hs_{tag}"),
        (tilde("u", "n") + tilde("u_s", "n_s")).alias(f"v_{tag}"),
        pl.col("n").sum().alias(f"nc_{tag}"),
        pl.col("n_s").sum().alias(f"ns_{tag}"),
    )


def _pairs(d: pl.DataFrame, w: pl.DataFrame) -> pl.DataFrame:
    """One row per swap cell (g, g') of the window whose group has users with
    same-group swap rows, with the window's paired statistics (tag ``w``,
    :func:`_paired`), the day's (tag ``d``), the day's pooled rows of the
    whole cells (``pc``/``nc`` cross, ``ps``/``ns`` same: the diagnostic)
    and the day's users' average of their own-policy rows of g (``u_o``,
    rows ``n_o``). Cells without such users have no Def. B.1 baseline and
    are left out."""
    swap_w, swap_d = (f.filter(pl.col("donor_group").is_not_null()) for f in (w, d))
    pooled = swap_d.group_by("group", "donor_group").agg(
        pl.col("n").sum().alias("nc"), pl.col("n_pos").sum().alias("pc")
    )
    pooled_same = pooled.filter(pl.col("group") == pl.col("donor_group")).select(
        "group", pl.col("nc").alias("ns"), pl.col("pc").alias("ps")
    )
    own = (
        _per_user(d.filter(pl.col("donor_group").is_null()))
        .group_by("group")
        .agg(pl.col("u").mean().alias("u_o"), pl.col("n").sum().alias("n_o"))
    )
    return (
        _paired(swap_w, "w")
        .join(_paired(swap_d, "d"), on=["group", "donor_group"], how="left")
        .join(pooled, on=["group", "donor_group"], how="left")
        .join(pooled_same, on="group", how="left")
        .join(own, on="group", how="left")
        .sort("group", "donor_group")
    )


def anytime_half_width(h: np.ndarray, day_index: int, n_cells: int, delta: float) -> np.ndarray:
    """Half-width of the window's bound on a cell's eq. 6 difference, valid on every day at once.

    ``h`` (cells,): Σ_i c_i² of the estimate Σ_i c_i r_i, each row's reward
    r_i ∈ [0, 1] weighted ±1/(M·n_m) (M users, n_m rows of its user in that
    cell: + for the (g, g') rows, − for the (g, g) ones). Hoeffding (1963,
    Thm 2) for independent bounded rows, two-sided: P(|error| ≥ t) ≤
    2 exp(−2t²/Σc²). On day ``day_index`` t of the window the ``n_cells``
    cells share δ_t = 6δ/(π² t²), so over every day and cell the failure
    probability is at most Σ_t δ_t = δ. Valid for a logging design (which
    users, how many rows each) fixed in advance: rows that an adaptive
    audit (OCEF's pulls) chose from the rewards are not covered; the
    per-user certificates are. Raises ValueError for δ outside (0, 1) or a
    day index below 1."""
    check_delta(delta)
    if day_index < 1:
        raise ValueError(f"day_index must be >= 1, got {day_index}")
    delta_t = 6 * delta / (math.pi**2 * day_index**2)
    return np.sqrt(np.asarray(h, float) * math.log(2 * max(n_cells, 1) / delta_t) / 2)


def _estimates(c: pl.DataFrame, z: float, day_index: int, delta: float) -> dict[str, np.ndarray]:
    """:func:`group_envy`'s arrays from :func:`_pairs`' frame ``c``."""
    from scipy import stats

    diag = (c["group"] == c["donor_group"]).to_numpy()
    col = {k: c[k].cast(pl.Float64).fill_null(np.nan).to_numpy() for k in c.drop("group", "donor_group").columns}
    n_pairs = max(int((~diag).sum()), 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = np.where(diag, 0.0, col["uc_d"] - col["us_d"])
        se = np.where(diag, 0.0, np.sqrt(col["v_d"]))
        p = np.where(se > 0, stats.norm.sf(diff / se), np.nan)  # se 0: every row 0 or every row 1, no test
        pooled = np.where(diag, 0.0, col["pc"] / col["nc"] - col["ps"] / col["ns"])
    half = anytime_half_width(col["hc_w"] + col["hs_w"], day_index, n_pairs, delta)
    diff_w = col["uc_w"] - col["us_w"]
    count = {k: np.nan_to_num(col[k]).astype(np.int64) for k in ("k_d", "nc_d", "ns_d", "nc_w", "ns_w", "n_o")}
    return {
        "n_cross": count["nc_d"],
        "n_same": count["ns_d"],
        "users": count["k_d"],
        "U_cross": col["uc_d"],
        "U_same": col["us_d"],
        "diff": diff,
        "se": se,
        "ci_low": diff - z * se,
        "ci_high": diff + z * se,
        "p_value": np.where(np.isfinite(diff) & ~diag, p, np.nan),
        "window_n_cross": count["nc_w"],
        "window_n_same": count["ns_w"],
        "anytime_lower": np.where(diag, 0.0, np.maximum(diff_w - half, -1.0)),
        "anytime_upper": np.where(diag, 0.0, np.minimum(diff_w + half, 1.0)),
        "diff_pooled_rows": pooled,
        "n_own_policy": count["n_o"],
        "U_own_policy": col["u_o"],
        "diff_own_policy": col["uc_d"] - col["u_o"],
    }


def group_envy(
    day: pl.DataFrame,
    window: pl.DataFrame,
    *,
    epsilon: float,
    delta: float,
    day_index: int,
    level: float = 0.95,
) -> pl.DataFrame:
    """Group envy per ordered pair (g, g') of one attribute's groups (seed 004 App. B, eq. 6, Def. B.1).

    ``day`` and ``window``: counts with columns ``group`` (target users'
    group g), ``donor_group`` (the group g' of the user whose policy served a
    swap row; null for default traffic, the users' own policies), ``n``
    (rows), ``n_pos`` (rows with reward 1) and, optionally, ``user_id`` (the
    target user; without it a cell's rows count as one user's). ``day``
    holds one day, ``window`` everything accumulated up to and including it,
    day ``day_index`` (1-based) of the window.

    Def. B.1 compares U(g, g') with U(g, g), eq. 6: averages over g's users
    of each user's mean reward under the policies of g' (donors drawn
    uniformly from g'), resp. of g, so a heavily logged user weighs as much
    as any other. Both are taken over the same users, those of g with swap
    rows in both cells (``users``), so ``diff`` = U_cross − U_same is the
    mean of within-user differences and a difference between users never
    reads as envy. Def. B.1: g envies g' when U(g, g') > U(g, g) + ε.
    ``diff`` (mean reward, in [−1, 1]) has a normal (Wald) CI at ``level``
    (a variance with the users fixed never below the true one,
    :func:`_paired`) and a one-sided p-value of H0: diff ≤ 0 on the day, BH
    q-values over the attribute's off-diagonal pairs, and
    ``anytime_lower``/``anytime_upper`` from the window
    (:func:`anytime_half_width`: Hoeffding per pair, a union over the
    attribute's pairs and the days), valid on every day at once for a
    logging design fixed in advance. The estimand is the average over those
    users and the donors that served them: eq. 6's over g and g' when they
    are uniform draws, as AUDIT's targets and donors are.
    ``verdict``: ``envy`` when anytime_lower > 0, ``eps_envy_free`` when
    anytime_upper ≤ ε, else ``undecided``. The diagonal (g' = g) is 0 by
    definition: diff, se, CI and bounds 0, p/q NaN, verdict
    ``eps_envy_free`` (Def. B.1 holds there trivially); its row keeps U(g, g).
    A pair whose group has no user with rows in both cells in the window has
    no row. With donors drawn among *other* users (AUDIT, Alg. 2) U(g, g)
    misses eq. 6's n = m term, of weight 1/|g|.

    Diagnostics, not Def. B.1: ``diff_pooled_rows``, the day's difference of
    the two whole cells' rows pooled (heavily logged users weigh more);
    ``U_own_policy``, the users' average of their own-policy (default) rows
    of the day, and ``diff_own_policy`` = U_cross − U_own_policy (NaN without
    default rows). Group envy-freeness implies individual envy-freeness only
    for homogeneous groups (Prop. 2). Raises ValueError on missing columns,
    δ outside (0, 1) or a day index below 1.
    """
    from scipy import stats  # imported here, not at the top (fairmon.transforms)

    for name, f in (("day", day), ("window", window)):
        if missing := set(NEED) - set(f.columns):
            raise ValueError(f"{name}: missing columns {sorted(missing)}")
    check_delta(delta)
    c = _pairs(day, window)
    out = _estimates(c, float(stats.norm.ppf(0.5 + level / 2)), day_index, delta)
    verdict = np.where(
        out["anytime_lower"] > 0, "envy", np.where(out["anytime_upper"] <= epsilon, "eps_envy_free", "undecided")
    )
    return pl.DataFrame({"group": c["group"], "donor_group": c["donor_group"], **out, "verdict": verdict}).with_columns(
        pl.Series("q_value", bh_q_values(out["p_value"]))
    )


GROUP_ENVY = Table(
    "group_envy",
    "Group envy per user attribute and ordered pair (target group, donor group) from swap traffic.",
    "seed 004 App. B, eq. 6, Def. B.1, Prop. 2; Hoeffding (1963) Thm 2; DESIGN §4.7",
    ("ds", "attribute", "group", "donor_group"),
    (
        DS,
        Column("attribute", S, "-", "User attribute (config `envy.attributes`)."),
        Column("group", S, "-", "Target users' group g."),
        Column("donor_group", S, "-", "Group g' whose users' policies served the swap rows."),
        Column("n_cross", I, "rows", "Swap rows of the day of `users`: served by policies of g'."),
        Column("n_same", I, "rows", "Swap rows of the day of `users`: served by policies of g (same-group donors)."),
        Column("users", I, "users", "Users of g with swap rows in both (g, g') and (g, g) on the day."),
        Column(
            "U_cross",
            F,
            "mean reward",
            "U(g, g') (eq. 6): the day's average over `users` of each user's mean reward under g' policies.",
            bounds=probability("U_cross_is_mean_reward"),
        ),
        Column(
            "U_same",
            F,
            "mean reward",
            "U(g, g) (eq. 6 at g' = g): the same average over the same users of their (g, g) swap rows.",
            bounds=probability("U_same_is_mean_reward"),
        ),
        Column(
            "diff",
            F,
            "mean reward",
            "U_cross − U_same (Def. B.1): > 0: g gains from the policies of g'; 0 on the diagonal.",
            bounds=Bounds("diff_in_range", min_value=-1, max_value=1),
        ),
        Column(
            "se",
            F,
            "mean reward",
            "Standard error of diff, the users held fixed (an upper bound: rates pooled by Σc²).",
        ),
        CI_LOW,
        CI_HIGH,
        Column("p_value", F, "probability", "One-sided p-value of H0: diff ≤ 0 (normal test); NaN on the diagonal."),
        Column("q_value", F, "probability", "Benjamini–Hochberg q-value over the attribute's pairs of the day."),
        Column("window_start", D, "date", "First day of the audit (config `envy.start`): the bounds accumulate."),
        Column(
            "window_n_cross",
            I,
            "rows",
            "(g, g') swap rows since window_start of the users with rows in both cells.",
            bounds=Bounds("window_n_cross_positive", min_value=1),
        ),
        Column(
            "window_n_same",
            I,
            "rows",
            "(g, g) swap rows since window_start of the users with rows in both cells.",
            bounds=Bounds("window_n_same_positive", min_value=1),
        ),
        Column(
            "anytime_lower",
            F,
            "mean reward",
            "Lower bound of diff over the window, valid on every day at once for a logging design fixed in advance "
            "(Hoeffding per pair, union over pairs and days).",
        ),
        Column("anytime_upper", F, "mean reward", "Upper bound of diff over the window, valid on every day at once."),
        Column("epsilon", F, "mean reward", "ε of the verdict (config `envy.epsilon`)."),
        Column(
            "verdict",
            S,
            "-",
            "`envy` (anytime_lower > 0), `eps_envy_free` (anytime_upper ≤ ε; always on the diagonal) or `undecided`.",
        ),
        LEVEL,
        Column(
            "diff_pooled_rows",
            F,
            "mean reward",
            "Diagnostic, not eq. 6: the day's diff of the two whole cells' rows pooled (heavy users weigh more).",
        ),
        Column(
            "n_own_policy", I, "rows", "Diagnostic, not Def. B.1: default-traffic (own-policy) rows of g of the day."
        ),
        Column(
            "U_own_policy",
            F,
            "mean reward",
            "Diagnostic, not Def. B.1: the users' average of their own-policy (default) rows of the day.",
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
    traffic, used only by the own-policy diagnostic), user_id (the target
    user), is_day (the row counts rows of ``ds`` itself; the others are
    earlier days of the window), n, n_pos. The window (everything from
    ``window_start``; ``ds`` is its day (ds − window_start) + 1) gives the anytime
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
        day = part.filter(pl.col("is_day"))
        day_index = (ds - window_start).days + 1
        out = group_envy(day, part, epsilon=epsilon, delta=delta, level=level, day_index=day_index)
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
