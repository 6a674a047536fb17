"""Frames prepared for the data-quality suites (pure Polars).

GX validates one table at a time, so cross-row rules (group counts add up to
the traffic totals, REO below √(K−1), random-traffic sufficiency) are turned
into columns here and checked by the suites in ``expectations/``.
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from fairmon.transforms.contract import INTERSECTION_SEP
from fairmon.transforms.contract_values import zoned_day_text
from fairmon.transforms.planning.traffic import random_traffic_required
from fairmon.transforms.registry import DS, B, Column, I, S, Table, declare, table
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
    section="quality",
)


#: dq_results is written by the gate itself (fairmon.pipelines.checks.gate.dq_frame), for every run.
declare(DQ_RESULTS, stage="quality", inputs=("results", "ds"))


#: Text columns the input contract compares exactly (``traffic``: "Random" or " random" is not a traffic).
EXACT = ("traffic",)


def raw_check_frame(raw: pl.DataFrame, text_columns: list[str]) -> pl.DataFrame:
    """The raw frame with ``text_columns`` rendered as trimmed lower-case text,
    except the :data:`EXACT` ones, rendered as text as they are: the checks
    must pass exactly what the input contract
    (:func:`fairmon.transforms.contract.normalize_impressions`) accepts, which
    folds booleans and trims dates but compares traffic values as written.

    Booleans become "true"/"false", integers "0"/"1", floats "1.0"/"0.0" (NaN
    a null, as the contract reads a missing label pandas wrote), dates and
    timestamps "YYYY-MM-DD" (a timestamp's day, as the contract reads it; one
    with a time zone only at midnight UTC, :func:`~fairmon.transforms.contract_values.zoned_day_text`), so
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
        elif isinstance(dtype, pl.Datetime) and dtype.time_zone is not None:  # a UTC midnight's day, else no day
            col = zoned_day_text(col)
        elif isinstance(dtype, pl.Datetime):  # the day the contract reads from a timestamp (parse_date)
            col = col.dt.date().dt.strftime("%Y-%m-%d")
        elif dtype.is_float() or isinstance(dtype, pl.Decimal):
            # the number parse_bool reads: a label pandas wrote as 1.0 / 0.0 (NaN if missing, -0.0 is 0.0), or a
            # DECIMAL 1.00 (not the text '1.00')
            number = col.cast(pl.Float64) if isinstance(dtype, pl.Decimal) else col
            col = pl.when(number.is_nan()).then(None).when(number == 0).then(0.0).otherwise(number)
        if dtype.is_integer() or dtype in (pl.Boolean, pl.Date) or isinstance(dtype, pl.Datetime):
            exprs.append(col.cast(pl.String).alias(c))  # digits, '-', ':' or true/false: already trimmed lower case
        elif c in EXACT:
            exprs.append(col.cast(pl.String).alias(c))
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


def output_check_frame(name: str, frame: pl.DataFrame, day: dict) -> pl.DataFrame:
    """The frame table ``name``'s suite checks: its declaration's
    ``check_frame`` applied to ``frame`` and ``day`` (the day's other inputs),
    else ``frame`` itself. Raises KeyError for an unknown table and what the
    builder raises."""
    build = table(name).check_frame
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
