"""From the ``group_counts`` table to the ``reo_group`` and ``reo`` tables (Polars).

Pure: no I/O, no Prefect. The estimators are in :mod:`fairmon.transforms.reo.estimate`; this
module only reshapes counts into their inputs and their results into the
output schemas of DESIGN §3.
"""

from __future__ import annotations

import datetime as dt
import zlib

import numpy as np
import polars as pl

from fairmon.transforms.registry import polars_schema
from fairmon.transforms.reo.ab import ab_estimates
from fairmon.transforms.reo.cluster import BucketSums
from fairmon.transforms.reo.estimate import (
    EIGHTY_PERCENT_RULE_REO,
    MIN_EXPECTED_POSITIVES,
    CIMethod,
    REOEstimate,
    estimate_reo,
    naive_reo_missing_as_negative,
    naive_reo_recommended_only,
)
from fairmon.transforms.reo.multiplicity import bh_q_values

#: Group label given to rows whose attribute value is null. Such rows count in
#: the traffic totals |D_rec| and |D_rand| but are not a group of the REO.
MISSING_GROUP = "(missing)"

GROUP_COUNTS_SCHEMA: dict[str, pl.DataType] = polars_schema("group_counts")

REO_GROUP_SCHEMA: dict[str, pl.DataType] = polars_schema("reo_group")

REO_AB_SCHEMA: dict[str, pl.DataType] = polars_schema("reo_ab")

REO_SCHEMA: dict[str, pl.DataType] = polars_schema("reo")


def _counts_by_group(frame: pl.DataFrame) -> dict[str, tuple[int, int]]:
    return {g: (int(n), int(p)) for g, n, p in frame.select("group", "n", "n_pos").iter_rows()}


def day_rng(seed: int, ds: dt.date, *keys: str) -> np.random.Generator:
    """A generator fixed by (seed, day, keys): re-running a day reproduces its resamples."""
    return np.random.default_rng([seed, ds.toordinal(), zlib.crc32("|".join(keys).encode())])


def _by_group(frame: pl.DataFrame, groups: list[str]) -> tuple[np.ndarray, np.ndarray, int]:
    c = _counts_by_group(frame)
    n = np.array([c.get(g, (0, 0))[0] for g in groups], dtype=np.int64)
    pos = np.array([c.get(g, (0, 0))[1] for g in groups], dtype=np.int64)
    return n, pos, sum(v[0] for v in c.values())


def bucket_sums(
    buckets: pl.DataFrame | None,
    traffic: str,
    arm: str,
    attribute: str,
    groups: list[str],
    n_total: int,
    value: str = "n_pos",
) -> tuple[BucketSums | None, str | None]:
    """The per-bucket sums of one sample (transforms/reo/cluster.py) from the
    per-bucket counts of the count stage (columns traffic, arm, attribute,
    group, cbucket, n, n_pos; one day). ``groups`` orders the columns of
    ``pos`` ('(missing)' counts in the bucket rows only); ``n_total`` is the
    sample's row count from group_counts. ``value``: the per-group column
    summed into ``pos`` (``n_pos``; ``n`` for exposure shares, RSP).

    Returns (sums, None); (None, None) when the sample's rows carry no cluster
    bucket (independent rows); (None, reason) when only some do (some input
    files lack the cluster id): no robust variance can be formed then.
    """
    if buckets is None or buckets.is_empty():
        return None, None
    sel = buckets.filter((pl.col("traffic") == traffic) & (pl.col("arm") == arm) & (pl.col("attribute") == attribute))
    if sel.is_empty():
        return None, None
    ids, inv = np.unique(sel.get_column("cbucket").to_numpy(), return_inverse=True)
    rows = np.bincount(inv, weights=sel.get_column("n").to_numpy(), minlength=ids.size)
    if int(round(rows.sum())) != n_total:
        return None, (
            f"{traffic} traffic: {int(rows.sum())} of {n_total} rows carry a cluster id (some input files lack it): "
            "the cluster-robust variance is undefined"
        )
    k = (
        sel.get_column("group")
        .replace_strict(list(groups), list(range(len(groups))), default=-1, return_dtype=pl.Int64)
        .to_numpy()
    )
    pos = np.zeros((ids.size, len(groups)))
    keep = k >= 0
    np.add.at(pos, (inv[keep], k[keep]), sel.get_column(value).to_numpy()[keep])
    return BucketSums(pos, rows), None


