"""Output tables for model decisions (``threshold_prevalence``, ``threshold_prevalence_diff``)
and human labelers (``sdt``), from staged rows and confusion counts (pure Polars/NumPy).

Source: seed 002 eqs. 6, 8-12 and §5.1-5.3; DESIGN §4.2-4.3. Every NaN in a
row comes with a non-null ``reason``; each day's family of p-values gets
Benjamini–Hochberg q-values (DESIGN §4.1, last paragraph).
"""

from __future__ import annotations

import datetime as dt
import itertools

import numpy as np
import polars as pl

from fairmon.transforms.contract import ATTR_PREFIX
from fairmon.transforms.decisions.cost_ratio import cost_ratio_ratio
from fairmon.transforms.decisions.threshold import prevalence_at_threshold, prevalence_difference
from fairmon.transforms.registry import (
    ATTR,
    DS,
    GROUP,
    REASON,
    B,
    Column,
    D,
    F,
    I,
    S,
    Table,
    declares,
    non_negative,
    positive,
    probability,
)
from fairmon.transforms.reo.multiplicity import bh_q_values

ALL = "*"

WIN_START = Column("window_start", D, "date", "First day of the rows the row was computed from.")
WIN_END = Column("window_end", D, "date", "Last day of the rows the row was computed from.")
MODEL = Column("model", S, "-", "Model name/version of the score log.")
T = Column("t", F, "score", "Decision threshold of the model (config `scores.thresholds`).")
BANDWIDTH = Column("d", F, "score", "Bandwidth: rows with |s − t| < d enter the local regression.")


def has_scores(cfg) -> bool:
    """Whether the config reads a score log (seed 002 §5.1)."""
    return cfg.scores is not None


def threshold_options(cfg) -> dict:
    """The keyword arguments of :func:`threshold_tables` from ``[scores]``."""
    sc, level = cfg.scores, cfg.estimation.confidence_level
    return dict(thresholds=[(t.model, t.t, t.d) for t in sc.thresholds], attributes=sc.groupings, level=level,
                hc=sc.hc, min_window_rows=sc.min_window_rows, ci=sc.ci)  # fmt: skip


THRESHOLD_PREVALENCE = Table(
    "threshold_prevalence",
    "Outcome rate at a model's decision threshold per group, and the implied cost ratio.",
    "seed 002 eqs. 6, 8–11; DESIGN §4.2",
    ("ds", "model", "attribute", "group", "t", "d"),
    (
        DS,
        MODEL,
        ATTR,
        GROUP,
        T,
        BANDWIDTH,
        WIN_START,
        WIN_END,
        Column("n_window", I, "rows", "Scored rows with |s − t| < d and a known outcome."),
        Column(
            "n_eff",
            F,
            "rows",
            "Kish effective rows of β0: 1/Σ lᵢ² over the fit's equivalent-kernel weights (β0 = Σ lᵢ yᵢ).",
        ),
        Column(
            "prevalence_at_threshold",
            F,
            "probability",
            "β0 = E[Y | s = t], tricube-weighted local linear fit, clipped to [0, 1].",
        ),
        Column(
            "se",
            F,
            "probability",
            "Heteroskedasticity-robust (HC) standard error of the fitted β0.",
            bounds=non_negative("se_non_negative"),
        ),
        Column(
            "ci_low",
            F,
            "probability",
            "Lower bound of β0's interval at `level`; inside [0, 1].",
            bounds=probability("ci_low_in_unit_interval"),
        ),
        Column(
            "ci_high",
            F,
            "probability",
            "Upper bound of β0's interval; inside [0, 1], above ci_low.",
            bounds=probability("ci_high_in_unit_interval"),
        ),
        Column(
            "ci_method",
            S,
            "-",
            "hc_normal (β0 ± z·HC SE) or wilson_neff (Wilson on n_eff: small, all-equal or rare-event"
            " windows); robust_… when built around the bias-corrected (local quadratic) fit.",
        ),
        Column(
            "implied_cost_ratio",
            F,
            "ratio",
            "c = (1 − β0)/β0 (seed 002 eq. 6).",
            bounds=positive("cost_ratio_positive"),
        ),
        Column("cost_ratio_ci_low", F, "ratio", "Lower bound of c's interval (β0's bounds carried through)."),
        Column("cost_ratio_ci_high", F, "ratio", "Upper bound of c's interval; inf when ci_low is 0."),
        Column(
            "naive_window_mean",
            F,
            "probability",
            "Mean outcome in the window, unweighted (seed 002 eq. 9).",
            bounds=probability("naive_mean_in_unit_interval"),
        ),
        Column("slope", F, "probability per score unit", "β1, the local slope of the outcome rate at t."),
        Column(
            "prevalence_half_d",
            F,
            "probability",
            "β0 fitted again with half the bandwidth, d/2.",
            bounds=probability("half_d_in_unit_interval"),
        ),
        Column("se_half_d", F, "probability", "SE behind the d/2 estimate's interval (HC, or Wilson width/2z)."),
        Column(
            "bandwidth_flag",
            B,
            "-",
            "β0 at d and at d/2 differ by more than the larger of their SEs: β0 may be biased, d too wide.",
        ),
        Column("hc", S, "-", "Which HC variance estimator gave `se` (HC0, HC1 or HC3)."),
        REASON,
    ),
    "threshold_prevalence",
    summary=True,
    section="prevalence",
)

