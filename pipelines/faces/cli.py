"""The ``fairmon`` command line (Typer)."""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import os
import sys
import threading
import warnings
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from fairmon.pipelines.faces.views import ab_view, prevalence_table, reo_table, run_summary, sdt_view

app = typer.Typer(
    help="fairmon: daily fairness metrics (REO with confidence intervals) from recommender logs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help text as written: [audit] is a config section, not markup
)
# Piped output (CI logs, files) gets a fixed width so tables are not squeezed to 80 columns.
console = Console(width=None if sys.stdout.isatty() else 130)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 130)

ConfigOpt = Annotated[
    Path,
    typer.Option("--config", "-c", envvar="FAIRMON_CONFIG", help="fairmon TOML config file (or $FAIRMON_CONFIG)."),
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print one JSON document on stdout (messages go to stderr).", metavar="")
]

#: Exit codes of every command (README "Exit codes").
EXIT_PUBLISHED = 0  # every day published (or nothing to do)
EXIT_QUARANTINED = 1  # a day was quarantined by its data-quality gate
EXIT_USAGE = 2  # bad options or config
EXIT_REFUSED = 3  # refused: the release would overspend the privacy budget
EXIT_FAILED = 4  # a day failed (crash or unreadable input)
EXIT_LOCKED = 5  # another run holds the project's DuckDB file


def exit_code(results: list[dict]) -> int:
    """The command's exit code for per-day run summaries: 4 when a day failed,
    else 1 when one was quarantined, else 0."""
    status = {r["status"] for r in results}
    if "failed" in status:
        return EXIT_FAILED
    return EXIT_QUARANTINED if "quarantined" in status else EXIT_PUBLISHED


def _dump(doc: dict) -> None:
    """One JSON document on stdout (dates and paths as strings, NaN as null)."""
    import json

    def clean(x):
        if isinstance(x, float) and x != x:
            return None
        if isinstance(x, dict):
            return {str(k): clean(v) for k, v in x.items()}
        if isinstance(x, list | tuple):
            return [clean(v) for v in x]
        return x

    sys.stdout.write(json.dumps(clean(doc), default=str) + "\n")


def _print_version(value: bool) -> None:
    if value:
        from fairmon import __version__

        console.print(f"fairmon {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print fairmon's version and exit.", metavar=""
        ),
    ] = False,
) -> None:
    """fairmon: daily fairness metrics (REO with confidence intervals) from recommender logs."""


def _run(
    cfg, config: Path, days: list[dt.date], show_progress: bool = True, out: Console | None = None, **options
) -> list[dict]:
    """The runner over ``days`` with a progress bar on ``out`` (default stdout);
    a held run lock ends the command (exit 5)."""
    from fairmon.pipelines.faces.views import run_days_with_progress
    from fairmon.pipelines.storage.locking import RunLockedError

    try:
        return run_days_with_progress(
            out or console, cfg, days, config_path=str(config), show_progress=show_progress, **options
        )
    except RunLockedError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(EXIT_LOCKED) from None


def _show_warnings() -> None:
    """fairmon's own warnings (``fairmon`` logger: a missing input file, a day
    without random traffic, a file not staged) on stderr, once."""
    import logging

    log = logging.getLogger("fairmon")

    class Stderr(logging.StreamHandler):  # the current sys.stderr at each message (tests swap it)
        @property
        def stream(self):
            return sys.stderr

        @stream.setter
        def stream(self, value) -> None:
            pass

    if not any(getattr(h, "fairmon_cli", False) for h in log.handlers):
        handler = Stderr()
        handler.setFormatter(logging.Formatter("warning: %(message)s"))
        handler.setLevel(logging.WARNING)
        handler.fairmon_cli = True
        log.addHandler(handler)
        log.propagate = False


def _prefect_env(verbose: bool = False) -> None:
    """Quiet, local Prefect defaults (overridable from the environment); with
    ``verbose`` Prefect's per-stage logs, else fairmon's warnings alone."""
    if not verbose:
        _show_warnings()
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # Failures are summarised by fairmon itself; --verbose shows Prefect's per-stage logs.
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "INFO" if verbose else "CRITICAL")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    # Great Expectations imports PySpark when it is installed (fairmon[spark]); PySpark then warns about
    # pandas >= 3 on every command, though fairmon hands it no pandas frame.
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)


def _launch_api() -> None:
    """Start Prefect's temporary local API now when the command will need one
    (:func:`fairmon.pipelines.orchestration.prefect_guard.launch_temporary_server`): its
    seconds of start-up overlap the command's imports and work."""
    from fairmon.pipelines.orchestration.prefect_guard import launch_temporary_server

    launch_temporary_server()


