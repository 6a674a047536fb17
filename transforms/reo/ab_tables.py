"""The ``reo_ab`` table of a day: A/B differences of REO and of ΔU_k between
arms (seed 001 §3.3 and App. G, Algorithms 2–4; DESIGN §4.1), from the group counts.

Pure: no I/O. Its declaration sits beside the function that computes it
(DESIGN §1); the estimators are in :mod:`fairmon.transforms.reo.ab`.
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from fairmon.transforms.registry import (
    ATTR,
    CI_HIGH,
    CI_LOW,
    DS,
    LEVEL,
    REASON,
    Column,
    F,
    S,
    Table,
    declares,
    non_negative,
    probability,
)
from fairmon.transforms.reo.ab import ab_estimates
from fairmon.transforms.reo.check_frames import reo_ab_check_frame
from fairmon.transforms.reo.cluster import (
    bucket_sums,
    group_arrays,
)
from fairmon.transforms.reo.cluster_keys import CLUSTER_BY, CLUSTER_SUMS, DESIGN_EFFECT, N_CLUSTERS
from fairmon.transforms.reo.multiplicity import bh_q_values
from fairmon.transforms.reo.reo_tables import (
    cluster_columns,
    cluster_name,
    day_rng,
    has_impressions,
    listed_groups,
)

REO_AB = Table(
    "reo_ab",
    "A/B differences of REO and of ΔU_k between a treatment and its control, by method.",
    "seed 001 §3.3 and App. G, Algorithms 2–4; DESIGN §4.1 (joint delta method)",
    ("ds", "attribute", "control", "treatment", "metric", "method"),
    (
        DS,
        ATTR,
        Column("control", S, "-", "Control arm."),
        Column("treatment", S, "-", "Treatment arm."),
        Column("metric", S, "-", "`reo`, or `delta_U:<group>` for a group's relative utility."),
        Column("diff", F, "ratio", "metric(treatment) − metric(control)."),
        Column(
            "se", F, "ratio", "Standard error of the difference by `method`.", bounds=non_negative("se_non_negative")
        ),
        CI_LOW,
        CI_HIGH,
        Column(
            "p_value",
            F,
            "probability",
            "Two-sided p-value of no difference.",
            bounds=probability("p_value_in_unit_interval"),
        ),
        Column("method", S, "-", "delta (joint), delta_paper, partition or bootstrap."),
        Column(
            "df",
            F,
            "degrees of freedom",
            "Degrees of freedom of the t reference: partition's folds − 1; delta on clustered rows, the "
            "cluster-robust variance's units − 1 (few-cluster correction); NaN for normal references.",
        ),
        LEVEL,
        REASON,
        Column(
            "q_value",
            F,
            "probability",
            "Benjamini–Hochberg q-value over the day's p-values of one method (pairs, attributes, metrics).",
            bounds=probability("q_value_is_probability"),
        ),
        CLUSTER_BY,
        DESIGN_EFFECT,
        N_CLUSTERS,
        CLUSTER_SUMS,
    ),
    "reo_ab",
    summary=True,
    section="ab",
    check_frame=lambda frame, day: reo_ab_check_frame(frame),
)


REO_AB_SCHEMA: dict[str, pl.DataType] = REO_AB.schema


def ab_pairs(arms: list[str], control: str | None, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (control, treatment) pairs of a day: the explicit ``pairs`` plus,
    when ``control`` is set and present, control against every other arm."""
    out = [tuple(p) for p in pairs]
    if control is not None and control in arms:
        out += [(control, a) for a in sorted(arms) if a != control and (control, a) not in out]
    return out


def reo_ab_options(cfg) -> dict:
    """The keyword arguments of :func:`reo_ab_day` from the config's ``[ab]`` and ``[estimation]``."""
    ab, est = cfg.ab, cfg.estimation
    return {
        "control": ab.control,
        "configured_pairs": [tuple(p) for p in ab.pairs],
        "methods": tuple(ab.methods),
        "level": est.confidence_level,
        "folds": ab.partition_folds,
        "n_boot": ab.bootstrap_resamples,
        "seed": est.seed,
        "cluster_by": cluster_name(cfg),
    }


