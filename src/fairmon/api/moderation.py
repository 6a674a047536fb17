"""Model decisions and human labelers on frames (seed 002; DESIGN §4.2–4.3):
prevalence at the decision threshold and signal detection theory against gold
labels. The rows go through the pipeline's parsers (booleans as true/false or
0/1, numbers or numeric text) and the pipeline's table builders
(:func:`fairmon.transforms.decisions.decision_tables.threshold_tables`,
:func:`~fairmon.transforms.decisions.sdt_tables.sdt_table`) compute.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from fairmon.api.counting import UNDATED
from fairmon.api.frames import as_caller, as_polars, names, reject_reserved, require_columns
from fairmon.transforms.blas import one_blas_thread, single_blas_thread
from fairmon.transforms.contract import ATTR_PREFIX
from fairmon.transforms.contract_values import parse_bool, parse_float
from fairmon.transforms.decisions.decision_tables import ALL, threshold_tables
from fairmon.transforms.decisions.sdt_tables import sdt_table
from fairmon.transforms.reo.reo_tables import MISSING_GROUP

#: Columns of :func:`threshold_prevalence`' result.
PREVALENCE_COLUMNS = (
    "attribute",
    "group",
    "t",
    "d",
    "n_window",
    "n_eff",
    "prevalence_at_threshold",
    "se",
    "ci_low",
    "ci_high",
    "ci_method",
    "implied_cost_ratio",
    "cost_ratio_ci_low",
    "cost_ratio_ci_high",
    "naive_window_mean",
    "slope",
    "prevalence_half_d",
    "se_half_d",
    "bandwidth_flag",
    "hc",
    "reason",
)
#: Columns of :func:`threshold_prevalence_diff`' result.
PREVALENCE_DIFF_COLUMNS = ("attribute", "group_a", "group_b", "t", "d", "diff", "se", "ci_low", "ci_high")
PREVALENCE_DIFF_COLUMNS += ("p_value", "q_value", "cost_ratio_ratio", "cost_ratio_ratio_ci_low")
PREVALENCE_DIFF_COLUMNS += ("cost_ratio_ratio_ci_high", "reason")
#: Columns of :func:`sdt`'s result.
SDT_COLUMNS = (
    "attribute",
    "group",
    "labeler_id",
    "n_pos",
    "n_neg",
    "fpr",
    "fnr",
    "prevalence",
    "criterion_t",
    "se_t",
    "criterion_t_ci_low",
    "criterion_t_ci_high",
    "d_prime",
    "se_d_prime",
    "d_prime_ci_low",
    "d_prime_ci_high",
    "implied_threshold",
    "implied_threshold_ci_low",
    "implied_threshold_ci_high",
    "cost_ratio",
    "cost_ratio_ci_low",
    "cost_ratio_ci_high",
    "ci_method",
    "corrected",
    "p_vs_pool",
    "q_value",
    "reason",
)
_MODEL = "model"


def _scored(frame: pl.DataFrame, score: str, outcome: str, groups: list[str]) -> pl.DataFrame:
    """Rows with a known outcome and score, in the layout of the pipeline's scores window."""
    require_columns(frame, [score, outcome, *groups])
    reject_reserved(groups, ("model", "score", "outcome"), "group")
    scores = parse_float(frame.get_column(score), file="rows", column=score)
    bad = scores.is_null() | ~scores.is_finite()
    if bad.any():  # the pipeline's contract (score required, a number): not left out silently
        i = int(bad.arg_true()[0])
        raise ValueError(f"rows, column {score!r}, row {i + 1}: a score must be a finite number, got {scores[i]!r}")
    rows = pl.DataFrame(
        [
            pl.Series("model", [_MODEL] * frame.height, dtype=pl.String),
            scores.alias("score"),
            parse_bool(frame.get_column(outcome), file="rows", column=outcome).alias("outcome"),
            *(frame.get_column(g).cast(pl.String).alias(ATTR_PREFIX + g) for g in groups),
        ]
    )
    return rows.filter(pl.col("outcome").is_not_null())