THRESHOLD_PREVALENCE_DIFF = Table(
    "threshold_prevalence_diff",
    "Differences in prevalence at the threshold between pairs of groups, and the ratio of their implied cost ratios.",
    "seed 002 eqs. 5-6, §5.1; DESIGN §4.2",
    ("ds", "model", "attribute", "group_a", "group_b", "t", "d"),
    (
        DS,
        MODEL,
        ATTR,
        Column("group_a", S, "-", "First group of the pair."),
        Column("group_b", S, "-", "Second group of the pair."),
        T,
        BANDWIDTH,
        Column("diff", F, "probability", "Prevalence at the threshold of group_a minus that of group_b."),
        Column("se", F, "probability", "√(se_a² + se_b²) from the groups' HC SEs (independent groups)."),
        Column(
            "ci_low", F, "probability", "Lower bound at `level`: the groups' intervals combined by MOVER (Newcombe)."
        ),
        Column("ci_high", F, "probability", "Upper bound at `level` (MOVER)."),
        Column(
            "p_value",
            F,
            "probability",
            "Two-sided p-value of no difference: below α exactly when the level-(1 − α) interval excludes 0.",
            bounds=probability("p_value_in_unit_interval"),
        ),
        Column(
            "q_value",
            F,
            "probability",
            "Benjamini–Hochberg q-value over all of the day's p-values in this table (NaN p excluded).",
            bounds=probability("q_value_in_unit_interval"),
        ),
        Column(
            "cost_ratio_ratio",
            F,
            "ratio",
            "c_a / c_b: group_a's implied cost ratio (1 − β0)/β0 over group_b's (seed 002 eqs. 5-6); 1 when"
            " both get the same implied threshold; NaN when either β0 is 0, 1 or undefined.",
            bounds=positive("cost_ratio_ratio_positive"),
        ),
        Column(
            "cost_ratio_ratio_ci_low",
            F,
            "ratio",
            "Lower bound at `level`: the groups' cost-ratio intervals combined by MOVER on log c; 0 only when"
            " group_a's β0 interval reaches 1 or group_b's reaches 0.",
            bounds=non_negative("cost_ratio_ratio_ci_low_non_negative"),
        ),
        Column(
            "cost_ratio_ratio_ci_high",
            F,
            "ratio",
            "Upper bound at `level` (MOVER on log c); inf only when group_a's β0 interval reaches 0 or"
            " group_b's reaches 1.",
            bounds=positive("cost_ratio_ratio_ci_high_positive"),
        ),
        REASON,
    ),
    "threshold_prevalence_diff",
    section="prevalence",
)

PREVALENCE_SCHEMA = THRESHOLD_PREVALENCE.schema
PREVALENCE_DIFF_SCHEMA = THRESHOLD_PREVALENCE_DIFF.schema


def _pair_reason(diff_reason: str | None, diff: float, ratio_reason: str | None) -> str | None:
    """The diff's reason, then the cost-ratio ratio's; the latter is left out
    when the diff is NaN (a group without an estimate, which the diff's reason
    already names and which empties the ratio too)."""
    out = [r for r in (diff_reason, ratio_reason if not np.isnan(diff) else None) if r]
    return "; ".join(out) or None


