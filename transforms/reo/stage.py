"""Seed 001 beyond REO (DESIGN §4.4): stage-wise diagnosis, RSP and user-side
precision, from the ``group_counts`` table (pure Polars/NumPy).

* **Stage-wise (App. I.4).** With a forced-inserted ``post_recall`` traffic
  D_pr beside default (D_rec) and random (D_rand) traffic, three ratio
  utilities of independent samples: recall U^recall_k = Q^pr_k/P_k, ranking
  U^rank_k = Q^rec_k/Q^pr_k and system U^sys_k = Q^rec_k/P_k, each with ΔU,
  REO and delta-method CIs exactly as :func:`fairmon.transforms.reo.estimate.estimate_reo`
  computes them for its two samples. They factor: U^sys = U^recall · U^rank.
* **RSP (App. H.1, eqs. 24–26).** Exposure parity without labels: U_k =
  share of group k among recommended rows ÷ its share in the candidate pool
  (random traffic's n, not n_pos; or, with ``[estimation] rsp_pool``, the
  pool table's item counts, known constants: :mod:`fairmon.transforms.reo.rsp_pool`).
  The seed's U_k = P(R = 1 | S = k) is C·U_k with C = P(R = 1) unknown from logs; ΔU_k = U_k − mean(U) (eq. 25)
  is reported on the U/mean(U) scale, and RSP = std/mean (eq. 26) is
  scale-free. The delta CI is REO's with group row counts in place of positives.
* **User-side precision (App. H.2, eq. 27).** For a user attribute:
  precision_k = n_pos/n of the default-traffic rows of users in group k; the
  disparity std/mean with a delta CI (independent binomials:
  Var(log p̂_k) = (1 − p_k)/(p_k n_k)).

When the count stage clusters rows (``[estimation] cluster_by``; DESIGN §4.1
"Clustered rows", transforms/reo/cluster.py), each table takes the per-bucket
counts (``buckets``) and uses the cluster-robust covariance in place of the
multinomial/binomial one: stage utilities and RSP as in ``reo``, user-side
precision by the ratio sandwich (:func:`ratio_log_covariance`).
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl

from fairmon.transforms.registry import (
    ARM,
    ATTR,
    CI_HIGH,
    CI_LOW,
    DS,
    GROUP,
    LEVEL,
    REASON,
    Bounds,
    Column,
    F,
    I,
    S,
    Table,
    declares,
    non_negative,
    probability,
)
from fairmon.transforms.reo.cluster import BucketSums, bucket_sums, ratio_log_covariance
from fairmon.transforms.reo.estimate import estimate_reo, reo_log_gradient, reo_of_utilities, z_value
from fairmon.transforms.reo.reo_math import few_cluster_scale
from fairmon.transforms.reo.reo_tables import MISSING_GROUP, has_impressions, listed_groups
from fairmon.transforms.reo.rsp_pool import pool_counts_for, pool_groups


def has_rsp(cfg) -> bool:
    """Whether the config asks for the rsp table (``[estimation] rsp``; seed 001 App. H.1)."""
    return cfg.impressions is not None and bool(cfg.estimation.rsp)


def stage_options(cfg) -> dict:
    """The keyword arguments of :func:`reo_stage_table` from ``[estimation]``."""
    return {"level": cfg.estimation.confidence_level, "stage_traffic": cfg.estimation.stage_traffic}


def rsp_options(cfg) -> dict:
    """The keyword arguments of :func:`rsp_table`: user attributes are left out (user_precision covers them);
    the pool table comes as the stage's input ``pool``, not an option."""
    est = cfg.estimation
    return {"level": est.confidence_level, "exclude": tuple(est.user_attributes)}


def precision_options(cfg) -> dict:
    """The keyword arguments of :func:`user_precision_table` from ``[estimation]``."""
    est = cfg.estimation
    return {"user_attributes": est.user_attributes, "level": est.confidence_level}


def has_user_attributes(cfg) -> bool:
    """Whether the config names user attributes (the user_precision table, seed 001 App. H.2)."""
    return cfg.impressions is not None and bool(cfg.estimation.user_attributes)


