"""Frames prepared for the data-quality suites (pure Polars).

GX validates one table at a time, so cross-row rules (group counts add up to
the traffic totals, REO below √(K−1), random-traffic sufficiency) are turned
into columns here and checked by the suites in ``expectations/``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import polars as pl

from fairmon.transforms.contract import INTERSECTION_SEP
from fairmon.transforms.planning.traffic import random_traffic_required
from fairmon.transforms.registry import DS, B, Column, I, S, Table, declare
from fairmon.transforms.reo.reo_tables import MISSING_GROUP

TEXT_TRUE_FALSE = ("true", "false")

DQ_RESULTS = Table(
    "dq_results",
    "Data-quality results of the day: one row per suite and subject (file or table).",
    "DESIGN §3; expectations/README.md",
    ("ds", "table", "suite", "subject"),
    (
        DS,
        Column("table", S, "-", "Input or output table the suite validates."),
        Column("suite", S, "-", "Expectation suite (expectations/<suite>.json)."),
        Column("subject", S, "-", "What was validated: a file path or a table name."),
        Column("success", B, "-", "No critical expectation failed.", nullable=False),
        Column("n_expectations", I, "expectations", "Expectations evaluated."),
        Column("n_failed", I, "expectations", "Expectations that failed, critical or warning."),
        Column("n_warnings", I, "expectations", "Failed expectations of severity warning."),
        Column("failed_critical", S, "-", "Names of the failed critical expectations, comma-separated."),
        Column("failed_warning", S, "-", "Names of the failed warnings, comma-separated."),
        Column("details", S, "JSON", "Each failure with its unexpected count, sample values and file rows."),
    ),
    "dq_results",
    published_view=False,
)


#: dq_results is written by the gate itself (fairmon.pipelines.checks.gate.dq_frame), for every run.
declare(DQ_RESULTS, stage="quality", inputs=("results", "ds"))


def raw_check_frame(raw: pl.DataFrame, text_columns: list[str]) -> pl.DataFrame:
    """The raw frame with ``text_columns`` rendered as trimmed lower-case text.

    Booleans become "true"/"false", integers "0"/"1", dates "YYYY-MM-DD", so
    one value-set rule checks every file format. Columns not present are
    ignored (their absence is an expectation of its own).
    """
    exprs = []
    for c in text_columns:
        if c not in raw.columns:
            continue
        dtype = raw.schema[c]
        col = pl.col(c)
        if dtype == pl.Date:
            col = col.dt.strftime("%Y-%m-%d")
        elif isinstance(dtype, pl.Datetime):
            col = col.dt.strftime("%Y-%m-%d %H:%M:%S")
        if dtype.is_integer() or dtype in (pl.Boolean, pl.Date) or isinstance(dtype, pl.Datetime):
            exprs.append(col.cast(pl.String).alias(c))  # digits, '-', ':' or true/false: already trimmed lower case
        else:
            exprs.append(col.cast(pl.String).str.strip_chars().str.to_lowercase().alias(c))
    return raw.with_columns(exprs) if exprs else raw


def day_check_frame(counts: pl.DataFrame, epsilon: float, delta: float) -> pl.DataFrame:
    """Rows of the day's group counts that the ``impressions_day`` suite checks.

    Input: group_counts of one day (all attributes). Output: default and
    random rows without the '(missing)' group and without intersectional
    groupings (``a×b``: their small cells are the estimator's small groups,
    NaN or inconclusive with a reason, not a defect of the day's data), with
    ``rate`` = n_pos/n and,
    on random rows, ``rand_sufficiency`` = |D_rand| / required volume of
    seed 001 Thm E.1 for P_k = n_pos/|D_rand| (null on other rows).
    """
    totals = counts.group_by("traffic", "arm", "attribute").agg(pl.col("n").sum().alias("_total"))
    out = (
        counts.join(totals, on=["traffic", "arm", "attribute"])
        .filter(
            pl.col("traffic").is_in(["default", "random"])
            & (pl.col("group") != MISSING_GROUP)
            & ~pl.col("attribute").str.contains(INTERSECTION_SEP, literal=True)
        )
        .with_columns((pl.col("n_pos") / pl.col("n")).alias("rate"))
    )
    P = (out.get_column("n_pos") / out.get_column("_total")).to_numpy()
    required = random_traffic_required(P, epsilon, delta)
    suff = out.get_column("_total").to_numpy() / required
    return out.with_columns(
        pl.when(pl.col("traffic") == "random").then(pl.Series(suff)).otherwise(None).alias("rand_sufficiency"),
        pl.when(pl.col("traffic") == "random").then(pl.Series(required)).otherwise(None).alias("rand_required"),
    ).drop("_total")


def group_counts_check_frame(counts: pl.DataFrame, traffic_totals: pl.DataFrame) -> pl.DataFrame:
    """group_counts with ``n_attribute_sum`` (sum of n over the attribute's
    groups) and ``n_traffic_total`` (rows staged for that traffic and arm,
    counted independently: ``traffic_totals`` has traffic, arm, n)."""
    sums = counts.group_by("traffic", "arm", "attribute").agg(pl.col("n").sum().alias("n_attribute_sum"))
    return counts.join(sums, on=["traffic", "arm", "attribute"], how="left").join(
        traffic_totals.rename({"n": "n_traffic_total"}), on=["traffic", "arm"], how="left"
    )


def reo_check_frame(reo: pl.DataFrame) -> pl.DataFrame:
    """reo with ``reo_max`` = √(K−1), the largest std/mean of K non-negative
    numbers, and ``reo_below_ci_high``: the plug-in REO, or ``reo_bc`` on a
    row whose plug-in lies above ci_high.

    The plug-in is a norm, biased upwards (E‖ΔÛ‖² = ‖ΔU‖² + tr Σ, DESIGN
    §4.1), and the interval inverts the distribution of ‖ΔÛ‖², bias
    included: with many groups (tr Σ grows with K) the bias can exceed the
    interval's half-width, so an honest interval lies below the plug-in
    (measured: K = 64 at parity with 100 expected positives a group). The
    bias-corrected REO must then lie inside: ``reo_le_ci_high`` checks
    ``reo_below_ci_high`` ≤ ci_high. Input: reo rows (K, reo, ci_high and,
    when present, reo_bc)."""
    out = reo.with_columns((pl.col("K").cast(pl.Float64) - 1).clip(0).sqrt().alias("reo_max"))
    if "reo" not in reo.columns:
        return out
    plug_in = pl.col("reo")
    below = plug_in
    if {"reo_bc", "ci_high"} <= set(reo.columns):
        below = pl.when(plug_in > pl.col("ci_high")).then(pl.col("reo_bc")).otherwise(plug_in)
    return out.with_columns(below.alias("reo_below_ci_high"))


def reo_ab_check_frame(reo_ab: pl.DataFrame) -> pl.DataFrame:
    """reo_ab with ``undefined_without_reason``: True on a row whose
    standard error is NaN or null while ``reason`` is null or empty. An
    undefined difference with its reason is an answer (e.g. ``delta_paper``
    on clustered rows, DESIGN §4.1); one without is a defect."""
    se, reason = pl.col("se"), pl.col("reason")
    return reo_ab.with_columns(
        ((se.is_null() | se.is_nan()) & (reason.is_null() | (reason.str.strip_chars() == ""))).alias(
            "undefined_without_reason"
        )
    )


#: The frame an output table's suite checks, built from the day's frame of the
#: table and the day's other inputs (``totals``: rows staged per traffic and
#: arm), for the tables whose suites need derived columns; every other table
#: is checked as it is (:func:`output_check_frame`).
CHECK_FRAMES: dict[str, Callable[[pl.DataFrame, dict], pl.DataFrame]] = {
    "group_counts": lambda frame, day: group_counts_check_frame(frame, day["totals"]),
    "reo": lambda frame, day: reo_check_frame(frame),
    "reo_ab": lambda frame, day: reo_ab_check_frame(frame),
}


def output_check_frame(name: str, frame: pl.DataFrame, day: dict) -> pl.DataFrame:
    """The frame table ``name``'s suite checks (:data:`CHECK_FRAMES`, else
    ``frame`` itself); ``day``: the day's other inputs. Raises what the builder raises."""
    build = CHECK_FRAMES.get(name)
    return frame if build is None else build(frame, day)


def excluded_days(dq: pl.DataFrame) -> pl.DataFrame:
    """Days whose latest data-quality results hold a failure, with reasons.

    Input: dq_results rows (ds, table, suite, subject, success, details JSON).
    Output: ds, reasons (one line per failed suite, naming its failed
    critical expectations). Days with every row successful are not listed.
    """
    if dq.is_empty():
        return pl.DataFrame(schema={"ds": pl.Date, "reasons": pl.String})
    failed = dq.filter(~pl.col("success"))
    return (
        failed.with_columns(
            (pl.col("suite") + " (" + pl.col("subject") + "): " + pl.col("failed_critical")).alias("reason")
        )
        .group_by("ds")
        .agg(pl.col("reason").sort().str.join("; ").alias("reasons"))
        .sort("ds")
    )


def published_days(dq: pl.DataFrame, start: dt.date | None = None, end: dt.date | None = None) -> list[dt.date]:
    """Days in [start, end] whose data-quality results are all successful."""
    if dq.is_empty():
        return []
    ok = dq.group_by("ds").agg(pl.col("success").all()).filter(pl.col("success"))
    days = sorted(ok.get_column("ds").to_list())
    return [d for d in days if (start is None or d >= start) and (end is None or d <= end)]