@single_blas_thread
def _threshold(
    part: int, columns: tuple[str, ...], df, *, score, outcome, group, t, d, confidence_level, hc, min_window_rows, ci
) -> Any:
    """Both threshold tables of ``df`` (prevalence, differences: seed 002
    §5.1) as the pipeline computes them; returns table ``part`` (0 or 1)'s
    ``columns`` in the caller's kind. Arguments as :func:`threshold_prevalence`."""
    frame, kind = as_polars(df)
    groups = names(group, "group")
    rows = _scored(frame, score, outcome, groups)
    tables = threshold_tables(
        rows,
        UNDATED,
        (UNDATED, UNDATED),
        [(_MODEL, float(t), float(d))],
        groups,
        level=confidence_level,
        hc=hc,
        min_window_rows=min_window_rows,
        ci=ci,
    )
    return as_caller(tables[part].select(columns), kind)


def threshold_prevalence(
    df: Any,
    *,
    score: str,
    outcome: str,
    group: str | Sequence[str],
    t: float,
    d: float,
    confidence_level: float = 0.95,
    hc: str = "HC1",
    min_window_rows: int = 100,
    ci: str = "robust",
) -> Any:
    """Prevalence at the decision threshold, E[Y | s = t], per group and for everyone (group ``*``).

    ``df``: a pandas, Polars or PyArrow frame of one model's decisions, one row
    per item: ``score`` (numeric, any scale), ``outcome`` (boolean, true/false
    or 0/1; null = not yet known, such rows are left out) and ``group``
    column(s) (one result block per column; a null group counts only in
    ``*``). ``t``: the decision threshold and ``d`` > 0 the bandwidth, in score
    units. ``hc``: HC0/HC1/HC3; ``ci``: ``robust`` (bias-corrected, the
    pipeline's default) or ``conventional``; windows with fewer than
    ``min_window_rows`` rows get an interval that does not collapse.

    Returns a frame of the caller's kind, one row per attribute × group,
    columns :data:`PREVALENCE_COLUMNS`: the intercept β0 of the tricube-weighted
    local linear fit (a probability in [0, 1]), its HC standard error, a CI
    inside [0, 1], the implied cost ratio c = (1 − β0)/β0 with its interval,
    the naive window mean, the estimate at d/2 with the bandwidth flag, and a
    reason for every NaN (as the pipeline's ``threshold_prevalence`` table).

    Every row counts: a frame holding an item twice counts it twice (the
    pipeline refuses a repeated (ds, model, item_id); here there is no id).

    Raises ValueError for a missing column (naming it and the columns present),
    a score that is not a finite number (null, NaN or infinite: the pipeline
    refuses it too), a non-boolean outcome (naming the first bad row),
    d ≤ 0, or an unknown ``hc``/``ci``; TypeError when ``df`` is not a frame.

    Source: seed 002 eqs. 6, 8–11 and §5.1 (DESIGN §4.2).
    """
    return _threshold(0, PREVALENCE_COLUMNS, **locals())  # every argument, as given


def threshold_prevalence_diff(
    df: Any,
    *,
    score: str,
    outcome: str,
    group: str | Sequence[str],
    t: float,
    d: float,
    confidence_level: float = 0.95,
    hc: str = "HC1",
    min_window_rows: int = 100,
    ci: str = "robust",
) -> Any:
    """Differences of prevalence at the threshold between every pair of groups.

    Inputs as :func:`threshold_prevalence`. Raises ValueError and TypeError as
    :func:`threshold_prevalence` does. Returns a frame of the
    caller's kind, one row per attribute × (group_a, group_b), columns
    :data:`PREVALENCE_DIFF_COLUMNS`: diff = prevalence(a) − prevalence(b)
    (probability units), se, CI, two-sided p_value and its Benjamini–Hochberg
    q_value over all the pairs; cost_ratio_ratio = c_a / c_b, the ratio of the
    groups' implied cost ratios c = (1 − β0)/β0, with an interval inside
    [0, ∞] (MOVER on log c; a bound is 0 or inf only where a group's β0
    interval reaches 0 or 1), NaN with a reason when a c is undefined. A
    ``group`` column holding cells of two attributes (e.g. ``"a×x"``) gives
    seed 002 eq. 5's cross-group c_ab per cell, compared pair by pair.

    Source: seed 002 eqs. 5–6, 8–11, §5.1; DESIGN §4.2 ("the difference between groups with its SE").
    """
    return _threshold(1, PREVALENCE_DIFF_COLUMNS, **locals())  # every argument, as given


