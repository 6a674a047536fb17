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

from fairmon.transforms.alerts.horizon import ALERT_COLUMNS, configured_alert_level
from fairmon.transforms.registry import (
    ARM,
    ATTR,
    CI_HIGH,
    CI_LOW,
    DS,
    GROUP,
    LEVEL,
    REASON,
    B,
    Bounds,
    Column,
    D,
    F,
    I,
    S,
    Table,
    declare,
    declares,
    non_negative,
    probability,
)
from fairmon.transforms.reo.check_frames import group_counts_check_frame, reo_check_frame
from fairmon.transforms.reo.cluster import (
    bucket_sums,
    cluster_units,
    group_arrays,
)
from fairmon.transforms.reo.cluster_keys import CLUSTER_BY, CLUSTER_SUMS, DESIGN_EFFECT, N_CLUSTERS
from fairmon.transforms.reo.estimate import (
    EIGHTY_PERCENT_RULE_REO,
    MIN_EXPECTED_POSITIVES,
    CIMethod,
    REOEstimate,
    estimate_reo,
    naive_reo_missing_as_negative,
    naive_reo_recommended_only,
)

#: Group label given to rows whose attribute value is null. Such rows count in
#: the traffic totals |D_rec| and |D_rand| but are not a group of the REO.
MISSING_GROUP = "(missing)"


def has_impressions(cfg) -> bool:
    """Whether the config reads impressions (the REO family's tables need them)."""
    return cfg.impressions is not None


def cluster_name(cfg) -> str:
    """The id that makes a cluster under ``[estimation] cluster_by`` (``auto``: request_id)."""
    by = cfg.estimation.cluster_by
    return "request_id" if by == "auto" else by


def reo_options(cfg) -> dict:
    """The keyword arguments of :func:`reo_tables` from the config's ``[estimation]``."""
    e = cfg.estimation
    return dict(
        ci_method=e.ci_method, level=e.confidence_level, n_boot=e.bootstrap_resamples, seed=e.seed,
        reo_threshold=e.reo_threshold, min_expected_positives=e.min_expected_positives, cluster_by=cluster_name(cfg),
        alert_level=configured_alert_level(cfg),
    )  # fmt: skip


GROUP_COUNTS = Table(
    "group_counts",
    "Per-group counts of logged user-item pairs and positives, per traffic and arm.",
    "DESIGN §3; seed 001 §3 (Q_k, P_k are n_pos shares of these counts)",
    ("ds", "source", "traffic", "arm", "attribute", "group"),
    (
        DS,
        Column("source", S, "-", "Input the counts come from (`impressions`)."),
        Column("traffic", S, "-", "Traffic: `default`, `random` or another named stage such as `post_recall`."),
        Column("arm", S, "-", "Experiment arm; `all` for random traffic, which every arm shares."),
        ATTR,
        GROUP,
        Column(
            "n",
            I,
            "user-item pairs",
            "Logged pairs of the group in this traffic (and window, for random).",
            bounds=non_negative("n_non_negative"),
        ),
        Column(
            "n_pos",
            I,
            "user-item pairs",
            "Of those, pairs with label Y = 1 (`label_rule` over the signals).",
            bounds=non_negative("n_pos_non_negative"),
        ),
        Column(
            "window_start",
            D,
            "date",
            "First day of the rows counted (random traffic: of the rows and pools the window used).",
        ),
        Column(
            "window_end",
            D,
            "date",
            "Last day of the rows counted (random traffic: a used pool's declared end; after ds = look-ahead).",
        ),
    ),
    "group_counts",
    check_frame=lambda frame, day: group_counts_check_frame(frame, day["totals"]),
)

REO_GROUP = Table(
    "reo_group",
    "Per-group RTPR utility U_k and relative utility ΔU_k with a confidence interval.",
    "seed 001 eqs. 3, 4, 7; Algorithm 1 (delta method)",
    ("ds", "arm", "attribute", "group"),
    (
        DS,
        ARM,
        ATTR,
        GROUP,
        Column("n_rec", I, "user-item pairs", "Default-traffic pairs of the arm in the group."),
        Column("n_rand", I, "user-item pairs", "Random-traffic pairs of the group in the window."),
        Column("n_pos_rec", I, "user-item pairs", "Positive default-traffic pairs of the group."),
        Column("n_pos_rand", I, "user-item pairs", "Positive random-traffic pairs of the group."),
        Column(
            "P",
            F,
            "share",
            "P_k = positives of the group in random traffic / |D_rand| (seed 001 eq. 4).",
            bounds=probability("P_is_share"),
        ),
        Column(
            "Q",
            F,
            "share",
            "Q_k = positives of the group in default traffic / |D_rec| (seed 001 eq. 4).",
            bounds=probability("Q_is_share"),
        ),
        Column("U", F, "ratio", "RTPR utility U_k = Q_k / P_k (seed 001 eq. 4)."),
        Column(
            "delta_U",
            F,
            "ratio",
            "Relative utility ΔU_k = U_k / mean(U) − 1 (seed 001 eqs. 3, 7).",
            bounds=Bounds("delta_U_at_least_minus_one", min_value=-1),
        ),
        Column(
            "se_delta_U", F, "ratio", "Standard error of ΔU_k by `ci_method`.", bounds=non_negative("se_non_negative")
        ),
        CI_LOW,
        CI_HIGH,
        Column("ci_method", S, "-", "Interval method: delta, delta_paper or a bootstrap (config)."),
        REASON,
        Column(
            "small_group",
            B,
            "-",
            "Fewer than `min_expected_positives` positives in default or random traffic (DESIGN §4.1).",
        ),
        Column("small_group_reason", S, "-", "Names the small group and its counts; null when not small."),
    ),
    "reo_group",
    section="reo",
)

