"""Terminal views (Rich tables) of fairmon's outputs, shared by the CLI and the demo."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

if TYPE_CHECKING:
    from fairmon.pipelines.config import FairmonConfig


def fmt(x: float | None, digits: int = 4) -> str:
    """``x`` with ``digits`` decimals; ``nan`` for None or NaN."""
    return "nan" if x is None or x != x else f"{x:.{digits}f}"


def reo_table(rows: list[dict], title: str, truth: dict | None = None) -> Table:
    """A compact Rich table of ``reo`` rows (dicts with the REO_SCHEMA columns);
    ``truth`` maps (ds, arm, attribute) to the true REO when known."""
    t = Table(title=title, title_justify="left")
    for col in ("ds", "arm", "attribute", "REO", "SE", "95% CI", "n_rec / n_rand", "> 1/9"):
        t.add_column(col, justify="left" if col in ("ds", "arm", "attribute") else "right")
    if truth is not None:
        t.add_column("true REO", justify="right")
    for r in rows:
        cells = [
            str(r["ds"]),
            r["arm"],
            r["attribute"],
            fmt(r["reo"]),
            fmt(r["se"]),
            f"[{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]",
            f"{r['n_rec']} / {r['n_rand']}",
            {True: "yes", False: "no"}.get(r["exceeds_80pct_rule"], "-"),
        ]
        if truth is not None:
            cells.append(fmt(truth.get((str(r["ds"]), r["arm"], r["attribute"]))))
        t.add_row(*cells)
        if r.get("reason"):
            t.add_row("", "", f"[yellow]{escape(r['reason'])}[/yellow]", *[""] * (len(t.columns) - 3))
    return t


def prevalence_table(rows: list[dict], title: str) -> Table:
    """Rich table of ``threshold_prevalence`` rows (seed 002 eqs. 6, 8-11)."""
    t = Table(title=title, title_justify="left")
    for col in (
        "model",
        "attribute",
        "group",
        "t ± d",
        "n",
        "prev. at t",
        "95% CI",
        "naive mean",
        "cost ratio",
        "cost-ratio CI",
    ):
        t.add_column(col, justify="left" if col in ("model", "attribute", "group") else "right")
    for r in rows:
        t.add_row(
            r["model"],
            r["attribute"],
            r["group"],
            f"{r['t']:g} ± {r['d']:g}",
            str(r["n_window"]),
            fmt(r["prevalence_at_threshold"]),
            f"[{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]",
            fmt(r["naive_window_mean"]),
            fmt(r["implied_cost_ratio"], 3),
            f"[{fmt(r['cost_ratio_ci_low'], 3)}, {fmt(r['cost_ratio_ci_high'], 3)}]"
            if r["reason"] is None
            else f"[yellow]{escape(r['reason'])}[/yellow]",
        )
    return t


def sdt_view(rows: list[dict], title: str) -> Table:
    """Rich table of ``sdt`` rows (seed 002 §5.3): pool (*) and labelers."""
    t = Table(title=title, title_justify="left")
    for col in (
        "attribute",
        "group",
        "labeler",
        "n+ / n-",
        "FPR",
        "FNR",
        "t",
        "d'",
        "implied thr.",
        "cost ratio",
        "95% CI",
        "p vs pool",
    ):
        t.add_column(col, justify="left" if col in ("attribute", "group", "labeler") else "right")
    for r in rows:
        p = r["p_vs_pool"]
        t.add_row(
            r["attribute"],
            r["group"],
            r["labeler_id"],
            f"{r['n_pos']} / {r['n_neg']}",
            fmt(r["fpr"], 3),
            fmt(r["fnr"], 3),
            fmt(r["criterion_t"], 3),
            fmt(r["d_prime"], 3),
            fmt(r["implied_threshold"], 3),
            fmt(r["cost_ratio"], 3),
            f"[{fmt(r['cost_ratio_ci_low'], 3)}, {fmt(r['cost_ratio_ci_high'], 3)}]",
            "-" if p is None or p != p else (f"[red]{p:.2g}[/red]" if p < 0.05 else f"{p:.2g}"),
        )
    return t


def run_summary(results: list[dict]) -> Table:
    """The closing table of a run: per day its status (published / quarantined /
    failed) and either its tables and failed warnings or its error."""
    t = Table(title="Run summary", title_justify="left")
    t.add_column("ds")
    t.add_column("status")
    t.add_column("detail", overflow="fold")
    for r in results:
        ok = r["status"] == "published"
        if ok:
            warn = [f"{d['suite']}: {d['failed_warning']}" for d in r.get("dq", []) if d.get("failed_warning")]
            detail = ", ".join(sorted(r.get("paths", {}))) + "".join(
                f"\n[yellow]warning {escape(w)}[/yellow]" for w in warn
            )
        else:
            detail = escape(r.get("error", ""))
        colour = {"published": "green", "quarantined": "yellow"}.get(r["status"], "red")
        t.add_row(str(r["ds"]), f"[{colour}]{r['status']}[/{colour}]", detail)
    return t


def run_days_with_progress(
    console: Console,
    cfg: FairmonConfig,
    days: list[dt.date],
    *,
    config_path: str = "",
    show_progress: bool = True,
    **options,
) -> list[dict]:
    """:func:`fairmon.pipelines.runner.run_days` with a Rich progress bar on
    ``console`` (hidden when ``show_progress`` is false) and the prestage line.
    ``options`` go to ``run_days`` (force_ingest, concurrency, wait_seconds).
    Returns its per-day summaries; raises what it raises."""
    from fairmon.pipelines.runner import run_days  # imports Prefect: only when days run

    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not show_progress,
    )

    def prestaged(pre: dict) -> None:
        if show_progress and pre["files"]:
            progress.console.print(
                f"profiled {pre['files']} impressions file(s) in one scan, staged {pre['staged']}, counted "
                f"{len(days)} day(s) ({pre['ingest'] + pre['checks'] + pre['counts']:.1f}s)"
            )

    with progress:
        job = progress.add_task(f"fairmon {len(days)} day(s)", total=len(days))

        def day_done(r: dict) -> None:
            progress.update(job, description=f"fairmon {r['ds']} {r['status']}")
            progress.advance(job)

        return run_days(cfg, days, config_path=config_path, on_prestage=prestaged, on_day=day_done, **options)