@declares(
    REO_AB,
    stage="impressions",
    inputs=("counts", "ds", "buckets"),
    enabled=has_impressions,
    options=reo_ab_options,
    omit_empty=True,
)
def reo_ab_day(
    counts: pl.DataFrame,
    ds: dt.date,
    buckets: pl.DataFrame | None = None,
    *,
    control: str | None,
    configured_pairs: list[tuple[str, str]],
    **kw,
) -> pl.DataFrame:
    """The day's ``reo_ab``: :func:`reo_ab_table` over the pairs
    :func:`ab_pairs` makes of the day's default-traffic arms (those of the
    ``reo`` table) and the config's ``control`` and ``configured_pairs``;
    ``kw`` as in :func:`reo_ab_table`. Returns an empty frame (no partition
    published) when there is no pair."""
    day = counts.filter((pl.col("ds") == ds) & (pl.col("traffic") == "default"))
    pairs = ab_pairs(sorted(set(day.get_column("arm").to_list())), control, configured_pairs)
    if not pairs:
        return pl.DataFrame(schema=REO_AB_SCHEMA)
    return reo_ab_table(counts, ds, pairs, buckets=buckets, **kw)


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
    cluster-robust intervals, with ``cluster_by``, ``design_effect``, ``n_clusters`` and
    ``cluster_sums`` per row.
    Returns a frame with :data:`REO_AB_SCHEMA`.
    """
    day = counts.filter(pl.col("ds") == ds)
    rec = day.filter(pl.col("traffic") == "default")
    rand = day.filter(pl.col("traffic") == "random")
    arms = set(rec.get_column("arm").to_list())
    parts: list[pl.DataFrame] = []  # one frame per pair and attribute, in order
    for attribute in sorted(set(day.get_column("attribute").to_list())):
        r_attr = rand.filter(pl.col("attribute") == attribute)
        for control, treatment in pairs:
            base = {"ds": ds, "attribute": attribute, "control": control, "treatment": treatment, "level": level}
            if control not in arms or treatment not in arms:
                missing = [a for a in (control, treatment) if a not in arms]
                why = f"no default traffic for arm(s) {', '.join(missing)}"
                rows = [{**base, "metric": "reo", "method": m, "reason": why} for m in methods]
                parts.append(pl.DataFrame(rows, schema=REO_AB_SCHEMA))
                continue
            c_attr = rec.filter((pl.col("attribute") == attribute) & (pl.col("arm") == control))
            t_attr = rec.filter((pl.col("attribute") == attribute) & (pl.col("arm") == treatment))
            groups = listed_groups(c_attr, t_attr, r_attr)
            _, a_C, n_C = group_arrays(c_attr, groups)
            _, a_T, n_T = group_arrays(t_attr, groups)
            _, b, n_rand = group_arrays(r_attr, groups)
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
                columns=True,
            )
            units = cluster_columns([c for c, _ in sums])
            parts.append(_estimate_frame(base, est, cluster_by if clustered else "none", units))
    out = pl.concat(parts, how="vertical") if parts else pl.DataFrame(schema=REO_AB_SCHEMA)
    if out.height:  # one BH family per method: the day's tests of every pair, attribute and metric
        out = out.with_columns(
            pl.col("p_value")
            .map_batches(lambda p: pl.Series(bh_q_values(p.to_numpy()), dtype=pl.Float64))
            .over("method")
            .alias("q_value")
        )
    return out.select(list(REO_AB_SCHEMA))


def _estimate_frame(base: dict, est: dict, cluster_by: str, units: dict) -> pl.DataFrame:
    """``reo_ab`` rows of one pair and attribute (``base``: ds, attribute,
    control, treatment, level) from its estimates by column
    (``ab_estimates(..., columns=True)``): 4 × (1 + K) rows a pair (16,388 at
    K = 4,096), where a dict per row cost ~0.3 s a day (bench/README "scaling.py")."""
    n = len(est["metric"])
    cols: dict[str, list] = {k: [v] * n for k, v in base.items()}
    cols.update(est)
    cols["cluster_by"] = [cluster_by] * n
    for name, value in units.items():  # n_clusters, cluster_sums
        cols[name] = [value] * n
    cols["q_value"] = [None] * n
    return pl.DataFrame({k: cols[k] for k in REO_AB_SCHEMA}, schema=REO_AB_SCHEMA)