REO_STAGE = Table(
    "reo_stage",
    "Stage-wise diagnosis: recall, ranking and system RTPR utilities, ΔU and REO per group.",
    "seed 001 App. I.4; DESIGN §4.4",
    ("ds", "arm", "attribute", "stage", "group"),
    (
        DS,
        ARM,
        ATTR,
        Column("stage", S, "-", "`recall` (post-recall ÷ random), `ranking` (default ÷ post-recall) or `system`."),
        GROUP,
        Column(
            "U",
            F,
            "ratio",
            "Stage utility: U^recall = Q^pr/P, U^rank = Q^rec/Q^pr, U^sys = Q^rec/P.",
            bounds=non_negative("U_non_negative"),
        ),
        Column("delta_U", F, "ratio", "Relative utility ΔU_k = U_k/mean(U) − 1 of the stage."),
        Column("se_delta_U", F, "ratio", "Delta-method SE of ΔU_k (two independent samples)."),
        CI_LOW,
        CI_HIGH,
        Column("reo", F, "ratio", "REO of the stage's utilities (std/mean).", bounds=non_negative("reo_non_negative")),
        Column("reo_se", F, "ratio", "Delta-method SE of the stage REO."),
        Column("reo_ci_low", F, "ratio", "Lower bound of the stage REO's interval (valid near 0, DESIGN §4.1)."),
        Column("reo_ci_high", F, "ratio", "Upper bound of the stage REO's interval."),
        LEVEL,
        REASON,
    ),
    "reo_stage",
    section="stages",
)

RSP = Table(
    "rsp",
    "Ranking-based statistical parity: exposure share in recommendations over share in the pool.",
    "seed 001 App. H.1, eqs. 24–26; DESIGN §4.4",
    ("ds", "arm", "attribute", "group"),
    (
        DS,
        ARM,
        ATTR,
        GROUP,
        Column(
            "share_rec",
            F,
            "share",
            "Group's share of the default-traffic rows of the arm.",
            bounds=probability("share_rec_is_share"),
        ),
        Column(
            "share_pool",
            F,
            "share",
            "Group's share of the candidate pool: random-traffic rows, or its items in the `estimation.rsp_pool` "
            "table (known, no sampling variance; the reason then names the table).",
            bounds=probability("share_pool_is_share"),
        ),
        Column("U", F, "ratio", "share_rec/share_pool over its mean across groups (the seed's U_k up to P(R = 1))."),
        Column("delta_U", F, "ratio", "Additive ΔU_k = U_k − mean(U) on that scale (eq. 25)."),
        Column("se_delta_U", F, "ratio", "Delta-method SE of ΔU_k."),
        Column(
            "rsp", F, "ratio", "RSP = std(U)/mean(U) (eq. 26), scale-free.", bounds=non_negative("rsp_non_negative")
        ),
        Column("se", F, "ratio", "Delta-method SE of RSP (default traffic's term alone with a pool table)."),
        CI_LOW,
        CI_HIGH,
        LEVEL,
        REASON,
    ),
    None,
    section="stages",
)

USER_PRECISION = Table(
    "user_precision",
    "User-side precision per user group (share of positives in default traffic) and its disparity.",
    "seed 001 App. H.2, eq. 27; DESIGN §4.4",
    ("ds", "arm", "attribute", "group"),
    (
        DS,
        ARM,
        Column("attribute", S, "-", "User attribute (config `estimation.user_attributes`)."),
        GROUP,
        Column(
            "n",
            I,
            "user-item pairs",
            "Default-traffic rows of users in the group.",
            bounds=Bounds("n_positive", min_value=1),
        ),
        Column("n_pos", I, "user-item pairs", "Of those, rows with Y = 1."),
        Column(
            "precision",
            F,
            "probability",
            "n_pos / n (seed 001 eq. 27).",
            bounds=probability("precision_is_probability"),
        ),
        Column("se", F, "probability", "Binomial SE of the precision."),
        CI_LOW,
        CI_HIGH,
        Column(
            "disparity",
            F,
            "ratio",
            "std/mean of the groups' precisions.",
            bounds=non_negative("disparity_non_negative"),
        ),
        Column("disparity_se", F, "ratio", "Delta-method SE of the disparity (independent binomials)."),
        Column("disparity_ci_low", F, "ratio", "Lower bound of the disparity's interval."),
        Column("disparity_ci_high", F, "ratio", "Upper bound of the disparity's interval."),
        LEVEL,
        REASON,
    ),
    None,
    section="stages",
)


REO_STAGE_SCHEMA = REO_STAGE.schema
RSP_SCHEMA = RSP.schema
USER_PRECISION_SCHEMA = USER_PRECISION.schema

