"""The commands that compute and publish days and serve the schedule:
``run``, ``ingest``, ``backfill``, ``serve``, ``schedule show`` and ``report``
(they register on :data:`fairmon.pipelines.faces.cli_common.app` in this
order, the order ``fairmon --help`` lists them)."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from fairmon.pipelines.faces.cli_common import (
    EXIT_FAILED,
    EXIT_LOCKED,
    EXIT_PUBLISHED,
    EXIT_QUARANTINED,
    EXIT_USAGE,
    ConfigOpt,
    JsonOpt,
    PrefectOpt,
    app,
    console,
    dump_json,
    err,
    exit_code,
    fail,
    launch_api,
    load_or_exit,
    os_error_text,
    out_or_exit,
    parse_date,
    prefect_env,
    preflight_inputs_or_exit,
    preflight_or_exit,
    run_with_progress,
    seconds_option,
    show_stage_logs,
    use_prefect,
)
from fairmon.pipelines.faces.daylines import print_day
from fairmon.pipelines.faces.fitting import Fit, Footnotes
from fairmon.pipelines.faces.views import (
    ab_view,
    day_warnings,
    prevalence_table,
    print_alerts,
    reo_table,
    run_summary,
    sdt_view,
)


@app.command()
def run(
    date: Annotated[str, typer.Option("--date", "-d", help="The log day to compute, YYYY-MM-DD (UTC).")],
    config: ConfigOpt = Path("fairmon.toml"),
    force_ingest: Annotated[
        bool, typer.Option("--force-ingest", help="Re-stage input files even when unchanged.", metavar="")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show the per-stage logs.", metavar="")] = False,
    wait: Annotated[
        float, typer.Option(help="Seconds to wait for another run on the same DuckDB file.", callback=seconds_option)
    ] = 0.0,
    as_json: JsonOpt = False,
    prefect: PrefectOpt = None,
) -> None:
    """Compute one day: ingest its impressions, count groups, estimate REO with
    CIs and publish the day's partitions (replacing any earlier run of it).
    Then the project's alerts are brought up to date and the new ones
    printed and sent to [alerts] notify (docs "Alerts").
    Exit code 0 published, 1 quarantined, 4 failed, 5 lock busy."""
    prefect_env(verbose)
    ds = parse_date(date, "--date")
    cfg = load_or_exit(config)
    _range_or_exit(cfg, ds, ds)
    # before Prefect or GX is imported: a missing file answers in a second
    first = f"fairmon run {ds} ({config}): checking inputs, then counts and estimators"
    preflight_or_exit(cfg, [ds], as_json, str(config.resolve()), announce=first)
    prefect = use_prefect(prefect)
    launch_api(prefect)
    if verbose and not prefect:
        show_stage_logs()
    raised: list[dict] = []
    options = dict(force_ingest=force_ingest, wait_seconds=wait, prefect=prefect, raised=raised)
    r = run_with_progress(cfg, config, [ds], show_progress=False, **options)[0]
    if as_json:
        dump_json({"days": [r], "alerts": raised, "exit_code": exit_code([r])})
        raise typer.Exit(exit_code([r]))
    if r["status"] != "published":
        err.print(f"[red]{r['status']}:[/red] {escape(r['error'])}")
        print_alerts(console, cfg, raised)  # where a published day's alerts go: a script reads them in one place
        raise typer.Exit(exit_code([r]))
    print_day(console, r, Footnotes())  # the day's REO per arm × attribute first, beside its status
    if r["reo"]:
        console.print(Fit(reo_table(r["reo"], f"REO for {ds}")))
    if r["reo_ab"]:
        console.print(Fit(ab_view(r["reo_ab"], f"A/B: D_REO = REO(treatment) − REO(control), {ds}")))
    if r["threshold_prevalence"]:
        console.print(Fit(prevalence_table(r["threshold_prevalence"], f"Prevalence at the threshold, {ds}")))
    if r["sdt"]:
        console.print(Fit(sdt_view(r["sdt"], f"Labelers (signal detection), {ds}")))
    console.print(escape(f"partitions written: {', '.join(r['paths'].values())}"))
    print_alerts(console, cfg, raised)
    for w in day_warnings(r):  # published, but a warning-level check failed: said as backfill says it
        err.print(f"[yellow]warning:[/yellow] {escape(w)} (its details are in dq_results)")


@app.command()
def ingest(
    date: Annotated[str, typer.Option("--date", "-d", help="The log day whose inputs to stage, YYYY-MM-DD.")],
    config: ConfigOpt = Path("fairmon.toml"),
    force: Annotated[
        bool, typer.Option("--force-ingest", "--force", help="Re-stage input files even when unchanged.", metavar="")
    ] = False,
    prefect: PrefectOpt = None,
) -> None:
    """Validate and stage a day's input files (and its random-traffic window)
    without computing anything; re-ingesting replaces the files' rows. In
    process unless --prefect (or a configured Prefect API) asks for a flow run.
    Exit code 0 staged, 1 a file not staged (or refused by the pre-flight
    check), 5 lock busy."""
    prefect_env()
    ds = parse_date(date, "--date")
    cfg = load_or_exit(config)
    _range_or_exit(cfg, ds, ds)
    preflight_or_exit(cfg, [ds], record=False)  # before Prefect or GX is imported: it publishes nothing to record
    prefect = use_prefect(prefect)
    launch_api(prefect)
    from fairmon.pipelines.core.config import ConfigError, check_writable
    from fairmon.pipelines.storage.locking import RunLockedError, project_lock

    try:
        check_writable(cfg)
        with project_lock(cfg.duckdb_path, cfg.warehouse_path):
            results = _ingest(cfg, ds, force, str(config.resolve()), prefect)
    except ConfigError as e:
        fail(str(e), EXIT_USAGE)
    except OSError as e:
        fail(os_error_text(e), EXIT_FAILED)
    except RunLockedError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(EXIT_LOCKED) from None
    for r in results:
        done = "checked" if r.table == "snapshot" else "staged"  # a model snapshot is read where it lies
        status = f"[green]{done}[/green]" if r.success else f"[red]not {done}[/red]: {escape(r.summary())}"
        console.print(f"{escape(r.subject)}: {status}")
    if not all(r.success for r in results):
        raise typer.Exit(EXIT_QUARANTINED)


def _ingest(cfg, ds: dt.date, force: bool, config_path: str, prefect: bool) -> list:
    """Day ``ds``'s inputs staged as the Prefect flow run ``fairmon-ingest`` (``prefect``), else in process
    (:func:`fairmon.pipelines.executor.days.ingest_day`: no Prefect import, no server)."""
    if not prefect:
        from fairmon.pipelines.executor.days import ingest_day

        return ingest_day(cfg, ds, force, config_path)
    from prefect import tags

    from fairmon.pipelines.orchestration.flows import ingest as ingest_flow
    from fairmon.pipelines.orchestration.flows import run_tags

    with tags(*run_tags(cfg, "ingest")):
        return ingest_flow(cfg, ds, force, config_path)


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
            "--only-stale",
            help="Only days whose inputs (late data) or output-shaping config sections changed after they "
            "were computed.",
            metavar="",
        ),
    ] = False,
    concurrency: Annotated[int, typer.Option(min=1, help="Days run at the same time.")] = 1,
    wait: Annotated[
        float, typer.Option(help="Seconds to wait for another run on the same DuckDB file.", callback=seconds_option)
    ] = 0.0,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show the per-stage logs.", metavar="")] = False,
    as_json: JsonOpt = False,
    prefect: PrefectOpt = None,
) -> None:
    """Run every day from START to END (inclusive) with a progress bar and a
    closing summary per day (published / quarantined with reason / failed with
    error). Days are independent: a failing day never stops the others.
    Re-running is idempotent: each day's partitions are replaced, never appended.
    Then the alerts this raised are printed and sent (docs "Alerts").
    Exit code 0 all published, 1 a day quarantined, 4 a day failed, 5 lock busy."""
    out = err if as_json else console
    prefect_env(verbose)
    a, b = parse_date(start, "--start"), parse_date(end, "--end")
    if b < a:
        raise typer.BadParameter("--end is before --start", param_hint="--end")
    cfg = load_or_exit(config)
    _range_or_exit(cfg, a, b)
    if only_failed or only_stale:
        days = _chosen_days(cfg, a, b, only_failed, only_stale, wait, out)
    else:
        from fairmon.pipelines.ingest.windows import days_between

        days = days_between(a, b)
    if not days:
        out.print("nothing to run: every selected day is up to date")
        if as_json:
            dump_json({"days": [], "exit_code": EXIT_PUBLISHED})
        return
    first = f"fairmon backfill {a}..{b} ({config}): {len(days)} day(s), checking inputs, then counts and estimators"
    preflight_or_exit(cfg, days, as_json, str(config.resolve()), announce=first)  # before Prefect's server or GX start
    prefect = use_prefect(prefect)
    launch_api(prefect)
    if verbose and not prefect:
        show_stage_logs()
    raised: list[dict] = []
    notes = Footnotes()  # a reason many days share is said once, under the first day that has it
    options = dict(force_ingest=force_ingest, concurrency=concurrency, wait_seconds=wait, prefect=prefect)
    results = run_with_progress(
        cfg, config, days, out=out, raised=raised, each_day=lambda o, r: print_day(o, r, notes), **options
    )
    out.print(run_summary(results))
    print_alerts(out, cfg, raised)
    if as_json:
        dump_json({"days": results, "alerts": raised, "exit_code": exit_code(results)})
    raise typer.Exit(exit_code(results))


#: The longest range one ``backfill`` runs (a century of days): a longer one is a typo, not a plan.
MAX_RANGE_DAYS = 36_525


def _range_or_exit(cfg, a: dt.date, b: dt.date) -> None:
    """Refuse (exit 2) a range longer than :data:`MAX_RANGE_DAYS`, one whose
    first day's windows (random traffic, scores, labels) reach before year 1,
    one ending on a day that has not begun (:func:`~fairmon.pipelines.ingest.windows.not_begun`), or, for
    the Coat data set, any day but its configured one."""
    from fairmon.pipelines.ingest.windows import not_begun

    if (b - a).days + 1 > MAX_RANGE_DAYS:
        fail(
            f"--start {a} --end {b} is {(b - a).days + 1:,} days; a backfill runs at most {MAX_RANGE_DAYS:,}",
            EXIT_USAGE,
        )
    windows = [cfg.impressions.random_window_days] if cfg.impressions is not None else []
    longest = max([*windows, *(s.window_days for s in (cfg.scores, cfg.labels) if s is not None)], default=1)
    try:
        a - dt.timedelta(days=longest)
    except OverflowError:
        fail(f"{a} is too early: its {longest}-day windows begin before year 1", EXIT_USAGE)
    if (why := not_begun(b)) is not None:
        fail(why, EXIT_USAGE)
    imp = cfg.impressions
    if imp is not None and imp.format == "coat" and (a, b) != (imp.ds, imp.ds):  # a failed day and alert before
        asked = str(a) if a == b else f"{a}..{b}"
        fail(f"the Coat data set is the single day {imp.ds} ([impressions] ds), not {asked}", EXIT_USAGE)


def _chosen_days(cfg, a: dt.date, b: dt.date, only_failed: bool, only_stale: bool, wait: float, out) -> list[dt.date]:
    """The days of ``a``..``b`` that ``--only-failed``/``--only-stale`` select
    (:func:`fairmon.pipelines.orchestration.ops.days_to_run`), late data
    marked stale first; a held project lock ends the command (exit 5)."""
    from fairmon.pipelines.orchestration.ops import days_to_run, detect_stale
    from fairmon.pipelines.storage.locking import RunLockedError, project_lock

    try:  # choosing the days reads the DuckDB file: queue behind another run like the run itself
        with project_lock(cfg.duckdb_path, cfg.warehouse_path, wait):
            if only_stale:
                found = detect_stale(cfg)
                if found.height:
                    out.print(
                        f"late data or config change: {found.height} (day, cause) pair(s) marked stale", markup=False
                    )
            return days_to_run(cfg, a, b, only_failed=only_failed, only_stale=only_stale)
    except RunLockedError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(EXIT_LOCKED) from None


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
    serve it (blocks; Ctrl-C or SIGTERM stops it, exit 0). Each run computes
    the lagged day (UTC) and recomputes days that late data made stale. Without
    PREFECT_API_URL, fairmon starts Prefect's temporary server, which dies with
    this process (SIGKILL included) and runs outside its process group, so a
    SIGTERM to the group stops the runner through a live API. Before any of
    that, the pre-flight check reads the headers of each input's latest files:
    a missing column or an unreadable file ends it with error: lines, exit 1."""
    prefect_env(verbose=True)
    import signal
    import threading

    stop = threading.Event()  # a SIGTERM before the serving loop takes it over: remembered, then a clean stop
    serving: list[bool] = []  # non-empty once the serving loop is entered: it checks ``stop`` itself

    def starting_stopped(*_args) -> None:
        stop.set()
        if not serving:
            # imports, the config, the temporary API coming up: leave them at once. Not by raising
            # KeyboardInterrupt (library code mid-import, e.g. Prefect's settings, wraps it into its own
            # error and a traceback): nothing is written before serving, and the guarded server dies
            # with this process (prefect_guard), so the process ends here, exit 0 as documented.
            console.print("fairmon serve stopped")
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)

    signal.signal(signal.SIGTERM, starting_stopped)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C, or a SIGTERM while starting
        cfg = load_or_exit(config)
        preflight_inputs_or_exit(cfg)  # the latest files' headers, before Prefect or its server starts
        from fairmon.pipelines.orchestration.ops import build_deployment, deployment_name
        from fairmon.pipelines.orchestration.prefect_guard import TemporaryServerError
        from fairmon.pipelines.orchestration.runner import start_api

        sc = cfg.schedule  # a bad --cron or time zone answers before Prefect's server starts
        dep = deployment_or_exit(
            build_deployment,
            config,
            cron or sc.cron,
            timezone or sc.timezone,
            sc.lag_days if lag_days is None else lag_days,
            deployment_name(cfg),
            cfg.project_name,
            frozenset(k for k, v in (("cron", cron), ("timezone", timezone), ("lag_days", lag_days)) if v is not None),
        )
        try:
            start_api()  # the guarded temporary server (none when PREFECT_API_URL is set)
        except TemporaryServerError as e:
            err.print(f"[red]error:[/red] {escape(str(e))}", soft_wrap=True)
            raise typer.Exit(EXIT_FAILED) from None
        console.print(
            f"serving deployment {dep.name}: cron {dep.schedules[0].schedule.cron} "
            f"({dep.schedules[0].schedule.timezone}), parameters {dep.parameters}; stop with Ctrl-C or SIGTERM",
            highlight=False,
        )
        import asyncio

        from fairmon.pipelines.orchestration.ops import serve_until_stopped

        serving.append(True)
        asyncio.run(serve_until_stopped(dep, stop))
    console.print("fairmon serve stopped")