REO = Table(
    "reo",
    "Ranking-based Equal Opportunity per attribute and arm, with a confidence interval.",
    "seed 001 eq. 19, Algorithm 1; DESIGN §4.1",
    ("ds", "arm", "attribute"),
    (
        DS,
        ARM,
        ATTR,
        Column(
            "K",
            I,
            "groups",
            "Number of groups of the attribute entering the REO.",
            bounds=Bounds("at_least_two_groups", min_value=2),
        ),
        Column(
            "reo",
            F,
            "ratio",
            "REO = std(U)/mean(U), population std (seed 001 eq. 19).",
            bounds=non_negative("reo_non_negative"),
        ),
        Column("se", F, "ratio", "Standard error of REO by `ci_method`.", bounds=non_negative("se_non_negative")),
        CI_LOW,
        CI_HIGH,
        Column("n_rec", I, "user-item pairs", "Default-traffic pairs of the arm, |D_rec|."),
        Column("n_rand", I, "user-item pairs", "Random-traffic pairs in the window, |D_rand|."),
        Column("rand_window_start", D, "date", "First day of the random traffic actually used."),
        Column("rand_window_end", D, "date", "Last day of the random traffic actually used."),
        Column("ci_method", S, "-", "Interval method: delta, delta_paper or a bootstrap (config)."),
        LEVEL,
        Column("reo_bc", F, "ratio", "Bias-corrected REO: sqrt(max(0, REO² − tr Var(ΔÛ)/K)) (DESIGN §4.1)."),
        Column(
            "parity_stat",
            F,
            "χ²",
            "Wald statistic of parity (all U_k equal), on the log-utility contrasts (DESIGN §4.1).",
        ),
        Column("parity_df", I, "degrees of freedom", "Degrees of freedom of the parity test, K − 1."),
        Column(
            "parity_p_value",
            F,
            "probability",
            "p-value of the parity test: χ² on K − 1 df; on clustered rows W/(K − 1) against F(K − 1, n_clusters − 1).",
            bounds=probability("parity_p_value_is_probability"),
        ),
        Column(
            "reo_threshold",
            F,
            "ratio",
            "The line the verdict uses: 1/9 (the 80 % rule) for K = 2; config `reo_threshold` for K > 2.",
        ),
        Column(
            "verdict_80pct",
            S,
            "-",
            "From the CI: `exceeds` (ci_low > line), `within` (ci_high ≤ line), `inconclusive`, `undefined`.",
        ),
        Column("n_small_groups", I, "groups", "Groups below `min_expected_positives` (verdict inconclusive at best)."),
        Column(
            "look_ahead",
            B,
            "-",
            "Some random rows may come from after ds (a pooled file under `pool_policy = overlap`).",
        ),
        Column("reo_naive_recommended_only", F, "ratio", "Diagnostic: REO from default traffic alone (biased)."),
        Column("reo_naive_missing_as_negative", F, "ratio", "Diagnostic: REO treating unshown pairs as negatives."),
        REASON,
        CLUSTER_BY,
        DESIGN_EFFECT,
        N_CLUSTERS,
        CLUSTER_SUMS,
        *ALERT_COLUMNS,
    ),
    "reo",
    summary=True,
    section="reo",
    check_frame=lambda frame, day: reo_check_frame(frame),
)


#: group_counts is computed in SQL by the count stage (sql/group_counts*.sql, or Spark).
declare(GROUP_COUNTS, stage="counts", inputs=("impressions",), enabled=has_impressions)

GROUP_COUNTS_SCHEMA: dict[str, pl.DataType] = GROUP_COUNTS.schema
REO_GROUP_SCHEMA: dict[str, pl.DataType] = REO_GROUP.schema
REO_SCHEMA: dict[str, pl.DataType] = REO.schema


def day_rng(seed: int, ds: dt.date, *keys: str) -> np.random.Generator:
    """A generator fixed by (seed, day, keys): re-running a day reproduces its resamples."""
    return np.random.default_rng([seed, ds.toordinal(), zlib.crc32("|".join(keys).encode())])