def _pair_rows(est: dict, groups: list[str], level: float, **key) -> list[dict]:
    """The ``threshold_prevalence_diff`` rows of every pair of ``groups`` (sorted)
    from their estimates ``est``: the difference of β0 and the ratio of the implied
    cost ratios (seed 002 eqs. 5-6, §5.1), ``key`` the row's leading columns, q-values NaN."""
    rows = []
    for ga, gb in itertools.combinations(groups, 2):
        r = prevalence_difference(est[ga], est[gb], level)
        c = cost_ratio_ratio(est[ga], est[gb], level)
        rows.append(
            {
                "ds": key["ds"],
                "model": key["model"],
                "attribute": key["attribute"],
                "group_a": ga,
                "group_b": gb,
                "t": key["t"],
                "d": key["d"],
                "diff": r.diff,
                "se": r.se,
                "ci_low": r.ci_low,
                "ci_high": r.ci_high,
                "p_value": r.p_value,
                "q_value": float("nan"),
                "cost_ratio_ratio": c.ratio,
                "cost_ratio_ratio_ci_low": c.ci_low,
                "cost_ratio_ratio_ci_high": c.ci_high,
                "reason": _pair_reason(r.reason, r.diff, c.reason),
            }
        )
    return rows


@declares(
    THRESHOLD_PREVALENCE,
    THRESHOLD_PREVALENCE_DIFF,
    stage="scores",
    inputs=("rows", "ds", "window"),
    enabled=has_scores,
    options=threshold_options,
)
def threshold_tables(
    rows: pl.DataFrame,
    ds: dt.date,
    window: tuple[dt.date, dt.date],
    thresholds: list[tuple[str, float, float]],
    attributes: list[str],
    *,
    level: float = 0.95,
    hc: str = "HC1",
    min_window_rows: int = 100,
    ci: str = "robust",
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Prevalence at the threshold per model threshold × attribute × group
    (plus group "*" = everyone), and every pair of groups' difference
    (seed 002 eqs. 6, 8-11, §5.1; DESIGN §4.2).

    ``rows``: model, score (float, score units), outcome (bool, known),
    attr__<a> columns for the window's days. ``thresholds``: (model, t, d).
    Rows with a null attribute value only count in "*". ``hc``,
    ``min_window_rows`` and ``ci`` as in
    :func:`~fairmon.transforms.decisions.threshold.prevalence_at_threshold`. The diff
    table's ``q_value`` is BH over all of its rows of the day; its
    ``cost_ratio_ratio`` is c_a / c_b with the MOVER interval of
    :func:`~fairmon.transforms.decisions.cost_ratio.cost_ratio_ratio` (eqs. 5-6;
    an intersection's cells a×b are the groups of eq. 5). Raises
    ValueError on an unknown ``hc`` or ``ci`` or a threshold with d ≤ 0.
    """
    prev, diffs = [], []
    for model, t, d in thresholds:
        m = rows.filter(pl.col("model") == model)
        for attribute in attributes:
            col = ATTR_PREFIX + attribute
            groups = sorted(g for g in m.get_column(col).unique().to_list() if g is not None) if m.height else []
            est = {}
            for g in [ALL, *groups]:
                sub = m if g == ALL else m.filter(pl.col(col) == g)
                e = prevalence_at_threshold(
                    sub.get_column("score").to_numpy(),
                    sub.get_column("outcome").cast(pl.Float64).to_numpy(),
                    t,
                    d,
                    level=level,
                    hc=hc,
                    min_window_rows=min_window_rows,
                    ci=ci,
                )
                est[g] = e
                prev.append(
                    {
                        "ds": ds,
                        "model": model,
                        "attribute": attribute,
                        "group": g,
                        "t": t,
                        "d": d,
                        "window_start": window[0],
                        "window_end": window[1],
                        "n_window": e.n_window,
                        "n_eff": e.n_eff,
                        "prevalence_at_threshold": e.prevalence_at_threshold,
                        "se": e.se,
                        "ci_low": e.ci_low,
                        "ci_high": e.ci_high,
                        "ci_method": e.ci_method,
                        "implied_cost_ratio": e.implied_cost_ratio,
                        "cost_ratio_ci_low": e.cost_ratio_ci_low,
                        "cost_ratio_ci_high": e.cost_ratio_ci_high,
                        "naive_window_mean": e.naive_window_mean,
                        "slope": e.slope,
                        "prevalence_half_d": e.prevalence_half_d,
                        "se_half_d": e.se_half_d,
                        "bandwidth_flag": e.bandwidth_flag,
                        "hc": hc,
                        "reason": e.reason,
                    }
                )
            diffs += _pair_rows(est, groups, level, ds=ds, model=model, attribute=attribute, t=t, d=d)
    q = bh_q_values(np.array([r["p_value"] for r in diffs], dtype=float))
    for r, qv in zip(diffs, q, strict=True):
        r["q_value"] = float(qv)
    return pl.DataFrame(prev, schema=PREVALENCE_SCHEMA), pl.DataFrame(diffs, schema=PREVALENCE_DIFF_SCHEMA)
