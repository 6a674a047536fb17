"""Group envy from swap traffic (seed 004 App. B: eq. 6, Def. B.1, Prop. 2; DESIGN §4.7).

Pure estimators on counts; no I/O. Def. B.1 compares U(g, g'), the mean
reward of g's users served by the policy of a uniformly drawn member of g'
(eq. 6), with U(g, g), the same quantity at g' = g. Both come from swap
traffic: the (g, g') and (g, g) cells. The users' own policies (default
traffic) are not eq. 6's U(g, g) unless every group is a single user; their
comparison is kept as a named diagnostic only.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from fairmon.transforms.envy.certify import OMEGA, confidence_bounds
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
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got {delta}")
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
