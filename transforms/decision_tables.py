"""Output tables for model decisions (``threshold_prevalence``, ``threshold_prevalence_diff``)
and human labelers (``sdt``), from staged rows and confusion counts (pure Polars/NumPy)."""

from __future__ import annotations

import datetime as dt
import itertools

import numpy as np
import polars as pl

from fairmon.transforms.contract import ATTR_PREFIX
from fairmon.transforms.multiplicity import bh_q_values
from fairmon.transforms.sdt import compare_log_cost_ratio, sdt_estimate
from fairmon.transforms.tables import polars_schema
from fairmon.transforms.threshold import group_difference, prevalence_at_threshold

ALL = "*"

PREVALENCE_SCHEMA = polars_schema("threshold_prevalence")
PREVALENCE_DIFF_SCHEMA = polars_schema("threshold_prevalence_diff")
SDT_SCHEMA = polars_schema("sdt")


def threshold_tables(
    rows: pl.DataFrame,
    ds: dt.date,
    window: tuple[dt.date, dt.date],
    thresholds: list[tuple[str, float, float]],
    attributes: list[str],
    *,
    level: float = 0.95,
    hc: str = "HC1",
    min_rows: int = 100,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Prevalence at the threshold per model threshold × attribute × group
    (plus group "*" = everyone), and every pair of groups' difference with
    its Benjamini–Hochberg ``q_value`` over the day's pairs and a ``reason``
    when it is NaN.

    ``rows``: model, score (float), outcome (bool, known), attr__<a> columns
    for the window's days. ``thresholds``: (model, t, d). Rows with a null
    attribute value only count in "*". Source: seed 002 eqs. 6, 8-11.
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
                    min_rows=min_rows,
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
                        "prevalence_at_threshold": e.prevalence_at_threshold,
                        "se": e.se,
                        "ci_low": e.ci_low,
                        "ci_high": e.ci_high,
                        "implied_cost_ratio": e.implied_cost_ratio,
                        "cost_ratio_ci_low": e.cost_ratio_ci_low,
                        "cost_ratio_ci_high": e.cost_ratio_ci_high,
                        "naive_window_mean": e.naive_window_mean,
                        "slope": e.slope,
                        "hc": hc,
                        "reason": e.reason,
                        "prevalence_half_d": e.prevalence_half_d,
                        "bandwidth_flag": e.bandwidth_flag,
                    }
                )
            for ga, gb in itertools.combinations(groups, 2):
                diff, se, lo, hi, p = group_difference(est[ga], est[gb], level)
                why = None
                if not np.isfinite(p):
                    why = (
                        "; ".join(f"{g}: {est[g].reason}" for g in (ga, gb) if est[g].reason)
                        or "difference undefined (zero SE)"
                    )
                diffs.append(
                    {
                        "ds": ds,
                        "model": model,
                        "attribute": attribute,
                        "group_a": ga,
                        "group_b": gb,
                        "t": t,
                        "d": d,
                        "diff": diff,
                        "se": se,
                        "ci_low": lo,
                        "ci_high": hi,
                        "p_value": p,
                        "reason": why,
                    }
                )
    q = bh_q_values([r["p_value"] for r in diffs])  # one family: the day's group pairs
    for r, qv in zip(diffs, q):
        r["q_value"] = float(qv)
    return pl.DataFrame(prev, schema=PREVALENCE_SCHEMA), pl.DataFrame(diffs, schema=PREVALENCE_DIFF_SCHEMA)


def sdt_table(
    confusion: pl.DataFrame,
    ds: dt.date,
    window: tuple[dt.date, dt.date],
    *,
    level: float = 0.95,
    min_pos: int = 10,
    min_neg: int = 10,
) -> pl.DataFrame:
    """SDT per attribute × group for the pool of labelers (labeler_id "*") and
    per labeler, with ``p_vs_pool``: the two-sided p-value of the labeler's log
    cost ratio against the pool of the *other* labelers (leave-one-out, so the
    two estimates are independent), and its Benjamini–Hochberg ``q_value``
    over the day's labeler tests (DESIGN §4.3, §4.1 "every family of p-values").

    ``confusion``: attribute, group, labeler_id ("*" = all), tp, fn, fp, tn
    against gold labels. Source: seed 002 §5.3, eq. 12.
    """
    rows = []
    pools = {
        (a, g): (tp, fn, fp, tn)
        for a, g, lab, tp, fn, fp, tn in confusion.select(
            "attribute", "group", "labeler_id", "tp", "fn", "fp", "tn"
        ).iter_rows()
        if lab == ALL
    }
    for a, g, lab, tp, fn, fp, tn in (
        confusion.select("attribute", "group", "labeler_id", "tp", "fn", "fp", "tn")
        .sort("attribute", "group", "labeler_id")
        .iter_rows()
    ):
        e = sdt_estimate(tp, fn, fp, tn, level=level, min_pos=min_pos, min_neg=min_neg)
        p_pool = float("nan")
        if lab != ALL and (a, g) in pools:
            rest = np.subtract(pools[(a, g)], (tp, fn, fp, tn))
            other = sdt_estimate(*map(int, rest), level=level, min_pos=min_pos, min_neg=min_neg)
            p_pool = compare_log_cost_ratio(e, other)[1]
        reason = e.reason
        if lab != ALL and not np.isfinite(p_pool) and np.isfinite(e.cost_ratio):
            why = "p_vs_pool undefined: " + (
                other.reason if (a, g) in pools and other.reason else "no pool of the other labelers"
            )
            reason = "; ".join(r for r in (reason, why) if r)
        lo, hi = e.implied_threshold_ci
        rows.append(
            {
                "ds": ds,
                "attribute": a,
                "group": g,
                "labeler_id": lab,
                "window_start": window[0],
                "window_end": window[1],
                "n_pos": e.n_pos,
                "n_neg": e.n_neg,
                "fpr": e.fpr,
                "fnr": e.fnr,
                "prevalence": e.prevalence,
                "criterion_t": e.criterion_t,
                "se_t": e.se_t,
                "d_prime": e.d_prime,
                "se_d_prime": e.se_d_prime,
                "implied_threshold": e.implied_threshold,
                "implied_threshold_ci_low": lo,
                "implied_threshold_ci_high": hi,
                "cost_ratio": e.cost_ratio,
                "cost_ratio_ci_low": e.cost_ratio_ci_low,
                "cost_ratio_ci_high": e.cost_ratio_ci_high,
                "corrected": e.corrected,
                "p_vs_pool": p_pool,
                "reason": reason,
            }
        )
    q = bh_q_values([r["p_vs_pool"] for r in rows])  # one family: the day's labeler-vs-pool tests
    for r, qv in zip(rows, q):
        r["q_value"] = float(qv)
    return pl.DataFrame(rows, schema=SDT_SCHEMA)