def deployment_or_exit(
    build,
    config: Path,
    cron: str,
    timezone: str,
    lag_days: int,
    name: str,
    project: str,
    given: frozenset = frozenset(),
):
    """``build(config, cron, timezone, lag_days, name, project)`` (the Prefect
    deployment); an invalid cron expression or time zone ends the command
    with an ``error:`` line (exit 2) naming the option it came from (``given``:
    ``cron``, ``timezone``, ``lag_days`` given on the command line) or else
    ``[schedule]``'s key."""
    from pydantic import ValidationError

    try:
        return build(config, cron, timezone, lag_days, name, project)
    except ValidationError as e:
        said = []
        for x in e.errors():
            key = ".".join(map(str, x["loc"]))
            where = f"--{key.replace('_', '-')}" if key in given else f"config {config}: schedule.{key}"
            said.append(f"{where}: {x['msg']}")
        fail("; ".join(said), EXIT_USAGE)


schedule_app = typer.Typer(help="Inspect the daily schedule.", no_args_is_help=True)
app.add_typer(schedule_app, name="schedule")


@schedule_app.command("show")
def schedule_show(
    config: ConfigOpt = Path("fairmon.toml"),
    n: Annotated[int, typer.Option("--count", "-n", min=1, help="How many upcoming runs to list.")] = 5,
) -> None:
    """Print the deployment `fairmon serve` would register and its next runs."""
    prefect_env()
    cfg = load_or_exit(config)
    from fairmon.pipelines.orchestration.ops import build_deployment, deployment_name, next_runs

    sc = cfg.schedule
    dep = deployment_or_exit(
        build_deployment, config, sc.cron, sc.timezone, sc.lag_days, deployment_name(cfg), cfg.project_name
    )
    sched = dep.schedules[0].schedule
    t = Table(title=f"deployment {dep.flow_name}/{dep.name}", title_justify="left", show_header=False)
    t.add_row("cron", sched.cron)
    t.add_row("timezone", sched.timezone)
    t.add_row("parameters", escape(str(dep.parameters)))
    t.add_row("tags", escape(", ".join(dep.tags)))
    for i, when in enumerate(next_runs(sched.cron, sched.timezone, n)):
        # the job computes the UTC day lag_days before its own UTC date (ops.scheduled), not the local one
        utc_day = when.astimezone(dt.UTC).date()
        day = utc_day - dt.timedelta(days=sc.lag_days)
        note = " (not over yet then: its logs are incomplete)" if day >= utc_day else ""
        t.add_row("next runs" if i == 0 else "", f"{when:%Y-%m-%d %H:%M %Z} → computes {day}{note}")
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
    from fairmon.pipelines.report.report import build_report

    a, b = parse_date(start, "--start"), parse_date(end, "--end")
    if b < a:
        raise typer.BadParameter("--end is before --start", param_hint="--end")
    cfg = load_or_exit(config)
    if out is not None:
        out_or_exit(out, folder=False)
    from fairmon.pipelines.storage.db import DatabaseBusyError

    try:
        published: list[dt.date] = []
        stale: list[dict] = []
        options = dict(config_name=str(config), on_published=published.extend, on_stale=stale.extend)
        path = build_report(cfg, a, b, out, **options)
    except DatabaseBusyError as e:  # a run holds the DuckDB file whose run history says which days are published
        fail(f"{e} (the report reads the run history there; `fairmon sql` reads the warehouse meanwhile)", EXIT_LOCKED)
    except OSError as e:  # writing --out (bad option, 2) or reading the warehouse (4)
        target = out.absolute().parent if out is not None else None
        writing = e.filename is not None and Path(e.filename).absolute().parent == target
        why = os_error_text(e)
        fail(f"--out {out}: {why}" if writing else why, EXIT_USAGE if writing else EXIT_FAILED)
    console.print(f"report: {path}", markup=False)
    n = (b - a).days + 1
    if len(published) < n:  # a report of days never run otherwise looked like any other (exit 0, its path)
        err.print(
            f"[yellow]warning:[/yellow] {len(published)} of the {n} day(s) {a}..{b} published; the report's "
            "'Excluded days' says why each other day is not (never run, quarantined or failed)"
        )
    if stale:  # published numbers the current inputs no longer give: said where the report is announced too
        days = ", ".join(str(s["ds"]) for s in stale[:5]) + (f" and {len(stale) - 5} more" if len(stale) > 5 else "")
        err.print(
            f"[yellow]warning:[/yellow] {len(stale)} published day(s) were computed from inputs that changed since "
            f"({escape(days)}); the report's 'Stale days' names them: `fairmon backfill --only-stale` recomputes them"
        )