def reo_tables(
    counts: pl.DataFrame,
    ds: dt.date,
    *,
    ci_method: CIMethod = "delta",
    level: float = 0.95,
    n_boot: int = 1000,
    seed: int = 0,
    reo_threshold: float = EIGHTY_PERCENT_RULE_REO,
    min_expected_positives: float = MIN_EXPECTED_POSITIVES,
    buckets: pl.DataFrame | None = None,
    cluster_by: str = "none",
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Compute ``reo_group`` and ``reo`` for one day from its group counts.

    Input: ``counts`` with the :data:`GROUP_COUNTS_SCHEMA` columns for day
    ``ds``: default-traffic rows (traffic = "default") per arm, and random
    rows (traffic = "random", already pooled over the trailing window; their
    ``window_start``/``window_end`` give its span). Other traffic stages are
    ignored here. One output row per (arm, attribute[, group]); arms are the
    default-traffic arms of the day.

    Bootstrap ``ci_method``s draw ``n_boot`` resamples from :func:`day_rng`.
    The verdict line is 1/9 (the 80 % rule) for K = 2 and ``reo_threshold``
    for K > 2; ``min_expected_positives`` marks small groups (DESIGN §4.1).
    ``look_ahead`` is true when the random rows' span ends after ``ds``.
    ``buckets``: the count stage's per-bucket counts of the day when rows
    are clustered by ``cluster_by`` (:func:`bucket_sums`): the intervals are
    then cluster-robust and ``reo`` records ``cluster_by`` and the
    ``design_effect``; rows without buckets are independent (``none``).

    Returns two frames with :data:`REO_GROUP_SCHEMA` and :data:`REO_SCHEMA`.
    Degenerate cases give NaN with a ``reason``, never an exception.
    Raises ValueError when ``counts`` lacks a required column.

    Source: seed 001 eqs. 3, 4, 7, 19, Algorithm 1 (see :func:`fairmon.transforms.reo.estimate.estimate_reo`).
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
        if rand.height:
            w_start, w_end = rand.get_column("window_start").min(), rand.get_column("window_end").max()
        else:
            w_start = w_end = None
        for arm in arms:
            rec = rec_all.filter((pl.col("arm") == arm) & (pl.col("attribute") == attribute))
            groups = sorted((set(rec.get_column("group")) | set(rand.get_column("group"))) - {MISSING_GROUP})
            n_g_rec, a, n_rec = _by_group(rec, groups)
            n_g_rand, b, n_rand = _by_group(rand, groups)
            c_rec, note_rec = bucket_sums(buckets, "default", arm, attribute, groups, n_rec)
            c_rand, note_rand = bucket_sums(buckets, "random", "all", attribute, groups, n_rand)
            est = estimate_reo(
                groups,
                a,
                n_rec,
                b,
                n_rand,
                ci_method=ci_method,
                level=level,
                n_boot=n_boot,
                rng=day_rng(seed, ds, attribute, arm),
                threshold=EIGHTY_PERCENT_RULE_REO if len(groups) <= 2 else reo_threshold,
                min_expected_positives=min_expected_positives,
                clusters_rec=c_rec,
                clusters_rand=c_rand,
                cluster_note=note_rec or note_rand,
            )
            clustered = c_rec is not None or c_rand is not None or bool(note_rec or note_rand)
            where = {"ds": ds, "arm": arm, "attribute": attribute}
            group_rows += _group_rows(where, groups, (n_g_rec, n_g_rand, a, b), est, ci_method)
            reo_rows.append(
                {
                    **where,
                    **_reo_values(est, (a, n_g_rec, n_rec), (n_g_rand, n_rand), ci_method, level),
                    "rand_window_start": w_start,
                    "rand_window_end": w_end,
                    "look_ahead": bool(w_end is not None and w_end > ds),
                    "cluster_by": cluster_by if clustered else "none",
                }
            )
    return (
        pl.DataFrame(group_rows, schema=REO_GROUP_SCHEMA),
        pl.DataFrame(reo_rows, schema=REO_SCHEMA),
    )


def _group_rows(
    where: dict, groups: list[str], counts: tuple[np.ndarray, ...], est: REOEstimate, ci_method: str
) -> list[dict]:
    """``reo_group`` rows of one (ds, arm, attribute) (``where``): the counts
    (rows and positives per group in default and random traffic, shapes (K,))
    beside the estimate's per-group values, so a reader sees what each ΔU_k
    rests on. A small group's reason names its arm and attribute."""
    n_g_rec, n_g_rand, a, b = counts
    arm, attribute = where["arm"], where["attribute"]
    return [
        {
            **where,
            "group": g,
            "n_rec": int(n_g_rec[i]),
            "n_rand": int(n_g_rand[i]),
            "n_pos_rec": int(a[i]),
            "n_pos_rand": int(b[i]),
            "P": float(est.P[i]),
            "Q": float(est.Q[i]),
            "U": float(est.U[i]),
            "delta_U": float(est.delta_U[i]),
            "se_delta_U": float(est.se_delta_U[i]),
            "ci_low": float(est.ci_low_delta_U[i]),
            "ci_high": float(est.ci_high_delta_U[i]),
            "ci_method": ci_method,
            "reason": est.group_reasons[i] if est.group_reasons else None,
            "small_group": est.small_group[i],
            "small_group_reason": (
                f"arm {arm}, {attribute}: {est.small_group_reasons[i]}" if est.small_group_reasons[i] else None
            ),
        }
        for i, g in enumerate(groups)
    ]


def _reo_values(
    est: REOEstimate,
    rec: tuple[np.ndarray, np.ndarray, int],
    rand: tuple[np.ndarray, int],
    ci_method: str,
    level: float,
) -> dict:
    """The ``reo`` row's estimate columns from one :class:`REOEstimate`, with
    the two naive REOs beside it (diagnostics the report contrasts with the
    estimate; seed 001 §1). ``rec`` = (positives (K,), rows per group (K,),
    n_rec); ``rand`` = (rows per group (K,), n_rand)."""
    (a, n_g_rec, n_rec), (n_g_rand, n_rand) = rec, rand
    return {
        "K": est.K,
        "reo": est.reo,
        "se": est.se,
        "ci_low": est.ci_low,
        "ci_high": est.ci_high,
        "n_rec": n_rec,
        "n_rand": n_rand,
        "ci_method": ci_method,
        "level": level,
        "reo_naive_recommended_only": naive_reo_recommended_only(a, n_g_rec),
        "reo_naive_missing_as_negative": naive_reo_missing_as_negative(a, n_rec, n_g_rand, n_rand),
        "reason": est.reason,
        "reo_bc": est.reo_bc,
        "parity_stat": est.parity_stat,
        "parity_df": est.parity_df,
        "parity_p_value": est.parity_p_value,
        "reo_threshold": est.threshold,
        "verdict_80pct": est.verdict,
        "n_small_groups": int(sum(est.small_group)),
        "design_effect": est.design_effect,
    }


def ab_pairs(arms: list[str], control: str | None, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (control, treatment) pairs of a day: the explicit ``pairs`` plus,
    when ``control`` is set and present, control against every other arm."""
    out = [tuple(p) for p in pairs]
    if control is not None and control in arms:
        out += [(control, a) for a in sorted(arms) if a != control and (control, a) not in out]
    return out


def reo_ab_table(
    counts: pl.DataFrame,
    ds: dt.date,
    pairs: list[tuple[str, str]],
    *,
    methods: tuple[str, ...] = ("delta",),
    level: float = 0.95,
    folds: int = 10,
    n_boot: int = 1000,
    seed: int = 0,
    buckets: pl.DataFrame | None = None,
    cluster_by: str = "none",
) -> pl.DataFrame:
    """The ``reo_ab`` table for one day: every (control, treatment) pair ×
    attribute × metric (REO, ΔU per group) × method (seed 001 Algorithms 2-4,
    see :mod:`fairmon.transforms.reo.ab`). Both arms use the day's shared random-traffic
    window. A pair whose arm has no traffic that day gives NaN rows with a
    reason. ``q_value``: Benjamini–Hochberg over the day's p-values of one
    method (DESIGN §4.1). ``buckets``/``cluster_by`` as in :func:`reo_tables`:
    cluster-robust intervals, with ``cluster_by`` and ``design_effect`` per row.
    Returns a frame with :data:`REO_AB_SCHEMA`.
    """
    day = counts.filter(pl.col("ds") == ds)
    rec = day.filter(pl.col("traffic") == "default")
    rand = day.filter(pl.col("traffic") == "random")
    arms = set(rec.get_column("arm").to_list())
    rows: list[dict] = []
    for attribute in sorted(set(day.get_column("attribute").to_list())):
        r_attr = rand.filter(pl.col("attribute") == attribute)
        for control, treatment in pairs:
            base = {"ds": ds, "attribute": attribute, "control": control, "treatment": treatment, "level": level}
            if control not in arms or treatment not in arms:
                missing = [a for a in (control, treatment) if a not in arms]
                for m in methods:
                    rows.append(
                        {
                            **base,
                            "metric": "reo",
                            "method": m,
                            "reason": f"no default traffic for arm(s) {', '.join(missing)}",
                        }
                    )
                continue
            c_attr = rec.filter((pl.col("attribute") == attribute) & (pl.col("arm") == control))
            t_attr = rec.filter((pl.col("attribute") == attribute) & (pl.col("arm") == treatment))
            groups = sorted(
                (set(c_attr.get_column("group")) | set(t_attr.get_column("group")) | set(r_attr.get_column("group")))
                - {MISSING_GROUP}
            )
            _, a_C, n_C = _by_group(c_attr, groups)
            _, a_T, n_T = _by_group(t_attr, groups)
            _, b, n_rand = _by_group(r_attr, groups)
            sums = [
                bucket_sums(buckets, tr, arm, attribute, groups, n)
                for tr, arm, n in (("default", treatment, n_T), ("default", control, n_C), ("random", "all", n_rand))
            ]
            notes = [note for _, note in sums if note]
            clustered = bool(notes) or any(c is not None for c, _ in sums)
            est = ab_estimates(
                groups,
                a_T,
                n_T,
                a_C,
                n_C,
                b,
                n_rand,
                methods=methods,
                level=level,
                folds=folds,
                n_boot=n_boot,
                rng=day_rng(seed, ds, attribute, control, treatment),
                clusters=tuple(c for c, _ in sums),
                cluster_note=notes[0] if notes else None,
            )
            rows += [
                {
                    **base,
                    "metric": e.metric,
                    "diff": e.diff,
                    "se": e.se,
                    "ci_low": e.ci_low,
                    "ci_high": e.ci_high,
                    "p_value": e.p_value,
                    "method": e.method,
                    "df": e.df,
                    "reason": e.reason,
                    "cluster_by": cluster_by if clustered else "none",
                    "design_effect": e.design_effect,
                }
                for e in est
            ]
    out = pl.DataFrame(rows, schema=REO_AB_SCHEMA)
    if out.height:  # one BH family per method: the day's tests of every pair, attribute and metric
        out = out.with_columns(
            pl.col("p_value")
            .map_batches(lambda p: pl.Series(bh_q_values(p.to_numpy()), dtype=pl.Float64))
            .over("method")
            .alias("q_value")
        )
    return out.select(list(REO_AB_SCHEMA))