#: (stage, numerator traffic, denominator traffic) of App. I.4.
STAGES = (("recall", "post_recall", "random"), ("ranking", "default", "post_recall"), ("system", "default", "random"))


def _by_group(frame: pl.DataFrame, groups: list[str], col: str) -> tuple[np.ndarray, int]:
    m = {g: int(v) for g, v in frame.select("group", col).iter_rows()}
    total = int(frame.get_column("n").sum()) if frame.height else 0
    return np.array([m.get(g, 0) for g in groups], dtype=np.int64), total


def _traffic(day: pl.DataFrame, traffic: str, arm: str, attribute: str) -> pl.DataFrame:
    """Rows of one traffic for an arm: the arm's own, else the shared `all` rows (random traffic)."""
    sub = day.filter((pl.col("traffic") == traffic) & (pl.col("attribute") == attribute))
    own = sub.filter(pl.col("arm") == arm)
    return own if own.height else sub.filter(pl.col("arm") == "all")


def _clusters(
    buckets: pl.DataFrame | None, frame: pl.DataFrame, groups: list[str], n: int, value: str = "n_pos"
) -> tuple[BucketSums | None, str | None]:
    """Per-bucket sums of the sample ``frame`` (group_counts rows of one
    traffic × arm × attribute), or (None, None) without clustering."""
    if buckets is None or frame.is_empty():
        return None, None
    first = frame.row(0, named=True)
    traffic, arm, attribute = first["traffic"], first["arm"], first["attribute"]
    return bucket_sums(buckets, traffic, arm, attribute, groups, n, value)