def confusion_counts(frame: pl.DataFrame, *, label: str, gold_label: str, labeler: str, groups: list[str]):
    """Confusion counts tp, fn, fp, tn per attribute × group × labeler and for
    all labelers (labeler_id ``*``), as ``sql/sdt_counts.sql`` counts staged
    labels: rows without a label are dropped; rows without a gold label count
    in no cell but keep their group's and labeler's row; a null group is
    ``(missing)``."""
    require_columns(frame, [label, gold_label, labeler, *groups])
    reject_reserved(groups, ("labeler_id", "label", "gold_label"), "group")
    rows = pl.DataFrame(
        [
            frame.get_column(labeler).cast(pl.String).alias("labeler_id"),
            parse_bool(frame.get_column(label), file="rows", column=label).alias("label"),
            parse_bool(frame.get_column(gold_label), file="rows", column=gold_label).alias("gold_label"),
            *(frame.get_column(g).cast(pl.String).alias(g) for g in groups),
        ]
    ).filter(pl.col("label").is_not_null())
    long = rows.unpivot(
        index=["labeler_id", "label", "gold_label"], on=groups, variable_name="attribute", value_name="group"
    ).with_columns(pl.col("group").fill_null(MISSING_GROUP))
    lab, gold = pl.col("label"), pl.col("gold_label")
    cells = [
        (lab & gold).sum().cast(pl.Int64).alias("tp"),
        (~lab & gold).sum().cast(pl.Int64).alias("fn"),
        (lab & ~gold).sum().cast(pl.Int64).alias("fp"),
        (~lab & ~gold).sum().cast(pl.Int64).alias("tn"),
    ]
    per_labeler = long.group_by("attribute", "group", "labeler_id").agg(cells)
    pooled = long.group_by("attribute", "group").agg(cells).with_columns(pl.lit(ALL).alias("labeler_id"))
    return pl.concat([per_labeler, pooled.select(per_labeler.columns)]).sort("attribute", "group", "labeler_id")


def sdt(
    df: Any,
    *,
    label: str,
    gold_label: str,
    labeler: str,
    group: str | Sequence[str],
    confidence_level: float = 0.95,
    min_pos: int = 10,
    min_neg: int = 10,
    min_errors: int = 5,
) -> Any:
    """Signal detection theory for labelers against gold labels: rates, criterion, d′ and implied cost ratio.

    ``df``: a pandas, Polars or PyArrow frame of a labeling log, one row per
    decision: ``label`` (the labeler's decision, violating = true; boolean,
    true/false or 0/1; null rows dropped), ``gold_label`` (expert truth, null
    when not reviewed: such rows count in no cell), ``labeler`` (labeler id)
    and ``group`` column(s) (content group; null = ``(missing)``). Groups with
    fewer than ``min_pos`` gold positives or ``min_neg`` negatives give NaN
    with a reason; cells with fewer than ``min_errors`` counts use exact bounds.
    Every row counts: a frame holding a decision twice counts it twice (the
    pipeline refuses a repeated (ds, item_id, labeler_id); here there is no id).

    Returns a frame of the caller's kind, one row per attribute × group ×
    labeler plus the pool of all labelers (``labeler_id`` = ``*``), columns
    :data:`SDT_COLUMNS`: FPR, FNR (shares), prevalence φ = mean(gold),
    criterion t = Φ⁻¹(1 − FPR), d′ = t − Φ⁻¹(FNR) (both in standard-normal
    units) with SEs and CIs, the implied threshold (a probability), the cost
    ratio c = ((1−φ)/φ)·exp(−t·d′ + d′²/2) with its CI, ``corrected`` (the
    log-linear correction for rates of 0 or 1), ``p_vs_pool`` (the labeler
    against the other labelers) with its BH ``q_value``, and a reason for NaNs.

    Raises ValueError for a missing column (naming it and the columns present)
    or a non-boolean label/gold label (naming the first bad row); TypeError
    when ``df`` is not a frame.

    Source: seed 002 §5.3, eq. 12 (DESIGN §4.3).
    """
    frame, kind = as_polars(df)
    counts = confusion_counts(frame, label=label, gold_label=gold_label, labeler=labeler, groups=names(group, "group"))
    with one_blas_thread():  # the same last bits as the pipeline's (fairmon.transforms.blas)
        out = sdt_table(
            counts,
            UNDATED,
            (UNDATED, UNDATED),
            level=confidence_level,
            min_pos=min_pos,
            min_neg=min_neg,
            min_errors=min_errors,
        )
    return as_caller(out.select(SDT_COLUMNS), kind)