@declares(
    REO_GROUP,
    REO,
    stage="impressions",
    inputs=("counts", "ds", "buckets"),
    enabled=has_impressions,
    options=reo_options,
)
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
    alert_level: float | None = None,
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
    ``design_effect``; rows without buckets are independent (``none``). ``alert_level``: REO's
    interval at the alerts' level in ``alert_low``, ``alert_high`` (NaN, null level: alerts off).

    Returns two frames with :data:`REO_GROUP_SCHEMA` and :data:`REO_SCHEMA`; degenerate cases give NaN with a
    ``reason``, never an exception. Raises ValueError when ``counts`` lacks a required column.

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

    group_rows: list[pl.DataFrame] = []
    reo_rows: list[dict] = []
    for attribute in attributes:
        rand = rand_all.filter(pl.col("attribute") == attribute)
        if rand.height:
            w_start, w_end = rand.get_column("window_start").min(), rand.get_column("window_end").max()
        else:
            w_start = w_end = None
        for arm in arms:
            rec = rec_all.filter((pl.col("arm") == arm) & (pl.col("attribute") == attribute))
            groups = listed_groups(rec, rand)
            n_g_rec, a, n_rec = group_arrays(rec, groups)
            n_g_rand, b, n_rand = group_arrays(rand, groups)
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
                alert_level=alert_level,
            )
            clustered = c_rec is not None or c_rand is not None or bool(note_rec or note_rand)
            where = {"ds": ds, "arm": arm, "attribute": attribute}
            group_rows.append(_group_rows(where, groups, (n_g_rec, n_g_rand, a, b), est, ci_method))
            reo_rows.append(
                {
                    **where,
                    **_reo_values(est, (a, n_g_rec, n_rec), (n_g_rand, n_rand), ci_method, level),
                    "rand_window_start": w_start,
                    "rand_window_end": w_end,
                    "look_ahead": bool(w_end is not None and w_end > ds),
                    "cluster_by": cluster_by if clustered else "none",
                    **cluster_columns([c_rec, c_rand]),
                    "alert_level": alert_level,
                    "alert_low": est.alert_low,
                    "alert_high": est.alert_high,
                }
            )
    return (
        pl.concat(group_rows, how="vertical") if group_rows else pl.DataFrame(schema=REO_GROUP_SCHEMA),
        pl.DataFrame(reo_rows, schema=REO_SCHEMA),
    )


def listed_groups(*frames: pl.DataFrame) -> list[str]:
    """The groups any of ``frames`` (group counts: a ``group`` column) has
    a row for, but :data:`MISSING_GROUP`, sorted: the K groups an estimate
    compares. Taken with ``to_list`` (one conversion), not by iterating
    Polars Series (thousands of Python calls at K = 4,096). Raises polars'
    error for a frame without a ``group`` column."""
    return sorted({g for f in frames for g in f.get_column("group").to_list()} - {MISSING_GROUP})


def cluster_columns(samples: list) -> dict:
    """``n_clusters`` and ``cluster_sums`` of a row from its samples'
    per-bucket sums (:func:`fairmon.transforms.reo.cluster.cluster_units`)."""
    n, kind = cluster_units(samples)
    return {"n_clusters": n, "cluster_sums": kind}


def _group_rows(
    where: dict, groups: list[str], counts: tuple[np.ndarray, ...], est: REOEstimate, ci_method: str
) -> pl.DataFrame:
    """``reo_group`` rows of one (ds, arm, attribute) (``where``): the counts
    (rows and positives per group in default and random traffic, shapes (K,))
    beside the estimate's per-group values, so a reader sees what each ΔU_k
    rests on. A small group's reason names its arm and attribute. Built by
    column, the numbers as arrays (K rows: a dict a row cost ~0.1 s a day at K = 4,096)."""
    n_g_rec, n_g_rand, a, b = counts
    arm, attribute = where["arm"], where["attribute"]
    K = len(groups)

    def ints(x) -> np.ndarray:
        return np.asarray(x, dtype=np.int64)

    def floats(x) -> np.ndarray:
        return np.asarray(x, dtype=np.float64)

    cols = {
        **{k: [v] * K for k, v in where.items()},
        "group": list(groups),
        "n_rec": ints(n_g_rec),
        "n_rand": ints(n_g_rand),
        "n_pos_rec": ints(a),
        "n_pos_rand": ints(b),
        "P": floats(est.P),
        "Q": floats(est.Q),
        "U": floats(est.U),
        "delta_U": floats(est.delta_U),
        "se_delta_U": floats(est.se_delta_U),
        "ci_low": floats(est.ci_low_delta_U),
        "ci_high": floats(est.ci_high_delta_U),
        "ci_method": [ci_method] * K,
        "reason": list(est.group_reasons) if est.group_reasons else [None] * K,
        "small_group": list(est.small_group),
        "small_group_reason": [f"arm {arm}, {attribute}: {r}" if r else None for r in est.small_group_reasons],
    }
    return pl.DataFrame({k: cols[k] for k in REO_GROUP_SCHEMA}, schema=REO_GROUP_SCHEMA)


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