@declares(
    REO_STAGE,
    stage="impressions",
    inputs=("counts", "ds", "buckets"),
    enabled=has_impressions,
    options=stage_options,
    omit_empty=True,
)
def reo_stage_table(
    counts: pl.DataFrame,
    ds: dt.date,
    *,
    level: float = 0.95,
    stage_traffic: str = "post_recall",
    buckets: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The ``reo_stage`` table for day ``ds``: per arm × attribute × stage × group
    U, ΔU with SE and CI, and the stage's REO with SE and CI (seed 001 App. I.4).

    Input: ``group_counts`` rows (DESIGN §3). Arms are those with
    ``stage_traffic`` rows; nothing is returned when there are none. Undefined
    values are NaN with a reason. ``buckets``: the count stage's per-bucket
    counts of the day (cluster-robust intervals). Returns a frame with
    :data:`REO_STAGE_SCHEMA`.
    """
    day = counts.filter(pl.col("ds") == ds)
    stage_rows = day.filter(pl.col("traffic") == stage_traffic)
    rows: list[dict] = []
    for arm, attribute in sorted(set(stage_rows.select("arm", "attribute").iter_rows())):
        frames = {t: _traffic(day, t, arm, attribute) for t in ("default", stage_traffic, "random")}
        groups = listed_groups(*frames.values())
        for stage, num, den in STAGES:
            num_t = stage_traffic if num == "post_recall" else num
            den_t = stage_traffic if den == "post_recall" else den
            a, n_a = _by_group(frames[num_t], groups, "n_pos")
            b, n_b = _by_group(frames[den_t], groups, "n_pos")
            c_a, why_a = _clusters(buckets, frames[num_t], groups, n_a)
            c_b, why_b = _clusters(buckets, frames[den_t], groups, n_b)
            e = estimate_reo(
                groups, a, n_a, b, n_b, level=level, clusters_rec=c_a, clusters_rand=c_b, cluster_note=why_a or why_b
            )
            for i, g in enumerate(groups):
                rows.append(
                    {
                        "ds": ds,
                        "arm": arm,
                        "attribute": attribute,
                        "stage": stage,
                        "group": g,
                        "U": float(e.U[i]),
                        "delta_U": float(e.delta_U[i]),
                        "se_delta_U": float(e.se_delta_U[i]),
                        "ci_low": float(e.ci_low_delta_U[i]),
                        "ci_high": float(e.ci_high_delta_U[i]),
                        "reo": e.reo,
                        "reo_se": e.se,
                        "reo_ci_low": e.ci_low,
                        "reo_ci_high": e.ci_high,
                        "level": level,
                        "reason": e.group_reasons[i] or e.reason,
                    }
                )
    return pl.DataFrame(rows, schema=REO_STAGE_SCHEMA)


@declares(RSP, stage="impressions", inputs=("counts", "ds", "buckets", "pool"), enabled=has_rsp, options=rsp_options)
def rsp_table(
    counts: pl.DataFrame,
    ds: dt.date,
    *,
    level: float = 0.95,
    exclude: tuple[str, ...] = (),
    buckets: pl.DataFrame | None = None,
    pool: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The ``rsp`` table for day ``ds`` (seed 001 App. H.1, eqs. 24–26): per
    arm × attribute (except ``exclude``, e.g. user attributes) × group the
    recommended share, the pool share (random traffic's rows), U, additive ΔU,
    and the attribute's RSP with SE and CI; cluster-robust with ``buckets``
    (the group's rows per bucket in place of its positives). ``pool``: the
    day's pool table (:func:`fairmon.transforms.reo.rsp_pool.pool_item_counts`,
    config ``[estimation] rsp_pool``); an attribute it describes takes its
    shares from the items there, known constants whose variance term drops
    out (:func:`fairmon.transforms.reo.estimate.estimate_reo` with ``known_pool``), and each
    of its rows' reason names the table. Returns :data:`RSP_SCHEMA`."""
    day = counts.filter(pl.col("ds") == ds)
    rows: list[dict] = []
    rec_all = day.filter(pl.col("traffic") == "default")
    for arm, attribute in sorted(set(rec_all.select("arm", "attribute").iter_rows())):
        if attribute in exclude:
            continue
        rec = rec_all.filter((pl.col("arm") == arm) & (pl.col("attribute") == attribute))
        rand = _traffic(day, "random", arm, attribute)
        groups = listed_groups(rec, rand)
        if pool_counts_for(pool, attribute, []) is not None:  # the pool's groups, not random traffic's
            groups = sorted(set(listed_groups(rec)) | set(pool_groups(pool, attribute)))
        n_k, n_rec = _by_group(rec, groups, "n")
        c_rec, why_rec = _clusters(buckets, rec, groups, n_rec, "n")
        if (items := pool_counts_for(pool, attribute, groups)) is not None:
            m_k, n_pool, source = items
            c_pool, why_pool = None, None
            note = f"pool shares known from the pool table {source} (not estimated: no pool term in the SE)"
        else:
            m_k, n_pool = _by_group(rand, groups, "n")
            c_pool, why_pool = _clusters(buckets, rand, groups, n_pool, "n")
            note = None
        e = estimate_reo(
            groups, n_k, n_rec, m_k, n_pool, level=level, min_expected_positives=0, known_pool=items is not None,
            clusters_rec=c_rec, clusters_rand=c_pool, cluster_note=why_rec or why_pool,
        )  # fmt: skip
        mean_u = float(np.nanmean(e.U)) if np.isfinite(e.U).any() else float("nan")
        for i, g in enumerate(groups):
            why = e.group_reasons[i] or e.reason
            rows.append(
                {
                    "ds": ds,
                    "arm": arm,
                    "attribute": attribute,
                    "group": g,
                    "share_rec": float(n_k[i] / n_rec) if n_rec else float("nan"),
                    "share_pool": float(m_k[i] / n_pool) if n_pool else float("nan"),
                    "U": float(e.U[i] / mean_u) if mean_u else float("nan"),
                    "delta_U": float(e.U[i] / mean_u - 1) if mean_u else float("nan"),
                    "se_delta_U": float(e.se_delta_U[i]),
                    "rsp": e.reo,
                    "se": e.se,
                    "ci_low": e.ci_low,
                    "ci_high": e.ci_high,
                    "level": level,
                    "reason": (f"{note}; {why}" if why else note) if note else why,
                }
            )
    return pl.DataFrame(rows, schema=RSP_SCHEMA)


def precision_disparity(
    n_pos: np.ndarray, n: np.ndarray, level: float = 0.95, V: np.ndarray | None = None, df: float = float("inf")
) -> tuple[float, float, float, float, str | None]:
    """std/mean of per-group precision p_k = n_pos_k/n_k (seed 001 App. H.2, eq. 27)
    with a delta CI over independent binomials: Var = Σ g_k² (1 − p_k)/(p_k n_k),
    g = ∂(std/mean)/∂log p; or Var = gᵀ V g with ``V`` = Ĉov(log p̂), shape
    (K, K), when rows are clustered (:func:`ratio_log_covariance`), whose
    ``df`` (buckets − 1) sets a t quantile (few-cluster correction,
    :func:`fairmon.transforms.reo.reo_math.few_cluster_scale`). Shapes (K,).
    Returns (disparity, se, ci_low, ci_high, reason); NaN with a reason when a
    group has no rows or no positives."""
    n_pos, n = np.asarray(n_pos, float), np.asarray(n, float)
    nan = float("nan")
    if n.size < 2:
        return nan, nan, nan, nan, "fewer than 2 user groups"
    if (n <= 0).any():
        return nan, nan, nan, nan, "a user group has no default-traffic rows"
    p = n_pos / n
    d = reo_of_utilities(p)
    if (p <= 0).any() or (p >= 1).any():
        return d, nan, nan, nan, "a group's precision is 0 or 1: delta SE undefined"
    if d == 0:
        return d, nan, nan, nan, "disparity 0: std/mean not differentiable there"
    g = reo_log_gradient(p)
    se = float(np.sqrt(np.sum(g**2 * (1 - p) / (p * n)) if V is None else g @ V @ g))
    z = z_value(level) * few_cluster_scale(level, df)
    return d, se, max(0.0, d - z * se), d + z * se, None


@declares(
    USER_PRECISION,
    stage="impressions",
    inputs=("counts", "ds", "buckets"),
    enabled=has_user_attributes,
    options=precision_options,
)
def user_precision_table(
    counts: pl.DataFrame,
    ds: dt.date,
    user_attributes: list[str],
    *,
    level: float = 0.95,
    buckets: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The ``user_precision`` table for day ``ds`` (seed 001 App. H.2): per arm ×
    user attribute × group n, n_pos, precision with a Wilson-free delta SE and
    CI, and the attribute's disparity; cluster-robust SEs with ``buckets``
    (:func:`ratio_log_covariance`), their intervals with t_{G−1}. Returns :data:`USER_PRECISION_SCHEMA`."""
    day = counts.filter((pl.col("ds") == ds) & (pl.col("traffic") == "default"))
    z = z_value(level)
    rows: list[dict] = []
    for arm, attribute in sorted(set(day.select("arm", "attribute").iter_rows())):
        if attribute not in user_attributes:
            continue
        sub = day.filter(
            (pl.col("arm") == arm) & (pl.col("attribute") == attribute) & (pl.col("group") != MISSING_GROUP)
        )
        groups = sorted(sub.get_column("group").to_list())
        n, _ = _by_group(sub, groups, "n")
        pos, _ = _by_group(sub, groups, "n_pos")
        V, cluster_why, df = None, None, float("inf")
        if buckets is not None:
            every = day.filter((pl.col("arm") == arm) & (pl.col("attribute") == attribute))
            n_all = int(every.get_column("n").sum())  # bucket rows include the '(missing)' group
            c_n, why_n = _clusters(buckets, every, groups, n_all, "n")
            c_pos, why_pos = _clusters(buckets, every, groups, n_all, "n_pos")
            cluster_why = why_n or why_pos
            if c_n is not None and c_pos is not None:
                # df: the buckets the ratio sandwich sums over (rows of a listed group), less one
                V, df = ratio_log_covariance(c_pos.pos, c_n.pos), float((c_n.pos.sum(axis=1) > 0).sum() - 1)
        disp, se, lo, hi, why = precision_disparity(pos, n, level, V, df)
        crit = z * few_cluster_scale(level, df)
        if cluster_why:
            se = lo = hi = float("nan")
            why = cluster_why
        for i, g in enumerate(groups):
            p = pos[i] / n[i] if n[i] else float("nan")
            if cluster_why or not 0 < p < 1:  # at 0 or 1 both SEs are 0: no interval, not a certain one
                se_p = float("nan")
            elif V is not None:
                se_p = float(p * np.sqrt(V[i, i])) if n[i] else float("nan")
            else:
                se_p = float(np.sqrt(p * (1 - p) / n[i])) if n[i] else float("nan")
            rows.append(
                {
                    "ds": ds,
                    "arm": arm,
                    "attribute": attribute,
                    "group": g,
                    "n": int(n[i]),
                    "n_pos": int(pos[i]),
                    "precision": float(p),
                    "se": se_p,
                    "ci_low": float(np.clip(p - crit * se_p, 0.0, 1.0)),  # NaN stays NaN
                    "ci_high": float(np.clip(p + crit * se_p, 0.0, 1.0)),
                    "disparity": disp,
                    "disparity_se": se,
                    "disparity_ci_low": lo,
                    "disparity_ci_high": hi,
                    "level": level,
                    "reason": why,
                }
            )
    return pl.DataFrame(rows, schema=USER_PRECISION_SCHEMA)
