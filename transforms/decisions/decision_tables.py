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
from fairmon.transforms.decisions.sdt import compare_cost_ratios, sdt_estimate
from fairmon.transforms.decisions.threshold import prevalence_at_threshold, prevalence_difference
from fairmon.transforms.registry import polars_schema
from fairmon.transforms.reo.multiplicity import bh_q_values

ALL = "*"

PREVALENCE_SCHEMA = polars_schema("threshold_prevalence")
PREVALENCE_DIFF_SCHEMA = polars_schema("threshold_prevalence_diff")
SDT_SCHEMA = polars_schema("sdt")


def _join(*parts: str | None) -> str | None:
    return "; ".join(p for p in parts if p) or None


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
    table's ``q_value`` is BH over all of its rows of the day. Raises
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
            for ga, gb in itertools.combinations(groups, 2):
                r = prevalence_difference(est[ga], est[gb], level)
                diffs.append(
                    {
                        "ds": ds,
                        "model": model,
                        "attribute": attribute,
                        "group_a": ga,
                        "group_b": gb,
                        "t": t,
                        "d": d,
                        "diff": r.diff,
                        "se": r.se,
                        "ci_low": r.ci_low,
                        "ci_high": r.ci_high,
                        "p_value": r.p_value,
                        "q_value": float("nan"),
                        "reason": r.reason,
                    }
                )
    q = bh_q_values(np.array([r["p_value"] for r in diffs], dtype=float))
    for r, qv in zip(diffs, q, strict=True):
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
    min_errors: int = 5,
) -> pl.DataFrame:
    """SDT per attribute × group for the pool of labelers (labeler_id "*") and
    per labeler, with ``p_vs_pool``: the two-sided p-value of the labeler's log
    cost ratio against the pool of the *other* labelers (leave-one-out, so the
    two estimates are independent; Wald, or the conservative interval-overlap
    test when either side used exact bounds), and its BH ``q_value`` over the
    day's p_vs_pool values.

    ``confusion``: attribute, group, labeler_id ("*" = all), tp, fn, fp, tn
    (counts) against gold labels. ``min_pos``/``min_neg``/``min_errors`` as in
    :func:`~fairmon.transforms.decisions.sdt.sdt_estimate`. Source: seed 002 §5.3,
    eq. 12; DESIGN §4.3. Raises ValueError on negative counts.
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
        kw = {"level": level, "min_pos": min_pos, "min_neg": min_neg, "min_errors": min_errors}
        e = sdt_estimate(tp, fn, fp, tn, **kw)
        p_pool = float("nan")
        if lab == ALL:
            why_p = "pooled row: p_vs_pool and q_value compare one labeler with the others"
        elif (a, g) not in pools:
            why_p = "no pooled (*) row for this group: no p_vs_pool"
        else:
            rest = np.subtract(pools[(a, g)], (tp, fn, fp, tn))
            if (rest < 0).any():
                p_pool, why_p = float("nan"), "labeler counts exceed the pool's: no p_vs_pool"
            else:
                other = sdt_estimate(*map(int, rest), **kw)
                p_pool, why_p = compare_cost_ratios(e, other)
                if not np.isfinite(p_pool):
                    why_p = f"p_vs_pool: {why_p or 'undefined'}" + (
                        f" (other labelers: {other.reason})" if other.ci_method is None else ""
                    )
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
                "criterion_t_ci_low": e.criterion_t_ci_low,
                "criterion_t_ci_high": e.criterion_t_ci_high,
                "d_prime": e.d_prime,
                "se_d_prime": e.se_d_prime,
                "d_prime_ci_low": e.d_prime_ci_low,
                "d_prime_ci_high": e.d_prime_ci_high,
                "implied_threshold": e.implied_threshold,
                "implied_threshold_ci_low": lo,
                "implied_threshold_ci_high": hi,
                "cost_ratio": e.cost_ratio,
                "cost_ratio_ci_low": e.cost_ratio_ci_low,
                "cost_ratio_ci_high": e.cost_ratio_ci_high,
                "ci_method": e.ci_method,
                "corrected": e.corrected,
                "p_vs_pool": p_pool,
                "q_value": float("nan"),
                "reason": _join(e.reason, why_p),
            }
        )
    q = bh_q_values(np.array([r["p_vs_pool"] for r in rows], dtype=float))
    for r, qv in zip(rows, q, strict=True):
        r["q_value"] = float(qv)
    return pl.DataFrame(rows, schema=SDT_SCHEMA)
