"""From the ``group_counts`` table to the ``reo_group`` and ``reo`` tables (Polars).

Pure: no I/O, no Prefect. The estimators are in :mod:`transforms.reo`; this
module only reshapes counts into their inputs and their results into the
output schemas of DESIGN §3.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl

from transforms.reo import (
    CIMethod,
    estimate_reo,
    naive_reo_missing_as_negative,
    naive_reo_recommended_only,
)

#: Group label given to rows whose attribute value is null. Such rows count in
#: the traffic totals |D_rec| and |D_rand| but are not a group of the REO.
MISSING_GROUP = "(missing)"

GROUP_COUNTS_SCHEMA: dict[str, pl.DataType] = {
    "ds": pl.Date,
    "source": pl.String,
    "traffic": pl.String,
    "arm": pl.String,
    "attribute": pl.String,
    "group": pl.String,
    "n": pl.Int64,
    "n_pos": pl.Int64,
    "window_start": pl.Date,
    "window_end": pl.Date,
}

REO_GROUP_SCHEMA: dict[str, pl.DataType] = {
    "ds": pl.Date,
    "arm": pl.String,
    "attribute": pl.String,
    "group": pl.String,
    "n_rec": pl.Int64,
    "n_rand": pl.Int64,
    "n_pos_rec": pl.Int64,
    "n_pos_rand": pl.Int64,
    "P": pl.Float64,
    "Q": pl.Float64,
    "U": pl.Float64,
    "delta_U": pl.Float64,
    "se_delta_U": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "ci_method": pl.String,
    "reason": pl.String,
}

REO_SCHEMA: dict[str, pl.DataType] = {
    "ds": pl.Date,
    "arm": pl.String,
    "attribute": pl.String,
    "K": pl.Int64,
    "reo": pl.Float64,
    "se": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "n_rec": pl.Int64,
    "n_rand": pl.Int64,
    "rand_window_start": pl.Date,
    "rand_window_end": pl.Date,
    "ci_method": pl.String,
    "level": pl.Float64,
    "exceeds_80pct_rule": pl.Boolean,
    "reo_naive_recommended_only": pl.Float64,
    "reo_naive_missing_as_negative": pl.Float64,
    "reason": pl.String,
}


def _counts_by_group(frame: pl.DataFrame) -> dict[str, tuple[int, int]]:
    return {g: (int(n), int(p)) for g, n, p in frame.select("group", "n", "n_pos").iter_rows()}


def reo_tables(
    counts: pl.DataFrame,
    ds: dt.date,
    *,
    ci_method: CIMethod = "delta",
    level: float = 0.95,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Compute ``reo_group`` and ``reo`` for one day from its group counts.

    Input: ``counts`` with the :data:`GROUP_COUNTS_SCHEMA` columns for day
    ``ds``: default-traffic rows (traffic = "default") per arm, and random
    rows (traffic = "random", already pooled over the trailing window; their
    ``window_start``/``window_end`` give its span). Other traffic stages are
    ignored here. One output row per (arm, attribute[, group]); arms are the
    default-traffic arms of the day.

    Returns two frames with :data:`REO_GROUP_SCHEMA` and :data:`REO_SCHEMA`.
    Degenerate cases give NaN with a ``reason``, never an exception.
    Raises ValueError when ``counts`` lacks a required column.

    Source: seed 001 eqs. 3, 4, 7, 19, Algorithm 1 (see :func:`transforms.reo.estimate_reo`).
    """
    missing = set(GROUP_COUNTS_SCHEMA) - set(counts.columns)
    if missing:
        raise ValueError(f"group counts lack column(s) {sorted(missing)}")
    day = counts.filter(pl.col("ds") == ds)
    rec_all = day.filter(pl.col("traffic") == "default")
    rand_all = day.filter(pl.col("traffic") == "random")
    attributes = sorted(set(day.get_column("attribute").to_list()))
    arms = sorted(set(rec_all.get_column("arm").to_list()))

    group_rows: list[dict] = []
    reo_rows: list[dict] = []
    for attribute in attributes:
        rand = rand_all.filter(pl.col("attribute") == attribute)
        rand_counts = _counts_by_group(rand)
        n_rand = sum(n for n, _ in rand_counts.values())
        if rand.height:
            w_start, w_end = rand.get_column("window_start").min(), rand.get_column("window_end").max()
        else:
            w_start = w_end = None
        for arm in arms:
            rec_counts = _counts_by_group(rec_all.filter((pl.col("arm") == arm) & (pl.col("attribute") == attribute)))
            n_rec = sum(n for n, _ in rec_counts.values())
            groups = sorted((set(rec_counts) | set(rand_counts)) - {MISSING_GROUP})
            n_g_rec = np.array([rec_counts.get(g, (0, 0))[0] for g in groups], dtype=np.int64)
            a = np.array([rec_counts.get(g, (0, 0))[1] for g in groups], dtype=np.int64)
            n_g_rand = np.array([rand_counts.get(g, (0, 0))[0] for g in groups], dtype=np.int64)
            b = np.array([rand_counts.get(g, (0, 0))[1] for g in groups], dtype=np.int64)
            est = estimate_reo(groups, a, n_rec, b, n_rand, ci_method=ci_method, level=level)
            for i, g in enumerate(groups):
                group_rows.append(
                    {
                        "ds": ds, "arm": arm, "attribute": attribute, "group": g,
                        "n_rec": int(n_g_rec[i]), "n_rand": int(n_g_rand[i]),
                        "n_pos_rec": int(a[i]), "n_pos_rand": int(b[i]),
                        "P": float(est.P[i]), "Q": float(est.Q[i]), "U": float(est.U[i]),
                        "delta_U": float(est.delta_U[i]), "se_delta_U": float(est.se_delta_U[i]),
                        "ci_low": float(est.ci_low_delta_U[i]), "ci_high": float(est.ci_high_delta_U[i]),
                        "ci_method": ci_method,
                        "reason": est.group_reasons[i] if est.group_reasons else None,
                    }
                )
            reo_rows.append(
                {
                    "ds": ds, "arm": arm, "attribute": attribute, "K": est.K,
                    "reo": est.reo, "se": est.se, "ci_low": est.ci_low, "ci_high": est.ci_high,
                    "n_rec": n_rec, "n_rand": n_rand,
                    "rand_window_start": w_start, "rand_window_end": w_end,
                    "ci_method": ci_method, "level": level,
                    "exceeds_80pct_rule": est.exceeds_80pct_rule if np.isfinite(est.reo) else None,
                    "reo_naive_recommended_only": naive_reo_recommended_only(a, n_g_rec),
                    "reo_naive_missing_as_negative": naive_reo_missing_as_negative(a, n_rec, n_g_rand, n_rand),
                    "reason": est.reason,
                }
            )
    return (
        pl.DataFrame(group_rows, schema=REO_GROUP_SCHEMA),
        pl.DataFrame(reo_rows, schema=REO_SCHEMA),
    )
