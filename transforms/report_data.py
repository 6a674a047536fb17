"""Shaping published tables for the report (pure Polars)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import polars as pl

from fairmon.transforms.quality import excluded_days, published_days


@dataclass(frozen=True)
class ReportData:
    """What the report shows for days start..end.

    ``reo`` and ``reo_group`` hold published days only; ``excluded`` lists
    the days with a failed critical check (ds, reasons) and days that have no
    data-quality record at all (never run, or failed before checks);
    ``dq_summary`` has one row per day and suite.
    """

    start: dt.date
    end: dt.date
    reo: pl.DataFrame
    reo_group: pl.DataFrame
    excluded: pl.DataFrame
    dq_summary: pl.DataFrame
    published: list[dt.date]
    reo_ab: pl.DataFrame
    threshold_prevalence: pl.DataFrame
    sdt: pl.DataFrame
    extras: dict[str, pl.DataFrame] | None = None  # reo_stage, rsp, user_precision (seed 001 §4.4), published days


def report_data(
    reo: pl.DataFrame,
    reo_group: pl.DataFrame,
    dq: pl.DataFrame,
    start: dt.date,
    end: dt.date,
    reo_ab: pl.DataFrame | None = None,
    threshold_prevalence: pl.DataFrame | None = None,
    sdt: pl.DataFrame | None = None,
    latest_runs: pl.DataFrame | None = None,
    extras: dict[str, pl.DataFrame] | None = None,
) -> ReportData:
    """Keep only days whose dq_results are all successful (DESIGN §3) within
    [start, end]; list the others with their reasons. Inputs are the whole
    tables as read from the warehouse (possibly empty frames).

    ``latest_runs`` (ds, run_id, status, detail: each day's latest run) makes
    the day's latest run the only source: rows of earlier runs are ignored, so
    a day whose latest run failed or never finished is excluded (with that
    run's reason) whatever an earlier run published."""
    dq = dq.filter(pl.col("ds").is_between(start, end)) if not dq.is_empty() else dq
    if latest_runs is not None and not dq.is_empty() and "run_id" in dq.columns:
        dq = dq.join(latest_runs.select("ds", "run_id"), on=["ds", "run_id"], how="semi")
    days = published_days(dq, start, end)

    # a day's rows count only when they come from the run whose checks dq_results holds
    # (a run killed between two partition swaps leaves mixed run_ids: not published)
    runs = dq.select("ds", "run_id").unique() if "run_id" in dq.columns else None

    def keep(frame: pl.DataFrame) -> pl.DataFrame:
        if frame.is_empty():
            return frame
        frame = frame.filter(pl.col("ds").is_in(days))
        if runs is not None and "run_id" in frame.columns:
            frame = frame.join(runs, on=["ds", "run_id"], how="semi")
        return frame.sort("ds")

    excluded = excluded_days(dq)
    seen = set(dq.get_column("ds").to_list()) if not dq.is_empty() else set()
    never = [start + dt.timedelta(days=i) for i in range((end - start).days + 1)]
    never = [d for d in never if d not in seen]
    if never:
        why = {}
        if latest_runs is not None:
            for r in latest_runs.iter_rows(named=True):
                if r["status"] == "running":
                    why[r["ds"]] = "its latest run did not finish (killed, or still running)"
                elif r["status"] == "failed":
                    why[r["ds"]] = f"its latest run failed: {r['detail']}"
        excluded = pl.concat(
            [
                excluded,
                pl.DataFrame(
                    {
                        "ds": never,
                        "reasons": [
                            why.get(d, "no data-quality record: the day was not run or failed before its checks")
                            for d in never
                        ],
                    },
                    schema={"ds": pl.Date, "reasons": pl.String},
                ),
            ]
        ).sort("ds")
    if dq.is_empty():
        summary = pl.DataFrame()
    else:
        summary = (
            dq.group_by("ds", "suite")
            .agg(
                pl.len().alias("subjects"),
                pl.col("success").all().alias("passed"),
                pl.col("n_expectations").sum().alias("expectations"),
                (pl.col("n_failed") - pl.col("n_warnings")).sum().alias("failed_critical"),
                pl.col("n_warnings").sum().alias("warnings"),
                pl.col("failed_warning")
                .filter(pl.col("failed_warning") != "")
                .unique()
                .sort()
                .str.join(", ")
                .alias("warning_names"),
            )
            .sort("ds", "suite")
        )

    def opt(frame: pl.DataFrame | None) -> pl.DataFrame:
        return keep(frame if frame is not None else pl.DataFrame())

    return ReportData(
        start,
        end,
        keep(reo),
        keep(reo_group),
        excluded,
        summary,
        days,
        opt(reo_ab),
        opt(threshold_prevalence),
        opt(sdt),
        {name: opt(frame) for name, frame in (extras or {}).items()},
    )
