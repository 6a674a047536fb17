"""The ``sdt`` table: human labelers' signal-detection criteria, d′ and cost
ratios per labeler and content group, from confusion counts against gold
labels (seed 002 §5.3, eq. 12; DESIGN §4.3). Pure Polars/NumPy; each day's
family of p-values gets Benjamini–Hochberg q-values (DESIGN §4.1)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl

from fairmon.transforms.decisions.decision_tables import ALL, WIN_END, WIN_START
from fairmon.transforms.decisions.sdt import compare_cost_ratios, sdt_estimate
from fairmon.transforms.registry import (
    ATTR,
    DS,
    GROUP,
    REASON,
    B,
    Column,
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


def has_labels(cfg) -> bool:
    """Whether the config reads a labeling log (seed 002 §5.2)."""
    return cfg.labels is not None


def sdt_options(cfg) -> dict:
    """The keyword arguments of :func:`sdt_table` from ``[labels]``."""
    lc, level = cfg.labels, cfg.estimation.confidence_level
    return dict(level=level, min_pos=lc.min_pos, min_neg=lc.min_neg, min_errors=lc.min_errors)


SDT = Table(
    "sdt",
    "Labelers' signal-detection parameters against gold labels, per group (pooled `*` and per labeler).",
    "seed 002 §5.3, eq. 12; DESIGN §4.3",
    ("ds", "attribute", "group", "labeler_id"),
    (
        DS,
        ATTR,
        GROUP,
        Column("labeler_id", S, "-", "Labeler, or `*` for all labelers pooled."),
        WIN_START,
        WIN_END,
        Column(
            "n_pos", I, "items", "Gold-positive (violating) items labeled.", bounds=non_negative("counts_non_negative")
        ),
        Column("n_neg", I, "items", "Gold-negative items labeled."),
        Column(
            "fpr",
            F,
            "probability",
            "False-positive rate among gold negatives; with `corrected`, the log-linear (fp + 0.5)/(n_neg + 1).",
            bounds=probability("fpr_in_unit_interval"),
        ),
        Column(
            "fnr",
            F,
            "probability",
            "False-negative rate among gold positives; with `corrected`, the log-linear (fn + 0.5)/(n_pos + 1).",
            bounds=probability("fnr_in_unit_interval"),
        ),
        Column(
            "prevalence", F, "probability", "φ = mean gold label.", bounds=probability("prevalence_in_unit_interval")
        ),
        Column("criterion_t", F, "standard deviations", "Criterion t = Φ⁻¹(1 − FPR)."),
        Column("se_t", F, "standard deviations", "Standard error of t (delta method)."),
        Column("criterion_t_ci_low", F, "standard deviations", "Lower bound of t's interval (by `ci_method`)."),
        Column("criterion_t_ci_high", F, "standard deviations", "Upper bound of t's interval; may be inf."),
        Column("d_prime", F, "standard deviations", "d′ = t − Φ⁻¹(FNR)."),
        Column("se_d_prime", F, "standard deviations", "Standard error of d′ (delta method)."),
        Column("d_prime_ci_low", F, "standard deviations", "Lower bound of d′'s interval; may be −inf."),
        Column("d_prime_ci_high", F, "standard deviations", "Upper bound of d′'s interval; may be inf."),
        Column(
            "implied_threshold",
            F,
            "probability",
            "1/(1 + ((1−φ)/φ)·exp(−t·d′ + d′²/2)) (seed 002 eq. 12).",
            bounds=probability("implied_threshold_in_unit_interval"),
        ),
        Column(
            "implied_threshold_ci_low",
            F,
            "probability",
            "Lower bound of the implied threshold's interval.",
            bounds=probability("implied_threshold_ci_low_in_unit_interval"),
        ),
        Column(
            "implied_threshold_ci_high",
            F,
            "probability",
            "Upper bound of the implied threshold's interval.",
            bounds=probability("implied_threshold_ci_high_in_unit_interval"),
        ),
        Column(
            "cost_ratio",
            F,
            "ratio",
            "c = ((1−φ)/φ)·exp(−t·d′ + d′²/2) (seed 002 eq. 12).",
            bounds=positive("cost_ratio_positive"),
        ),
        Column("cost_ratio_ci_low", F, "ratio", "Lower bound of the cost ratio's interval; may be 0."),
        Column("cost_ratio_ci_high", F, "ratio", "Upper bound of the cost ratio's interval; may be inf."),
        Column(
            "ci_method", S, "-", "delta, or exact (Clopper–Pearson bounds carried through; a cell below `min_errors`)."
        ),
        Column("corrected", B, "-", "A rate was 0 or 1 and the log-linear correction (+0.5 per cell) was used."),
        Column(
            "p_vs_pool",
            F,
            "probability",
            "p-value: labeler's log cost ratio vs the other labelers' (Wald; interval overlap if exact).",
            bounds=probability("p_vs_pool_in_unit_interval"),
        ),
        Column(
            "q_value",
            F,
            "probability",
            "Benjamini–Hochberg q-value over the day's p_vs_pool values (NaN p excluded).",
            bounds=probability("q_value_in_unit_interval"),
        ),
        REASON,
    ),
    "sdt",
    summary=True,
    section="sdt",
)


SDT_SCHEMA = SDT.schema


@declares(SDT, stage="labels", inputs=("confusion", "ds", "window"), enabled=has_labels, options=sdt_options)
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
                "reason": "; ".join(p for p in (e.reason, why_p) if p) or None,
            }
        )
    q = bh_q_values(np.array([r["p_vs_pool"] for r in rows], dtype=float))
    for r, qv in zip(rows, q, strict=True):
        r["q_value"] = float(qv)
    return pl.DataFrame(rows, schema=SDT_SCHEMA)