def _parse_date(value: str, name: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not a date YYYY-MM-DD", param_hint=name) from None


def _load(config: Path):
    from fairmon.pipelines.core.config import ConfigError, load_config

    try:
        return load_config(config)
    except ConfigError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(EXIT_USAGE) from None


@app.command()
def run(
    date: Annotated[str, typer.Option("--date", "-d", help="The log day to compute, YYYY-MM-DD (UTC).")],
    config: ConfigOpt = Path("fairmon.toml"),
    force_ingest: Annotated[
        bool, typer.Option("--force-ingest", help="Re-stage input files even when unchanged.", metavar="")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show Prefect's per-stage logs.", metavar="")
    ] = False,
    wait: Annotated[float, typer.Option(help="Seconds to wait for another run on the same DuckDB file.")] = 0.0,
    as_json: JsonOpt = False,
) -> None:
    """Compute one day: ingest its impressions, count groups, estimate REO with
    CIs and publish the day's partitions (replacing any earlier run of it).
    Exit code 0 published, 1 quarantined, 4 failed, 5 lock busy."""
    _prefect_env(verbose)
    ds = _parse_date(date, "--date")
    cfg = _load(config)
    _launch_api()
    err.print(f"fairmon run {ds} ({config}): checking inputs, then counts and estimators", highlight=False)
    r = _run(cfg, config, [ds], show_progress=False, force_ingest=force_ingest, wait_seconds=wait)[0]
    if as_json:
        _dump({"days": [r], "exit_code": exit_code([r])})
        raise typer.Exit(exit_code([r]))
    if r["status"] != "published":
        err.print(f"[red]{r['status']}:[/red] {escape(r['error'])}")
        raise typer.Exit(exit_code([r]))
    if r["reo"]:
        console.print(reo_table(r["reo"], f"REO for {ds}"))
    if r["reo_ab"]:
        console.print(ab_view(r["reo_ab"], f"A/B: D_REO = REO(treatment) − REO(control), {ds}"))
    if r["threshold_prevalence"]:
        console.print(prevalence_table(r["threshold_prevalence"], f"Prevalence at the threshold, {ds}"))
    if r["sdt"]:
        console.print(sdt_view(r["sdt"], f"Labelers (signal detection), {ds}"))
    console.print(f"partitions written: {', '.join(r['paths'].values())}")


@app.command()
def ingest(
    date: Annotated[str, typer.Option("--date", "-d", help="The log day whose inputs to stage, YYYY-MM-DD.")],
    config: ConfigOpt = Path("fairmon.toml"),
    force: Annotated[
        bool, typer.Option("--force-ingest", "--force", help="Re-stage input files even when unchanged.", metavar="")
    ] = False,
) -> None:
    """Validate and stage a day's input files (and its random-traffic window)
    without computing anything; re-ingesting replaces the files' rows."""
    _prefect_env()
    ds = _parse_date(date, "--date")
    cfg = _load(config)
    from fairmon.pipelines.orchestration.flows import ingest as ingest_flow
    from fairmon.pipelines.storage.locking import RunLockedError, project_lock

    try:
        with project_lock(cfg.duckdb_path, cfg.warehouse_path):
            results = ingest_flow(cfg, ds, force)
    except RunLockedError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(EXIT_LOCKED) from None
    for r in results:
        done = "checked" if r.table == "snapshot" else "staged"  # a model snapshot is read where it lies
        status = f"[green]{done}[/green]" if r.success else f"[red]not {done}[/red]: {escape(r.summary())}"
        console.print(f"{r.subject}: {status}")
    if not all(r.success for r in results):
        raise typer.Exit(EXIT_QUARANTINED)


@app.command()
def backfill(
    start: Annotated[str, typer.Option("--start", help="First day, YYYY-MM-DD.")],
    end: Annotated[str, typer.Option("--end", help="Last day (inclusive), YYYY-MM-DD.")],
    config: ConfigOpt = Path("fairmon.toml"),
    force_ingest: Annotated[
        bool, typer.Option("--force-ingest", help="Re-stage input files even when unchanged.", metavar="")
    ] = False,
    only_failed: Annotated[
        bool,
        typer.Option(
            "--only-failed",
            help="Only days whose latest run did not publish (quarantined, failed or never run).",
            metavar="",
        ),
    ] = False,
    only_stale: Annotated[
        bool,
        typer.Option(
            "--only-stale", help="Only days whose inputs changed after they were computed (late data).", metavar=""
        ),
    ] = False,
    concurrency: Annotated[int, typer.Option(min=1, help="Days run at the same time.")] = 1,
    wait: Annotated[float, typer.Option(help="Seconds to wait for another run on the same DuckDB file.")] = 0.0,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show Prefect's per-stage logs.", metavar="")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run every day from START to END (inclusive) with a progress bar and a
    closing summary per day (published / quarantined with reason / failed with
    error). Days are independent: a failing day never stops the others.
    Re-running is idempotent: each day's partitions are replaced, never appended.
    Exit code 0 all published, 1 a day quarantined, 4 a day failed, 5 lock busy."""
    out = err if as_json else console
    _prefect_env(verbose)
    a, b = _parse_date(start, "--start"), _parse_date(end, "--end")
    if b < a:
        raise typer.BadParameter("--end is before --start", param_hint="--end")
    cfg = _load(config)
    _launch_api()
    from fairmon.pipelines.orchestration.ops import days_to_run, detect_stale
    from fairmon.pipelines.storage.locking import RunLockedError, project_lock

    try:  # choosing the days reads the DuckDB file: queue behind another run like the run itself
        with project_lock(cfg.duckdb_path, cfg.warehouse_path, wait):
            if only_stale:
                found = detect_stale(cfg)
                if found.height:
                    out.print(f"late data: {found.height} (day, file) pair(s) marked stale")
            days = days_to_run(cfg, a, b, only_failed=only_failed, only_stale=only_stale)
    except RunLockedError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(EXIT_LOCKED) from None
    if not days:
        out.print("nothing to run: every selected day is up to date")
        if as_json:
            _dump({"days": [], "exit_code": EXIT_PUBLISHED})
        return
    results = _run(cfg, config, days, out=out, force_ingest=force_ingest, concurrency=concurrency, wait_seconds=wait)
    out.print(run_summary(results))
    if as_json:
        _dump({"days": results, "exit_code": exit_code(results)})
    raise typer.Exit(exit_code(results))


@app.command()
def serve(
    config: ConfigOpt = Path("fairmon.toml"),
    cron: Annotated[
        str | None, typer.Option(help="Cron expression (default: config [schedule].cron, '0 6 * * *').")
    ] = None,
    timezone: Annotated[str | None, typer.Option(help="Time zone of the cron (default UTC).")] = None,
    lag_days: Annotated[
        int | None, typer.Option(help="Compute the day this many days before today (default 1: yesterday).")
    ] = None,
) -> None:
    """Register the daily job as a Prefect deployment with its cron schedule and
    serve it (blocks; Ctrl-C stops). Each run computes the lagged day and
    recomputes days that late data made stale."""
    _prefect_env(verbose=True)
    import signal
    import threading

    stop = threading.Event()  # a SIGTERM before the serving loop takes it over: remembered, then a clean stop
    signal.signal(signal.SIGTERM, lambda *_args: stop.set())
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C
        cfg = _load(config)
        from fairmon.pipelines.orchestration.ops import build_deployment

        sc = cfg.schedule
        dep = build_deployment(
            config, cron or sc.cron, timezone or sc.timezone, sc.lag_days if lag_days is None else lag_days, sc.name
        )
        console.print(
            f"serving deployment {dep.name}: cron {dep.schedules[0].schedule.cron} "
            f"({dep.schedules[0].schedule.timezone}), parameters {dep.parameters}; stop with Ctrl-C or SIGTERM",
            highlight=False,
        )
        import asyncio

        from fairmon.pipelines.orchestration.ops import serve_until_stopped

        asyncio.run(serve_until_stopped(dep, stop))
    console.print("fairmon serve stopped")


schedule_app = typer.Typer(help="Inspect the daily schedule.", no_args_is_help=True)
app.add_typer(schedule_app, name="schedule")


@schedule_app.command("show")
def schedule_show(
    config: ConfigOpt = Path("fairmon.toml"),
    n: Annotated[int, typer.Option("--count", "-n", min=1, help="How many upcoming runs to list.")] = 5,
) -> None:
    """Print the deployment ``fairmon serve`` would register and its next runs."""
    _prefect_env()
    cfg = _load(config)
    from fairmon.pipelines.orchestration.ops import build_deployment, next_runs

    sc = cfg.schedule
    dep = build_deployment(config, sc.cron, sc.timezone, sc.lag_days, sc.name)
    sched = dep.schedules[0].schedule
    t = Table(title=f"deployment {dep.flow_name}/{dep.name}", title_justify="left", show_header=False)
    t.add_row("cron", sched.cron)
    t.add_row("timezone", sched.timezone)
    t.add_row("parameters", escape(str(dep.parameters)))
    for i, when in enumerate(next_runs(sched.cron, sched.timezone, n)):
        lag = dt.timedelta(days=sc.lag_days)
        t.add_row("next runs" if i == 0 else "", f"{when:%Y-%m-%d %H:%M %Z} → computes {(when - lag).date()}")
    console.print(t)


@app.command()
def report(
    start: Annotated[str, typer.Option("--start", help="First day, YYYY-MM-DD.")],
    end: Annotated[str, typer.Option("--end", help="Last day (inclusive), YYYY-MM-DD.")],
    config: ConfigOpt = Path("fairmon.toml"),
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="HTML file to write (default: report_START_END.html beside the warehouse)."),
    ] = None,
) -> None:
    """Build one self-contained HTML report (opens offline) for START..END from
    published days only: daily REO per attribute and arm with CI bands and the
    80%-rule line, ΔU per group with CIs, the data-quality summary and the
    excluded days with their reasons."""
    from fairmon.pipelines.faces.report import build_report

    a, b = _parse_date(start, "--start"), _parse_date(end, "--end")
    if b < a:
        raise typer.BadParameter("--end is before --start", param_hint="--end")
    cfg = _load(config)
    path = build_report(cfg, a, b, out, config_name=str(config))
    console.print(f"report: {path}")


@app.command()
def plan(
    config: ConfigOpt = Path("fairmon.toml"),
    start: Annotated[str | None, typer.Option(help="First day of counts to plan from.")] = None,
    end: Annotated[str | None, typer.Option(help="Last day of counts to plan from.")] = None,
    epsilon: Annotated[
        float, typer.Option(help="Accuracy ε (relative for E.1 and the union bound, else absolute).")
    ] = 0.1,
    delta: Annotated[float, typer.Option(help="Failure probability δ.")] = 0.05,
    target_se: Annotated[float | None, typer.Option(help="Also solve for this SE of REO.")] = None,
    rec_rate: Annotated[
        float | None, typer.Option(help="Overall recommendation rate P(R = 1), needed by seed 001 Theorem E.2.")
    ] = None,
    p: Annotated[str | None, typer.Option("--P", help="Given rates instead of counts: P_k, e.g. 0.01,0.05.")] = None,
    q: Annotated[str | None, typer.Option("--Q", help="Given rates: Q_k, e.g. 0.1,0.25.")] = None,
    n_rec: Annotated[int | None, typer.Option(help="Given rates: default rows per day.")] = None,
    rand_per_day: Annotated[int | None, typer.Option(help="Given rates: random rows per day.")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON ({'volumes': [...]}) instead of tables.", metavar="")
    ] = False,
) -> None:
    """How much random (and default) traffic a given accuracy needs (seed 001 App. E).

    Methods: thm_e1 (each P_k within relative ε), thm_e2 (each U_k within ε; needs
    --rec-rate), thm_e3 / thm_e4 (every ΔU_k / REO within ε, as printed) and their
    corrected constants, and fairmon's own union bound. Uses the published group
    counts of START..END, or rates given with --P/--Q.
    """
    import json as _json

    import numpy as np

    from fairmon.pipelines.faces.audit_export import plan_from_counts
    from fairmon.transforms.planning.traffic import plan_volumes, random_volume_for_reo_se, reo_se_for_volume

    if p and q:
        P, Q = np.array(_parse_floats(p, "--P")), np.array(_parse_floats(q, "--Q"))
        if P.shape != Q.shape:
            raise typer.BadParameter("--P and --Q need one value per group", param_hint="--Q")
        volumes = plan_volumes(P, Q, epsilon, delta, rec_rate)
        for v in volumes:
            v["rand_days"] = v["n_rand"] / rand_per_day if rand_per_day and v["n_rand"] is not None else None
            v["rec_days"] = v["n_rec"] / n_rec if n_rec and v["n_rec"] is not None else None
        extra = {}
        if n_rec and rand_per_day:
            extra["se_reo"] = reo_se_for_volume(Q, P, n_rec, rand_per_day)[0]
            if target_se:
                extra["rand_for_target_se"] = random_volume_for_reo_se(Q, P, n_rec, target_se)
        if as_json:
            print(_json.dumps({"epsilon": epsilon, "delta": delta, "volumes": volumes, **extra}, default=str))
            return
        console.print(_volumes_table(volumes, f"Traffic plan (ε = {epsilon}, δ = {delta}) for P = {p}, Q = {q}"))
        if "se_reo" in extra:
            console.print(f"SE(REO) with {n_rec} default and {rand_per_day} random rows: {extra['se_reo']:.5f}")
        if "rand_for_target_se" in extra:
            need = extra["rand_for_target_se"]
            console.print(
                f"random rows for SE(REO) = {target_se}: {need:.0f} ({need / rand_per_day:.1f} days)"
                if np.isfinite(need)
                else f"SE(REO) = {target_se} is out of reach with {n_rec} default rows: add default traffic"
            )
        return
    cfg = _load(config)
    a = _parse_date(start, "--start") if start else dt.date.min
    b = _parse_date(end, "--end") if end else dt.date.max
    try:
        table, volumes = plan_from_counts(cfg, a, b, epsilon, delta, target_se, rec_rate)
    except ValueError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(EXIT_USAGE) from None
    if as_json:
        print(
            _json.dumps(
                {"epsilon": epsilon, "delta": delta, "volumes": volumes, "summary": table.to_dicts()}, default=str
            )
        )
        return
    t = Table(title=f"Traffic now (counts of {table['ds'][0]})", title_justify="left")
    for c in (
        "arm",
        "attribute",
        "random rows/day",
        "window span (days)",
        "SE(REO) now",
        "random rows for target SE",
        "days to collect them",
    ):
        t.add_column(c, justify="left" if c in ("arm", "attribute") else "right")
    for r in table.iter_rows(named=True):
        need = r["rand_for_target_se"]
        t.add_row(
            r["arm"],
            r["attribute"],
            f"{r['rand_per_day']:.0f}",
            str(r["rand_span_days"]),
            f"{r['se_reo_now']:.4f}",
            "-" if need != need else (f"{need:.0f}" if need != float("inf") else "out of reach"),
            "-" if need != need or need == float("inf") else f"{r['days_for_target_se']:.1f}",
        )
    console.print(t)
    for r in table.iter_rows(named=True):
        if r["target_se_note"]:
            console.print(
                f"[yellow]{escape(r['arm'])} / {escape(r['attribute'])}: {escape(r['target_se_note'])}[/yellow]"
            )
    console.print(_volumes_table(volumes, f"Volumes needed (ε = {epsilon}, δ = {delta})", by_arm=True))


def _volumes_table(volumes: list[dict], title: str, by_arm: bool = False) -> Table:
    """Rich table of planner volumes (one row per method, and arm × attribute)."""
    t = Table(title=title, title_justify="left")
    cols = (["arm", "attribute"] if by_arm else []) + [
        "method",
        "ε bounds",
        "default rows",
        "days of default",
        "random rows",
        "days of random",
        "note",
    ]
    for c in cols:
        t.add_column(c, justify="right" if "rows" in c or "days" in c else "left")

    def num(x, fmt="{:.0f}"):
        return "-" if x is None else fmt.format(x)

    for v in volumes:
        t.add_row(
            *([v["arm"], v["attribute"]] if by_arm else []),
            v["method"],
            v["target"],
            num(v["n_rec"]),
            num(v.get("rec_days"), "{:.1f}"),
            num(v["n_rand"]),
            num(v.get("rand_days"), "{:.1f}"),
            v["note"],
        )
    return t


@app.command("audit-export")
def audit_export(
    date: Annotated[str, typer.Option("--date", "-d", help="Last day of the score window, YYYY-MM-DD.")],
    attribute: Annotated[str, typer.Option(help="Group attribute of the release.")],
    config: ConfigOpt = Path("fairmon.toml"),
    model: Annotated[str | None, typer.Option(help="Model (default: the first configured threshold's).")] = None,
    epsilon: Annotated[float, typer.Option(help="Privacy budget of this release.")] = 0.5,
    survival: Annotated[
        bool,
        typer.Option(
            "--survival", help="Also show the survival form P*(a, >= y) (eq. 5; not used in the decision).", metavar=""
        ),
    ] = False,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Release file (JSON).")] = None,
) -> None:
    """Release per-group histograms of qualified individuals' scores over the
    declared score set ([audit] score_values, bins or edges) with discrete
    Laplace noise from OpenDP, ε-differentially private (seed 000 §4.3.3, §5.1;
    DESIGN §4.6). Group sizes are declared public ([audit] public_group_sizes)
    or released with noise at ε/2 ([audit] groups). Prints P* (eq. 4), the
    empirical fairness gap, the interval for FG and the decision: fair only
    when the interval lies at or below α, unfair only when above, else
    inconclusive. Refused when it would overspend the data set's budget."""
    from fairmon.pipelines.faces.audit_export import BudgetExceeded, export_release

    cfg = _load(config)
    ds = _parse_date(date, "--date")
    if cfg.scores is None:
        err.print("[red]error:[/red] audit-export needs a [scores] section in the config")
        raise typer.Exit(EXIT_USAGE)
    model = model or cfg.scores.thresholds[0].model
    out = out or cfg.warehouse_path.parent / "releases" / f"{model}_{attribute}_{ds}.json"
    try:
        r = export_release(cfg, ds, attribute, model, epsilon, survival=survival, out=out)
    except BudgetExceeded as e:
        err.print(f"[red]refused:[/red] {escape(str(e))}")
        raise typer.Exit(EXIT_REFUSED) from None
    except ValueError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(EXIT_USAGE) from None
    colour = {"fair": "green", "unfair": "red"}.get(r["decision"], "yellow")
    console.print(
        f"release {r['release_id']} of {r['model']} by {r['attribute']} ({r['window'][0]}..{r['window'][1]}),"
        f" ε = {epsilon} (spent {r['budget_spent']:g} of {r['budget_total']:g})"
    )
    console.print(
        f"groups {r['groups']}, sizes {r['group_sizes']} {r['n_q']}; |Y| = {len(r['score_bins'])} declared bins"
    )
    lo, hi = r["fg_interval"]
    console.print(
        f"EFG = {r['efg']:.4f}, per-cell error t = {r['cell_error_t']:.4f} (δ = {r['delta']}) -> "
        f"FG in [{lo:.4f}, {hi:.4f}] vs α = {r['alpha']} -> decision: [{colour}]{r['decision']}[/{colour}]"
    )
    for c in r["seed_conditions_failed"]:
        console.print(f"  [yellow]{escape(c)}[/yellow]")
    p = r["platform_only"]
    console.print(
        f"platform only (not in the release): {p['duplicate_rows_dropped']} duplicate item rows dropped "
        f"(latest kept), {p['qualified_rows_outside_declared_groups']} qualified rows outside the declared groups"
    )
    console.print(f"written: {out}")


@app.command("sample-size")
def sample_size(
    alpha: Annotated[float, typer.Option(help="Fairness tolerance α.")] = 0.2,
    groups: Annotated[int, typer.Option(min=1, help="|A|, number of groups.")] = 2,
    levels: Annotated[int, typer.Option(min=1, help="|Y|, number of score levels.")] = 100,
    delta: Annotated[float, typer.Option(help="Failure probability δ.")] = 0.05,
    as_json: JsonOpt = False,
) -> None:
    """Minimum qualified individuals per group for an audit, private (seed 000
    eqs. 6, 8) and non-private (eq. 7), and their ratio (at most 4·ln3/ln2 ≈ 6.34)."""
    from fairmon.transforms.private.release import min_sample_nonprivate, min_sample_private, sample_size_ratio

    a, b = min_sample_private(alpha, groups, levels, delta), min_sample_nonprivate(alpha, groups, levels, delta)
    if as_json:
        _dump(
            {
                "alpha": alpha,
                "groups": groups,
                "levels": levels,
                "delta": delta,
                "private": a,
                "nonprivate": b,
                "ratio": sample_size_ratio(groups, levels, delta),
            }
        )
        return
    console.print(
        f"private (eqs. 6, 8): {a}   non-private (eq. 7): {b}   ratio {a / b:.2f} "
        f"(unrounded {sample_size_ratio(groups, levels, delta):.3f}; supremum 6.34)"
    )


@app.command("envy-plan")
def envy_plan(
    delta: Annotated[float, typer.Option(help="Failure probability δ of the whole audit.")] = 0.05,
    lam: Annotated[float, typer.Option("--lambda", help="λ: the share of users allowed to be (ε, γ)-envious.")] = 0.1,
    gamma: Annotated[float, typer.Option(help="γ: the share of other users a user may envy.")] = 0.1,
    as_json: JsonOpt = False,
) -> None:
    """What the platform must log for an envy-freeness audit (seed 004 Alg. 2,
    Th. 2): M_tilde target users drawn uniformly, each served by the policies of
    K donors drawn uniformly from the other users (swap traffic), each user's
    certificate run at δ/(3·M_tilde)."""
    from fairmon.transforms.envy.certify import audit_sizes

    try:
        m_tilde, k = audit_sizes(delta, lam, gamma)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    per_user = delta / (3 * m_tilde)
    if as_json:
        _dump({"delta": delta, "lambda": lam, "gamma": gamma, "M_tilde": m_tilde, "K": k, "delta_per_user": per_user})
        return
    console.print(
        f"M_tilde = {m_tilde} target users, K = {k} donors each "
        f"({m_tilde * k} target-donor pairs to log as swap traffic); "
        f"each certificate at δ/(3·M_tilde) = {per_user:.3g}"
    )


def _parse_floats(value: str, name: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in value.split(","))
    except ValueError:
        raise typer.BadParameter(f"{value!r}: expected comma-separated numbers", param_hint=name) from None


def _parse_arm(value: str) -> tuple[str, dict[int, float]]:
    name, _, weights = value.partition("=")
    out: dict[int, float] = {}
    try:
        for part in filter(None, weights.split(",")):
            k, _, w = part.partition(":")
            out[int(k)] = float(w)
    except ValueError:
        raise typer.BadParameter(f"{value!r}: expected NAME or NAME=GROUP:WEIGHT,...", param_hint="--arm") from None
    return name, out


@app.command()
def simulate(
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder to write into.")] = Path("sim"),
    days: Annotated[int, typer.Option(min=1, help="Number of days.")] = 14,
    start: Annotated[str, typer.Option(help="First day, YYYY-MM-DD.")] = "2026-01-01",
    rows_per_day: Annotated[int, typer.Option(min=1, help="Default-traffic rows per day and arm.")] = 50_000,
    random_rows_per_day: Annotated[int, typer.Option(min=1, help="Random-traffic rows per day.")] = 6_000,
    rec_share: Annotated[str, typer.Option(help="Group shares in default traffic, e.g. 0.45,0.55.")] = "0.45,0.55",
    rec_rate: Annotated[str, typer.Option(help="Positive rates per group in default traffic.")] = "0.30,0.36",
    rand_share: Annotated[str, typer.Option(help="Group shares in random traffic.")] = "0.5,0.5",
    rand_rate: Annotated[str, typer.Option(help="Positive rates per group in random traffic.")] = "0.25,0.28",
    arm: Annotated[
        list[str] | None,
        typer.Option(
            help="Arm as NAME or NAME=GROUP:WEIGHT,... (seed 001 §4.4 boosting weights), e.g. "
            "'deboost=0:1.25'. Repeat for several arms. Default: one arm 'all'."
        ),
    ] = None,
    regime: Annotated[
        str | None,
        typer.Option(
            help="Seed 001 §4.1 regime: dense p=(0.01,0.05), sparse p=(0.001,0.005), very_sparse "
            "p=(0.0001,0.0005) (p = P(Y=1,S=k) in random traffic), q=(10p1,5p2), U∝(10,5), REO=1/3; "
            "overrides shares and rates; random traffic gets --rows-per-day rows per day, as default traffic."
        ),
    ] = None,
    pool_days: Annotated[int, typer.Option(min=1, help="Days per pooled random-traffic file.")] = 7,
    pool_policy: Annotated[
        str,
        typer.Option(
            help="pool_policy of the written config: overlap (every pool meeting a day's window, as for the "
            "published data set; reo.look_ahead marks pools reaching past the day) or contained (only pools "
            "inside the window: most days then have no random traffic unless the window is longer than a pool)."
        ),
    ] = "overlap",
    post_recall_rows_per_day: Annotated[
        int,
        typer.Option(
            min=0,
            help="Forced-inserted post-recall rows per day and arm (seed 001 App. I.4); 0: no post-recall "
            "stage. With it the config gets stage_paths and the run the reo_stage table.",
        ),
    ] = 0,
    recall_share: Annotated[str, typer.Option(help="Group shares after the recall stage.")] = "0.5,0.5",
    recall_rate: Annotated[str, typer.Option(help="Positive rates per group after the recall stage.")] = "0.27,0.33",
    request_size: Annotated[
        int, typer.Option(min=1, help="Rows per request (they share a request_id); 1 = independent rows.")
    ] = 1,
    icc: Annotated[
        float,
        typer.Option(min=0.0, max=0.99, help="Intra-class correlation of positives within a request (0 = none)."),
    ] = 0.0,
    group_per_request: Annotated[
        bool,
        typer.Option("--group-per-request", help="One group per request (a user attribute), not per row.", metavar=""),
    ] = False,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    fmt: Annotated[str, typer.Option("--format", help="csv or parquet.")] = "csv",
) -> None:
    """Write simulated impressions in the TikTok layout with a known truth
    (true U, ΔU and REO per day and arm) and a config to run fairmon on them."""
    from fairmon.pipelines.faces.simulated import write_simulation
    from fairmon.transforms.simulators.impressions import SimulationSpec, regime_spec

    arms = dict(_parse_arm(a) for a in arm) if arm else {"all": {}}
    common = dict(start=_parse_date(start, "--start"), days=days, arms=arms, random_pool_days=pool_days, seed=seed)
    common |= dict(request_size=request_size, icc=icc, group_per_request=group_per_request)
    if post_recall_rows_per_day:
        common |= dict(
            post_recall_rows_per_day=post_recall_rows_per_day,
            recall_share=_parse_floats(recall_share, "--recall-share"),
            recall_rate=_parse_floats(recall_rate, "--recall-rate"),
        )
    try:
        if regime:
            spec = regime_spec(regime, rows_per_day=rows_per_day, **common)
        else:
            spec = SimulationSpec(
                rows_per_day=rows_per_day,
                random_rows_per_day=random_rows_per_day,
                rec_share=_parse_floats(rec_share, "--rec-share"),
                rec_rate=_parse_floats(rec_rate, "--rec-rate"),
                rand_share=_parse_floats(rand_share, "--rand-share"),
                rand_rate=_parse_floats(rand_rate, "--rand-rate"),
                **common,
            )
        with Progress(TextColumn("simulate"), BarColumn(), MofNCompleteColumn(), console=console) as p:
            job = p.add_task("files", total=None)
            paths = write_simulation(
                spec, out, fmt, progress=lambda i, n: p.update(job, completed=i, total=n), pool_policy=pool_policy
            )
    except ValueError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(EXIT_USAGE) from None
    end = spec.start + dt.timedelta(days=spec.days - 1)
    console.print(f"wrote {spec.days} days to {out}; config {paths['config']}; truth {paths['truth_reo']}")
    console.print(f"next: fairmon backfill -c {paths['config']} --start {spec.start} --end {end}")


@app.command("simulate-labels")
def simulate_labels(
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder to write into.")] = Path("sim-labels"),
    days: Annotated[int, typer.Option(min=1, help="Number of days.")] = 7,
    start: Annotated[str, typer.Option(help="First day, YYYY-MM-DD.")] = "2026-01-01",
    items_per_day: Annotated[int, typer.Option(min=1, help="Labeled items per day.")] = 20_000,
    gold_rate: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of items with an expert gold label.")] = 1.0,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
) -> None:
    """Write simulated labeling logs: content groups with known prevalence and
    labelers with known per-group d′ and criterion (seed 002 §5.3), the true
    implied thresholds and cost ratios (truth_labelers.csv), and a config."""
    from fairmon.pipelines.faces.simulated import write_labeling_simulation
    from fairmon.transforms.simulators.labelers import LabelingSpec

    try:
        spec = LabelingSpec(
            start=_parse_date(start, "--start"), days=days, items_per_day=items_per_day, gold_rate=gold_rate, seed=seed
        )
    except ValueError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(EXIT_USAGE) from None
    paths = write_labeling_simulation(spec, out)
    end = spec.start + dt.timedelta(days=days - 1)
    console.print(f"wrote {days} days of labels to {out}; config {paths['config']}; truth {paths['truth']}")
    console.print(f"next: fairmon run -c {paths['config']} --date {end}")


@app.command("simulate-envy")
def simulate_envy(
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder to write into.")] = Path("sim-envy"),
    scenario: Annotated[str, typer.Option(help="envious or envy-free.")] = "envious",
    days: Annotated[int, typer.Option(min=1, help="Number of days.")] = 14,
    start: Annotated[str, typer.Option(help="First day, YYYY-MM-DD.")] = "2026-01-01",
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
) -> None:
    """Write simulated swap and default traffic from a recommender with known
    preferences (seed 004 §5.1): AUDIT's target users, each served by its own
    policy and by K donors' policies every day, plus default and random
    traffic; the truth (truth_envy.json) and a config with [envy]. The
    envy-free scenario is certified after about nine days; the envious one
    (a minority the model knows nothing about) is found on the first."""
    from fairmon.pipelines.faces.simulated import write_envy_simulation
    from fairmon.transforms.simulators.envy_world import SCENARIOS

    if scenario not in SCENARIOS:
        raise typer.BadParameter(f"{scenario!r}: one of {', '.join(SCENARIOS)}", param_hint="--scenario")
    first = _parse_date(start, "--start")
    with Progress(transient=True, console=err) as bar:
        task_id = bar.add_task("writing days", total=days)
        paths = write_envy_simulation(
            out,
            scenario=scenario,
            days=days,
            start=first,
            seed=seed,
            progress=lambda i, n: bar.update(task_id, completed=i),
        )
    end = first + dt.timedelta(days=days - 1)
    console.print(
        f"wrote {days} days of swap and default traffic to {out}; config {paths['config']}; truth {paths['truth']}"
    )
    console.print(f"next: fairmon backfill -c {paths['config']} --start {first} --end {end}")


@app.command("train-snapshot")
def train_snapshot(
    out: Annotated[Path, typer.Option("--out", "-o", help="Project folder to write into.")] = Path("coat-reach"),
    date: Annotated[str, typer.Option("--date", "-d", help="The day the snapshot is for, YYYY-MM-DD.")] = "2016-06-19",
    coat: Annotated[
        Path | None, typer.Option(help="Coat folder (train.ascii, test.ascii, features); default: the bundled copy.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the ALS initial factors.")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Train a biased matrix factorisation on Coat's self-selected ratings
    (rank and ridge chosen by RMSE on its random-exposure ratings), write it as
    a model snapshot (DESIGN §2) with a config whose [reach] audits it:
    reachability, discovery, availability and stability (seed 003)."""
    from fairmon.pipelines.ingest.snapshots import write_coat_reach_project
    from fairmon.resources import data_dir

    ds = _parse_date(date, "--date")
    folder = coat or data_dir("coat")
    if not (folder / "train.ascii").is_file():
        raise typer.BadParameter(f"{folder} has no train.ascii", param_hint="--coat")
    with err.status("training the biased MF (grid of ranks and ridges)"):
        summary = write_coat_reach_project(out, ds, folder, seed=seed)
    if as_json:
        _dump(summary)
        return
    for rank, lam, rmse in summary["grid"]:
        mark = "  <- chosen" if (rank, lam) == (summary["rank"], summary["lam"]) else ""
        console.print(f"rank {rank:>3}  lambda {lam:>5}  test RMSE {rmse:.4f}{mark}")
    console.print(f"snapshot: {Path(summary['files']['users']).parent}; config {summary['config']}")
    console.print(f"next: fairmon run -c {summary['config']} --date {ds}")


@app.command()
def demo(
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the demo's data and outputs.")] = Path(
        "fairmon-demo"
    ),
) -> None:
    """Run everything on bundled and simulated data: 14 simulated days with a
    control and three treatment arms (daily REO with CIs beside the truth, and
    the A/B table of seed 001 §4.4), Coat (item attribute gender, rating >= 4),
    COMPAS (prevalence at the threshold t = 5 and a private audit release),
    simulated labelers (SDT cost ratios), an envy-freeness audit of swap
    traffic, and the reachability and stability of a model trained on Coat;
    print where tables and reports went."""
    _prefect_env()
    from fairmon.pipelines.faces.demo import run_demo

    run_demo(out.resolve(), console)


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help='A SELECT over the output tables, e.g. "select * from reo".')],
    config: ConfigOpt = Path("fairmon.toml"),
    as_json: Annotated[bool, typer.Option("--json", help="Rows as a JSON array of objects.", metavar="")] = False,
    csv: Annotated[bool, typer.Option("--csv", help="Rows as CSV.", metavar="")] = False,
    limit: Annotated[int, typer.Option(min=1, help="Rows shown in the table view.")] = 50,
) -> None:
    """Query the published outputs with DuckDB SQL, read-only. Works while a
    run holds the project's DuckDB file: the tables are read from the
    warehouse's Parquet files. Views: one per output table (reo, reo_group,
    reo_ab, group_counts, ...) and <table>_published (days whose latest run
    published). Quote the reserved words group and table: "group"."""
    import duckdb

    from fairmon.pipelines.storage.warehouse import query_warehouse

    cfg = _load(config)
    try:
        frame, note = query_warehouse(cfg.duckdb_path, cfg.warehouse_path, query)
    except (duckdb.Error, ValueError) as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(EXIT_USAGE) from None
    if note:
        err.print(f"[yellow]note:[/yellow] {escape(note)}")
    if as_json:
        _dump({"columns": frame.columns, "rows": frame.to_dicts()})
    elif csv:
        sys.stdout.write(frame.write_csv())
    else:
        t = Table(title=f"{frame.height} row(s)", title_justify="left")
        for c in frame.columns:
            t.add_column(c)
        for row in frame.head(limit).iter_rows():
            t.add_row(*(escape("" if v is None else str(v)) for v in row))
        console.print(t)
        if frame.height > limit:
            console.print(f"... {frame.height - limit} more (--limit, --csv or --json for all)")


@app.command()
def init(
    fmt: Annotated[str, typer.Option("--format", help="Input format: tiktok, contract or coat.")] = "tiktok",
    out: Annotated[Path, typer.Option("--out", "-o", help="Config file to write.")] = Path("fairmon.toml"),
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.", metavar="")] = False,
) -> None:
    """Write a commented starter config for an input format; edit its paths,
    signals and attributes, then `fairmon run --date YYYY-MM-DD`."""
    from fairmon.pipelines.faces.templates import FORMATS, config_template

    if fmt not in FORMATS:
        raise typer.BadParameter(f"{fmt!r}: choose one of {', '.join(FORMATS)}", param_hint="--format")
    if out.exists() and not force:
        err.print(f"[red]error:[/red] {out} exists (--force to overwrite)")
        raise typer.Exit(EXIT_USAGE)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(config_template(fmt))
    console.print(f"wrote {out} ({fmt} format); check it with: fairmon run --date YYYY-MM-DD -c {out}")


#: One line per command for ``fairmon --help`` (the full text is on ``fairmon CMD --help``).
SHORT_HELP = {
    "run": "Compute and publish one day (REO with CIs, A/B, checks).",
    "ingest": "Validate and stage a day's input files without computing.",
    "backfill": "Run every day of a range; idempotent, one summary per day.",
    "serve": "Serve the daily job on its cron schedule (Prefect).",
    "report": "Write a self-contained HTML report for a range of days.",
    "plan": "How much random traffic a given accuracy needs (seed 001 App. E).",
    "audit-export": "Release an ε-DP score histogram per group and its fairness decision.",
    "sample-size": "Qualified individuals per group an audit needs (seed 000).",
    "envy-plan": "Target users and donors an envy-freeness audit must log (seed 004).",
    "simulate": "Write simulated TikTok-format logs with their truth and a config.",
    "simulate-labels": "Write simulated labeling logs with known d′, criteria and a config.",
    "simulate-envy": "Write simulated swap traffic with known envy (seed 004) and a config.",
    "demo": "Run everything on bundled and simulated data.",
    "sql": "Query the published outputs with DuckDB SQL (read-only).",
    "init": "Write a commented starter config for an input format.",
}


def _short_helps() -> None:
    """Set each command's one-line summary from :data:`SHORT_HELP`."""
    for info in app.registered_commands:
        name = info.name or (info.callback.__name__.replace("_", "-") if info.callback else "")
        if info.short_help is None and name in SHORT_HELP:
            info.short_help = SHORT_HELP[name]


_short_helps()


def main() -> None:
    """Entry point of the ``fairmon`` script: the command, then :func:`_exit`."""
    try:
        app()
    except SystemExit as e:
        _exit(e.code)
    _exit(0)


def _exit(code: int | str | None) -> NoReturn:
    """End the process with the command's exit ``code`` (as ``sys.exit``
    takes it) once the command is done, without the interpreter's teardown.

    First everything the interpreter itself runs at exit, in its order:
    ``threading._shutdown`` (which joins worker threads and runs the
    callbacks registered with ``threading._register_atexit``, where
    Prefect drains its queued events and logs to the API), then every
    ``atexit`` handler (logging flushed, the temporary API stopped, DuckDB
    connections closed), then the standard streams are flushed. What is
    skipped is the teardown after that: its full garbage collections walk
    the millions of objects Prefect, Great Expectations and pandas create
    at import, about 1.2 s of a 12 s backfill for nothing (bench/README
    "Issue 21"). A normal ``sys.exit`` when a non-daemon thread still runs
    (its work must not be cut off) or the interpreter has no
    ``threading._shutdown``."""
    shutdown = getattr(threading, "_shutdown", None)
    alive = [t for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive() and not t.daemon]
    if shutdown is None or alive:
        sys.exit(code)
    status = code if isinstance(code, int) else 0 if code is None else 1
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
    shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)


if __name__ == "__main__":
    sys.exit(main())
