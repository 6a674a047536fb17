"""Terminal views (Rich tables) of fairmon's outputs, shared by the CLI and the demo."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Column, Table

from fairmon.pipelines.faces.fitting import Footnotes
from fairmon.pipelines.report.report_words import pfmt
from fairmon.transforms.alerts.words import status_words

if TYPE_CHECKING:
    from fairmon.pipelines.core.config import FairmonConfig


def fmt(x: float | None, digits: int = 4) -> str:
    """``x`` with ``digits`` decimals; ``nan`` for None or NaN."""
    return "nan" if x is None or x != x else f"{x:.{digits}f}"


#: Printed cells that carry no value: a column with only these is left out of a printed table.
EMPTY_CELLS = frozenset({"", "-", "nan", "[nan, nan]", "nan / nan"})


def drop_empty_columns(table: Table) -> Table:
    """``table`` without the columns whose every cell is empty (:data:`EMPTY_CELLS`),
    e.g. an interval method undefined for the data; a table without rows is kept whole."""
    if table.row_count:
        table.columns = [c for c in table.columns if any(str(v).strip() not in EMPTY_CELLS for v in c.cells)]
    return table


VERDICT_STYLE = {"exceeds": "bold red", "within": "green", "inconclusive": "yellow", "undefined": "dim"}


def ci_header(rows: list[dict]) -> str:
    """``95% CI``: the interval's label from the rows' ``level`` (config), not hard-coded."""
    levels = [r.get("level") for r in rows if r.get("level") is not None]
    return f"{100 * levels[-1]:g}% CI" if levels else "CI"


def reo_table(rows: list[dict], title: str, truth: dict | None = None) -> Table:
    """A compact Rich table of ``reo`` rows (dicts with the REO_SCHEMA columns);
    ``truth`` maps (ds, arm, attribute) to the true REO when known. The verdict
    column comes from the CI against the row's line (1/9 for K = 2, the
    configured ``reo_threshold`` for K > 2, marked ``*``), never from the point estimate.
    A row's reason (and a pool reaching past its day) is a numbered footnote
    under the table, said once however many rows share it. Print it through
    :class:`fairmon.pipelines.faces.fitting.Fit`, which keeps every number whole at any width."""
    t = Table(title=title, title_justify="left", caption_justify="left")
    for col in (
        "ds",
        "arm",
        "attribute",
        "REO",
        "REO bc",
        ci_header(rows),
        "parity p",
        "n_rec / n_rand",
        "line",
        "verdict",
    ):
        t.add_column(col, justify="left" if col in ("ds", "arm", "attribute", "verdict") else "right")
    if truth is not None:
        t.add_column("true REO", justify="right")
    notes = Footnotes()
    for r in rows:
        verdict = r.get("verdict_80pct") or "undefined"
        line = r.get("reo_threshold")
        marks = notes.mark(*row_notes(r))
        cells = [
            str(r["ds"]),
            r["arm"],
            r["attribute"],
            fmt(r["reo"]),
            fmt(r.get("reo_bc")),
            f"[{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]",
            pfmt(r.get("parity_p_value")),
            f"{r['n_rec']} / {r['n_rand']}",
            (fmt(line, 3) + ("*" if (r.get("K") or 0) > 2 else "")) if line is not None else "-",
            f"[{VERDICT_STYLE.get(verdict, '')}]{verdict}[/]" + (f" {marks}" if marks else ""),
        ]
        if truth is not None:
            cells.append(fmt(truth.get((str(r["ds"]), r["arm"], r["attribute"]))))
        t.add_row(*cells)
    line_note = None
    if any((r.get("K") or 0) > 2 for r in rows):
        line_note = "line: 1/9 is the 80% rule for 2 groups; * = the configured reo_threshold for K > 2"
    t.caption = notes.caption(line_note)
    return t


#: What a ``reo`` row's ``look_ahead`` flag says (random traffic counted for the day includes later days).
LOOK_AHEAD_NOTE = "random traffic from after ds (pool_policy = overlap)"


def row_notes(r: dict) -> list[str]:
    """The notes of a ``reo`` row: its reason, and :data:`LOOK_AHEAD_NOTE` when its pool reaches past its day."""
    return [*([r["reason"]] if r.get("reason") else []), *([LOOK_AHEAD_NOTE] if r.get("look_ahead") else [])]


def ab_view(rows: list[dict], title: str, method: str | None = None) -> Table:
    """The day's A/B differences of REO (``reo_ab`` rows, metric ``reo``) for one
    method (default: the first present, i.e. ``[ab] methods[0]``): per
    attribute and treatment D_REO, its CI, p and q, and a word: REO went up or
    down when the interval excludes 0, else no detectable change."""
    reo_rows = [r for r in rows if r["metric"] == "reo"]
    method = method or (reo_rows[0]["method"] if reo_rows else "delta")
    t = Table(title=f"{title} (method {method})", title_justify="left", caption_justify="left")
    for col in ("attribute", "control", "treatment", "D_REO", ci_header(reo_rows), "p", "q", "reading"):
        t.add_column(col, justify="left" if col in ("attribute", "control", "treatment", "reading") else "right")
    t.columns[-1].overflow = "fold"  # a reading is words: it may wrap, the numbers stay whole
    notes = Footnotes()
    for r in (r for r in reo_rows if r["method"] == method):
        lo, hi = r["ci_low"], r["ci_high"]
        if lo is None or lo != lo:
            mark = notes.mark(r.get("reason"))
            word = "[dim]undefined" + (f" {mark}" if mark else "") + "[/dim]"
        elif lo > 0:
            word = "[red]REO higher in treatment[/red]"
        elif hi < 0:
            word = "[green]REO lower in treatment[/green]"
        else:
            word = "no detectable change"
        t.add_row(
            r["attribute"],
            r["control"],
            r["treatment"],
            fmt(r["diff"]),
            f"[{fmt(lo)}, {fmt(hi)}]",
            pfmt(r.get("p_value")),
            pfmt(r.get("q_value")),
            word,
        )
    t.caption = notes.caption()
    return t


def prevalence_table(rows: list[dict], title: str) -> Table:
    """Rich table of ``threshold_prevalence`` rows (seed 002 eqs. 6, 8-11)."""
    t = Table(title=title, title_justify="left", caption_justify="left")
    for col in (
        "model",
        "attribute",
        "group",
        "t ± d",
        "n",
        "prev. at t",
        "CI",
        "naive mean",
        "cost ratio",
        "cost-ratio CI",
    ):
        t.add_column(col, justify="left" if col in ("model", "attribute", "group") else "right")
    notes = Footnotes()
    for r in rows:
        marks = notes.mark(r.get("reason"))  # flags and NaN reasons as footnotes, the numbers stay in their row
        t.add_row(
            r["model"],
            r["attribute"],
            escape(r["group"]) + (f" {marks}" if marks else ""),
            f"{r['t']:g} ± {r['d']:g}",
            str(r["n_window"]),
            fmt(r["prevalence_at_threshold"]),
            f"[{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]",
            fmt(r["naive_window_mean"]),
            fmt(r["implied_cost_ratio"], 3),
            f"[{fmt(r['cost_ratio_ci_low'], 3)}, {fmt(r['cost_ratio_ci_high'], 3)}]",
        )
    methods = sorted({str(r["ci_method"]) for r in rows if r.get("ci_method")})  # a too small group has none
    method = f"CI method: {', '.join(methods)}" if methods else None
    t.caption = notes.caption(method)
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
        ci_header(rows),
        "p vs pool",
        "q",
    ):
        t.add_column(col, justify="left" if col in ("attribute", "group", "labeler") else "right")
    for r in rows:
        p, q = r["p_vs_pool"], r.get("q_value")
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
            "-" if p is None or p != p else pfmt(p),
            "-" if q is None or q != q else (f"[red]{pfmt(q)}[/red]" if q < 0.05 else pfmt(q)),
        )
    return t


def interval_note(reo_rows: list[dict]) -> str:
    """How a day's intervals treat its rows, from its ``reo`` rows: cluster-robust
    by which id with the range of design effects and of the units the variance
    sums over (clusters, or hash buckets of clusters; DESIGN §4.1 "Clustered
    rows"), or independent rows. Empty when there are no rows."""
    by = sorted({r.get("cluster_by") or "none" for r in reo_rows})
    if not by:
        return ""
    if by == ["none"]:
        return "intervals: rows independent (cluster_by = none)"
    deff = [
        r["design_effect"]
        for r in reo_rows
        if r.get("design_effect") is not None and r["design_effect"] == r["design_effect"]
    ]
    low, high = (f"{min(deff):.2f}", f"{max(deff):.2f}") if deff else ("", "")
    span = "" if not deff else f", design effect {low}" + ("" if low == high else f"–{high}")
    units = [(r["n_clusters"], r.get("cluster_sums")) for r in reo_rows if r.get("n_clusters") is not None]
    if units:
        kinds = {k for _, k in units}
        what = "clusters" if kinds == {"exact"} else "buckets of clusters" if kinds == {"hashed"} else "units"
        low, high = min(n for n, _ in units), max(n for n, _ in units)
        span += f", {low}{'' if low == high else f'–{high}'} {what}"
    return f"intervals: cluster-robust by {', '.join(b for b in by if b != 'none')}{span}"


def day_warnings(result: dict) -> list[str]:
    """The warning-level checks a published day failed, ``suite: name (note), ...`` (from its summary's ``dq``
    rows), for ``run``'s and ``backfill``'s output: a check's note says what to act on (the random rows a
    window needs, the group without positives), so it is shown beside its name, not only in dq_results."""
    out = []
    for d in result.get("dq", []):
        if not d.get("failed_warning"):
            continue
        notes = {f.get("name"): f.get("note") for f in json.loads(d.get("details") or "[]") if isinstance(f, dict)}
        names = d["failed_warning"].split(", ")
        out.append(f"{d['suite']}: " + ", ".join(f"{n} ({_shortened(notes[n])})" if notes.get(n) else n for n in names))
    return out


def _shortened(note: str, cells: int = 3) -> str:
    """A check's note with at most ``cells`` of its ``;``-separated cells; the rest counted (dq_results has all)."""
    parts = note.split("; ")
    return note if len(parts) <= cells else "; ".join(parts[:cells]) + f"; {len(parts) - cells} more in dq_results"


def run_summary(results: list[dict]) -> Table:
    """The closing table of a run: per day its status (published / quarantined /
    failed) and either its tables, how its intervals treat clustered rows, the
    envy audit's verdict (with ``[envy]``) and its failed warnings, or its error."""
    t = Table(title="Run summary", title_justify="left")
    t.add_column("ds")
    t.add_column("status")
    t.add_column("detail", overflow="fold")
    for r in results:
        ok = r["status"] == "published"
        if ok:
            warn = day_warnings(r)
            note = interval_note(r.get("reo", []))
            envy = r.get("envy_audit") or []
            detail = (
                ", ".join(sorted(r.get("paths", {})))
                + (f"\n{escape(note)}" if note else "")
                + "".join(
                    f"\nenvy audit: {a['verdict']} ({a['n_envy']} envious, {a['n_eps_no_envy']} certified, "
                    f"{a['n_undecided']} undecided of {a['targets']} targets)"
                    for a in envy
                )
                + "".join(f"\n[yellow]warning {escape(w)}[/yellow]" for w in warn)
            )
        else:
            detail = escape(status_words(r["ds"], r["status"], r.get("error")).strip().removeprefix(": "))
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
    follow_log: bool = False,
    raised: list | None = None,
    each_day: Callable[[Console, dict], None] | None = None,
    **options,
) -> list[dict]:
    """:func:`fairmon.pipelines.orchestration.runner.run_days` with a Rich progress bar on
    ``console`` (hidden when ``show_progress`` is false) and each batch's ingest line.
    ``options`` go to ``run_days`` (force_ingest, concurrency, wait_seconds,
    prefect: default True; with ``prefect=False`` the executor's own
    :func:`fairmon.pipelines.executor.days.run_days` runs the days in process,
    and Prefect's orchestration module is not even imported).
    With ``follow_log`` the bar's description follows the ``fairmon`` logger's
    INFO lines (the stage a day is in, reachability's share of users solved),
    so a long step shows what it does (the logger's own handlers print what
    they printed before); the description wraps rather than being cut, and
    once the days are run it says how many ran. ``each_day(console, summary)``
    is called as each day finishes (e.g. to print its REO lines above the bar).
    Returns its per-day summaries, each with the ``alerts`` this run raised
    on its day (dicts of ``alerts`` rows); every alert it raised is appended
    to ``raised`` (when given); raises what it raises."""
    progress = Progress(
        TextColumn("[bold]{task.description}", table_column=Column(overflow="fold")),
        BarColumn(bar_width=20),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not show_progress,
    )

    def batched(pre: dict) -> None:
        if show_progress and pre["files"]:
            progress.console.print(
                f"profiled {pre['files']} impressions file(s) in one scan, staged {pre['staged']}, counted "
                f"{len(days)} day(s) ({pre['ingest'] + pre['checks'] + pre['counts']:.1f}s)"
            )

    with progress, following_log(follow_log and show_progress) as lines:
        job = progress.add_task(f"fairmon {len(days)} day(s): starting", total=len(days))
        lines.append(lambda msg: progress.update(job, description=f"fairmon: {escape(msg[:90])}"))
        if options.pop("prefect", True):  # imports Prefect's flows: only when days run, bar shown first
            from fairmon.pipelines.orchestration.runner import run_days
        else:
            from fairmon.pipelines.executor.days import run_days

        def day_done(r: dict) -> None:
            progress.update(job, description=f"fairmon {r['ds']} {r['status']}")
            progress.advance(job)
            if each_day is not None:
                each_day(progress.console, r)

        updates: list = []
        results = run_days(
            cfg, days, config_path=config_path, on_batch=batched, on_day=day_done, on_alerts=updates.append,
            **options,
        )  # fmt: skip
        progress.update(job, description=f"fairmon {len(days)} day(s) run")
    new = updates[0].new if updates and updates[0] is not None else []
    for r in results:  # each day's summary carries the alerts raised on it by this run
        r["alerts"] = [a for a in new if a["ds"] == r["ds"]]
    if raised is not None:  # and the caller every alert the run raised, on its days or others (a re-run, a gap)
        raised.extend(new)
    return results


