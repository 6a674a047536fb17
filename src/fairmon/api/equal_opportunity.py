"""REO (Ranking-based Equal Opportunity) and its A/B differences on frames of
rows or per-group counts (seed 001; DESIGN §4.1).

This module adapts frames only: rows are counted like the pipeline's count
stage (:mod:`fairmon.api.counting`), the counts are laid out as the
pipeline's ``group_counts`` table, and the pipeline's own table builders
(:func:`fairmon.transforms.reo.reo_tables.reo_tables`,
:func:`~fairmon.transforms.reo.ab_tables.reo_ab_table`) compute the
estimates, so the numbers are the pipeline's for the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from fairmon.api.counting import CLUSTER_BUCKETS, CLUSTER_EXACT, COUNT_COLUMNS, UNDATED, count_rows, tidy_counts
from fairmon.api.frames import as_caller, eager
from fairmon.transforms.blas import one_blas_thread, single_blas_thread
from fairmon.transforms.reo.ab_tables import ab_pairs, reo_ab_table
from fairmon.transforms.reo.estimate import EIGHTY_PERCENT_RULE_REO, MIN_EXPECTED_POSITIVES
from fairmon.transforms.reo.reo_tables import GROUP_COUNTS_SCHEMA, reo_tables

#: The default ``cluster``: ``request_id`` when the rows have it, else independent rows (:func:`resolve_cluster`).
AUTO_CLUSTER = "auto"
#: The column ``auto`` clusters by, as the pipeline's ``[estimation] cluster_by = "auto"``.
AUTO_CLUSTER_COLUMN = "request_id"
#: ``cluster`` and ``cluster_by`` for independent rows.
NO_CLUSTER = "none"
#: Columns of :func:`reo`'s result (``ds`` first when the input has a ``ds`` column).
REO_COLUMNS = (
    "arm",
    "attribute",
    "K",
    "n_rec",
    "n_rand",
    "reo",
    "se",
    "ci_low",
    "ci_high",
    "reo_bc",
    "parity_stat",
    "parity_df",
    "parity_p_value",
    "reo_threshold",
    "verdict_80pct",
    "n_small_groups",
    "ci_method",
    "level",
    "reason",
    "cluster_by",
    "design_effect",
    "n_clusters",
    "cluster_sums",
)
#: Columns of :func:`reo_groups`' result.
REO_GROUP_COLUMNS = (
    "arm",
    "attribute",
    "group",
    "n_rec",
    "n_rand",
    "n_pos_rec",
    "n_pos_rand",
    "Q",
    "P",
    "U",
    "delta_U",
    "se_delta_U",
    "ci_low",
    "ci_high",
    "small_group",
    "small_group_reason",
    "reason",
    "cluster_by",
)
#: Columns of :func:`reo_ab`'s result.
REO_AB_COLUMNS = (
    "attribute",
    "control",
    "treatment",
    "metric",
    "method",
    "diff",
    "se",
    "ci_low",
    "ci_high",
    "p_value",
    "q_value",
    "df",
    "level",
    "reason",
    "cluster_by",
    "design_effect",
    "n_clusters",
    "cluster_sums",
)


def _group_counts_table(
    data: Any,
    *,
    group: str | Sequence[str],
    label: str | Sequence[str] | None,
    traffic: str,
    arm: str | None,
    label_rule: str,
    traffic_stages: Sequence[str],
    cluster: str | None = AUTO_CLUSTER,
    cluster_buckets: int = CLUSTER_BUCKETS,
    cluster_exact_max: int = CLUSTER_EXACT,
) -> tuple[pl.DataFrame, pl.DataFrame | None, list, Any, bool, str]:
    """(counts in the pipeline's ``group_counts`` layout, the per-bucket counts
    when the rows are clustered, the days, the caller's kind, whether the input
    was dated, the cluster column or ``none``: :func:`resolve_cluster`). Raises
    ValueError when no default or no random traffic is present, or for a
    cluster column with counts."""
    frame, kind = eager(data, "rows" if label is not None else "counts")
    cluster = resolve_cluster(cluster, frame.columns if label is not None else ())
    buckets = None
    if label is not None:
        long = count_rows(
            frame,
            group=group,
            label=label,
            traffic=traffic,
            arm=arm,
            label_rule=label_rule,
            traffic_stages=traffic_stages,
            cluster=cluster,
            cluster_buckets=cluster_buckets,
            cluster_exact_max=cluster_exact_max,
        )
        tidy = long.group_by(*COUNT_COLUMNS[:4]).agg(pl.col("n").sum(), pl.col("n_pos").sum())
        if cluster is not None:
            buckets = long.filter(pl.col("cbucket").is_not_null())
    elif cluster is not None:
        raise ValueError("cluster needs rows (label=...): per-group counts carry no cluster ids")
    elif isinstance(group, str):
        tidy = tidy_counts(frame.to_polars(), group=group, traffic=traffic, arm=arm, traffic_stages=traffic_stages)
    else:
        raise TypeError("counts (label=None) carry one group column: pass group='<column>'")
    for t in ("default", "random"):
        if not (tidy.get_column("traffic") == t).any():
            raise ValueError(
                f"no {t} traffic in the {'rows' if label is not None else 'counts'}: REO needs default and random "
                "traffic (seed 001 eq. 4, U_k = Q_k / P_k)"
            )
    dated = "ds" in tidy.columns
    if not dated:
        tidy = tidy.with_columns(pl.lit(UNDATED).alias("ds"))
    table = tidy.with_columns(
        pl.col("ds").cast(pl.Date),
        pl.lit("fairmon.api").alias("source"),
        pl.col("ds").cast(pl.Date).alias("window_start"),
        pl.col("ds").cast(pl.Date).alias("window_end"),
    ).select(list(GROUP_COUNTS_SCHEMA))
    days = sorted(set(table.get_column("ds")))
    table = table.cast(GROUP_COUNTS_SCHEMA).sort("traffic", "arm", "attribute", "group")
    return table, buckets, days, kind, dated, cluster or NO_CLUSTER


def resolve_cluster(cluster: str | None, columns: Sequence[str]) -> str | None:
    """The column whose ids make a cluster, or None for independent rows.

    ``auto`` (the default, as ``[estimation] cluster_by = "auto"`` in the
    pipeline) is ``request_id`` when the rows have that column, else
    independent rows: the rows a request shows one user are not independent,
    so ``fairmon run`` clusters them, and the same rows must give the same
    interval here. ``none`` or None: independent rows; any other value: that
    column (an error later when it is missing). ``columns``: the rows'
    columns (empty for per-group counts, which carry no ids)."""
    if cluster is None or cluster == NO_CLUSTER:
        return None
    if cluster == AUTO_CLUSTER:
        return AUTO_CLUSTER_COLUMN if AUTO_CLUSTER_COLUMN in columns else None
    return cluster


#: The arguments of :func:`reo`, :func:`reo_groups` and :func:`reo_ab` that say how the input is counted
#: (:func:`_group_counts_table`); the others tune the estimates.
_COUNTING = (
    "group",
    "label",
    "traffic",
    "arm",
    "label_rule",
    "traffic_stages",
    "cluster",
    "cluster_buckets",
    "cluster_exact_max",
)


def _counted(data: Any, args: dict) -> tuple[pl.DataFrame, pl.DataFrame | None, list, Any, bool, str]:
    """:func:`_group_counts_table` of ``data`` with the counting arguments among ``args``."""
    return _group_counts_table(data, **{k: args[k] for k in _COUNTING})


@single_blas_thread
def _estimates(part: int, columns: tuple[str, ...], data: Any, **args) -> Any:
    """REO's tables of ``data`` as the pipeline computes them (reo_group, reo:
    seed 001 Algorithm 1), one day at a time; returns table ``part`` (0 or 1)'s
    ``columns`` (``ds`` first when the input is dated) in the caller's kind.
    ``args``: the arguments of :func:`reo` or :func:`reo_groups`."""
    counts, buckets, days, kind, dated, cluster_by = _counted(data, args)
    est = {k: v for k, v in args.items() if k not in _COUNTING}
    est["level"] = est.pop("confidence_level")
    parts = [reo_tables(counts, d, buckets=buckets, cluster_by=cluster_by, **est) for d in days]
    table = pl.concat([p[part] for p in parts])
    if part == 0:  # reo_group's rows say which clustering their intervals assume, as their reo row does
        said = pl.concat([p[1] for p in parts]).select("ds", "arm", "attribute", "cluster_by")
        table = table.join(said, on=["ds", "arm", "attribute"], how="left", maintain_order="left")
    return as_caller(table.select(*(["ds"] if dated else []), *columns), kind)


def reo(
    data: Any,
    *,
    group: str | Sequence[str],
    label: str | Sequence[str] | None = None,
    traffic: str = "traffic",
    arm: str | None = None,
    confidence_level: float = 0.95,
    ci_method: str = "delta",
    n_boot: int = 1000,
    seed: int = 0,
    reo_threshold: float = EIGHTY_PERCENT_RULE_REO,
    min_expected_positives: float = MIN_EXPECTED_POSITIVES,
    label_rule: str = "any",
    traffic_stages: Sequence[str] = (),
    cluster: str | None = AUTO_CLUSTER,
    cluster_buckets: int = CLUSTER_BUCKETS,
    cluster_exact_max: int = CLUSTER_EXACT,
) -> Any:
    """REO with missing labels, from default and random traffic, with its interval and verdict.

    ``data``: a pandas, Polars or PyArrow frame of either
      - rows (``label`` given): one per logged user-item pair, with the
        ``traffic`` column (``default`` or ``random``; other stages only with
        ``traffic_stages``, and ignored here), the boolean ``label`` column(s)
        (true/false or 0/1; Y = any true, or all with ``label_rule="all"``) and
        the ``group`` column(s) (one REO per column; a null value counts in the
        totals only, as the group ``(missing)``); or
      - per-group counts (``label=None``): columns ``traffic``, ``group`` (one
        column), ``n`` (rows) and ``n_pos`` (rows with Y true), and optionally
        ``attribute`` (else the group column's name), ``arm`` and ``ds`` (one
        result per day: random counts are then the day's window), e.g. the
        result of :func:`fairmon.group_counts` with ``group="group"``.
    ``arm``: the arm column of default traffic (None: a column ``arm`` if
    present, else one arm ``all``); random traffic is shared by every arm.
    The input is one unit (a day's default traffic and its random window)
    unless counts carry ``ds``.

    ``cluster``: a column of cluster ids (rows only; e.g. ``request_id`` or
    ``user_id``): rows sharing an id are not independent, so the intervals
    use the cluster-robust (sandwich) covariance, over each cluster when
    there are at most ``cluster_exact_max`` of them (the exact sandwich),
    else over ``cluster_buckets`` hash buckets of the ids, exactly as
    ``fairmon run`` with ``[estimation]
    cluster_by`` (DESIGN §4.1 "Clustered rows"); ``design_effect`` then says
    how much wider they are, ``n_clusters`` and ``cluster_sums`` what they
    sum over. ``"auto"`` (the default, as the pipeline's ``cluster_by =
    "auto"``): ``request_id`` when the rows have that column, else
    independent rows, so the same rows give the same interval here and in
    ``fairmon run``'s default. ``"none"`` or None: independent rows
    (``cluster_by = "none"``). Every result's ``cluster_by`` says which.

    ``ci_method``: ``delta`` (full multinomial covariance; DESIGN §4.1),
    ``delta_paper`` (the paper's diagonal Γ) or ``bootstrap_percentile`` /
    ``bootstrap_normal`` / ``bootstrap_bca`` (``n_boot`` resamples, seeded by
    ``seed``, as the pipeline's day seed). ``confidence_level`` in (0, 1).
    ``reo_threshold``: the verdict line for K > 2 (1/9, the 80 % rule, for
    K = 2); ``min_expected_positives`` marks small groups.

    Returns a frame of the caller's kind, one row per (ds,) arm and attribute,
    columns :data:`REO_COLUMNS`: K (groups), n_rec = |D_rec|, n_rand = |D_rand|,
    reo (dimensionless, std/mean of U with ddof 0), se, ci_low, ci_high (an
    interval valid near 0), reo_bc (bias-corrected), the parity test,
    verdict_80pct (``exceeds``/``within``/``inconclusive``/``undefined``, from
    the interval) and a reason wherever a value is NaN. These are the columns
    of the pipeline's ``reo`` table, computed by the same code, plus
    ``cluster_by`` (the cluster column the intervals assume, or ``none`` for
    independent rows), ``design_effect``, ``n_clusters`` and ``cluster_sums``.

    Raises ValueError for a missing column (naming it and the columns present),
    a label that is not boolean or is missing (null, NaN), an unknown traffic value, an empty ``cluster`` id,
    no default or no random traffic, malformed counts, or an unknown ``ci_method``; TypeError
    when ``data`` is not a data frame. Degenerate data (P_k = 0, Q_k = 0)
    gives NaN with a reason, not an exception.

    Source: seed 001 eqs. 3, 4, 7, 19 and Algorithm 1, with the full
    multinomial covariance and the near-parity interval of DESIGN §4.1.
    """
    return _estimates(1, REO_COLUMNS, **locals())  # every argument, as given


def reo_groups(
    data: Any,
    *,
    group: str | Sequence[str],
    label: str | Sequence[str] | None = None,
    traffic: str = "traffic",
    arm: str | None = None,
    confidence_level: float = 0.95,
    ci_method: str = "delta",
    n_boot: int = 1000,
    seed: int = 0,
    min_expected_positives: float = MIN_EXPECTED_POSITIVES,
    label_rule: str = "any",
    traffic_stages: Sequence[str] = (),
    cluster: str | None = AUTO_CLUSTER,
    cluster_buckets: int = CLUSTER_BUCKETS,
    cluster_exact_max: int = CLUSTER_EXACT,
) -> Any:
    """Per-group terms of REO: Q_k, P_k, U_k = Q_k/P_k and ΔU_k = U_k/mean(U) − 1 with SEs and CIs.

    Inputs and arguments (``cluster`` included) as :func:`reo`. Raises ValueError and TypeError as
    :func:`reo` does. Returns a frame of the
    caller's kind, one row per (ds,) arm × attribute × group (``(missing)``
    excluded), columns :data:`REO_GROUP_COLUMNS` (the pipeline's ``reo_group``
    table): counts, Q = n_pos_rec/n_rec and P = n_pos_rand/n_rand (shares of
    all rows of the traffic), U, delta_U, se_delta_U, ci_low/ci_high of
    delta_U, small_group with its reason; and ``cluster_by``, as its
    :func:`reo` row says (the cluster column, or ``none``).

    Source: seed 001 eqs. 3, 4, 7 and Algorithm 1 (DESIGN §4.1).
    """
    return _estimates(0, REO_GROUP_COLUMNS, **locals())  # every argument, as given


def reo_ab(
    data: Any,
    *,
    group: str | Sequence[str],
    control: str,
    treatments: Sequence[str] | None = None,
    label: str | Sequence[str] | None = None,
    traffic: str = "traffic",
    arm: str | None = None,
    methods: Sequence[str] = ("delta",),
    confidence_level: float = 0.95,
    folds: int = 10,
    n_boot: int = 1000,
    seed: int = 0,
    label_rule: str = "any",
    traffic_stages: Sequence[str] = (),
    cluster: str | None = AUTO_CLUSTER,
    cluster_buckets: int = CLUSTER_BUCKETS,
    cluster_exact_max: int = CLUSTER_EXACT,
) -> Any:
    """A/B differences of REO and of each ΔU_k, treatment arm minus control arm.

    ``data``: rows or counts as for :func:`reo`, with default traffic split by
    the ``arm`` column (None: the column ``arm``); the random traffic is shared by both arms (seed 001
    Algorithm 2). ``control``: the control arm; ``treatments``: the arms to
    compare with it (None: every other arm). ``methods``: any of ``delta``
    (joint delta method through the shared P̂, DESIGN §4.1), ``delta_paper``
    (SE = sqrt(SE_T² + SE_C²)), ``partition`` (paired folds, ``folds``) and
    ``bootstrap`` (``n_boot`` joint resamples seeded by ``seed``).
    ``cluster``/``cluster_buckets``/``cluster_exact_max``: cluster-robust intervals as in :func:`reo`
    (by default by ``request_id`` when the rows have it, as ``fairmon run``).

    Returns a frame of the caller's kind, one row per (ds,) attribute ×
    treatment × metric (``reo``, then ``delta_U:<group>``) × method, columns
    :data:`REO_AB_COLUMNS`: diff = metric_T − metric_C (dimensionless), se,
    ci_low, ci_high at ``confidence_level``, two-sided p_value, its
    Benjamini–Hochberg q_value over the day's rows of a method, df (the
    partition method's t degrees of freedom), a reason for NaNs, cluster_by
    (the cluster column the intervals assume, or ``none``) and design_effect.

    Raises ValueError when ``control`` or a treatment is not an arm of the
    default traffic (naming the arms present), for an unknown method, and as
    :func:`reo` for bad input.

    Source: seed 001 Algorithms 2–4; the joint delta method of DESIGN §4.1.
    """
    counts, buckets, days, kind, dated, cluster_by = _counted(data, locals())
    arms = sorted(set(counts.filter(pl.col("traffic") == "default").get_column("arm")))
    wanted = [control, *(treatments or [])]
    unknown = [a for a in wanted if a not in arms]
    if unknown:
        raise ValueError(f"arm(s) {unknown} have no default traffic; arms present: {', '.join(arms)}")
    pairs = [(control, t) for t in treatments] if treatments else ab_pairs(arms, control, [])
    if not pairs:
        raise ValueError(f"no treatment arm besides the control {control!r}; arms present: {', '.join(arms)}")
    with one_blas_thread():  # the same last bits as the pipeline's (fairmon.transforms.blas)
        out = pl.concat(
            [
                reo_ab_table(
                    counts,
                    d,
                    pairs,
                    methods=tuple(methods),
                    level=confidence_level,
                    folds=folds,
                    n_boot=n_boot,
                    seed=seed,
                    buckets=buckets,
                    cluster_by=cluster_by,
                )
                for d in days
            ]
        )
    return as_caller(out.select(*(["ds"] if dated else []), *REO_AB_COLUMNS), kind)