def alert_head(a: dict) -> str:
    """An alert (an ``alerts`` row as a dict) as Rich markup: ``2026-01-05 quarantined`` in bold, then its
    message (escaped) without a leading "day <ds> <kind>" the head already says."""
    message = a["message"]
    rest = message.removeprefix(f"day {a['ds']} {a['kind']}")
    words = rest if rest != message else f": {message}"
    return f"[bold]{a['ds']} {a['kind'].replace('_', ' ')}[/bold]{escape(words)}"


def alert_lines(alerts: list[dict]) -> list[str]:
    """One ``alert`` line of Rich markup per alert (an ``alerts`` row as a dict): ``alert`` and its
    :func:`alert_head`."""
    return [f"[red]alert[/red] {alert_head(a)}" for a in alerts]


def print_alerts(out: Console, cfg: FairmonConfig, alerts: list[dict]) -> None:
    """The alerts a command raised, one ``alert`` line each, or one line saying none was (alerts on)."""
    for line in alert_lines(alerts):
        out.print(line, soft_wrap=True)
    if not alerts and cfg.alerts.enabled:
        out.print("no new alert (fairmon alerts lists those raised before)")


@contextmanager
def following_log(enabled: bool):
    """While open, every INFO (or higher) record of the ``fairmon`` logger is
    passed as text to the callbacks appended to the yielded list. Handlers that
    were on the logger keep their own levels, so nothing new is printed."""
    import logging

    callbacks: list = []
    if not enabled:
        yield callbacks
        return
    log = logging.getLogger("fairmon")

    before, propagate = log.getEffectiveLevel(), log.propagate

    class Follow(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            for cb in callbacks:
                cb(record.getMessage())
            if propagate and record.levelno >= before:  # what the ancestors' handlers saw before
                for h in logging.getLogger().handlers:
                    if record.levelno >= h.level:
                        h.handle(record)

    handler, old_level = Follow(logging.INFO), log.level
    log.propagate = False
    quiet = [(h, h.level) for h in log.handlers if h.level == logging.NOTSET]
    for h, _ in quiet:  # a handler that relied on the logger's level keeps printing what it printed
        h.setLevel(log.getEffectiveLevel())
    log.addHandler(handler)
    if log.getEffectiveLevel() > logging.INFO:
        log.setLevel(logging.INFO)
    try:
        yield callbacks
    finally:
        log.removeHandler(handler)
        log.setLevel(old_level)
        log.propagate = propagate
        for h, level in quiet:
            h.setLevel(level)
