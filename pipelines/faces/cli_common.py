"""What every ``fairmon`` command shares: the Typer app, the consoles, the
common options, the exit codes and the helpers that load a config, parse a
date or end a command with a given code.

Why a module of its own: the commands live in several modules
(:mod:`fairmon.pipelines.faces.cli_runs`, ``cli_plans``, ``cli_data``) that
register on one app, and :mod:`fairmon.pipelines.faces.cli` assembles them;
this is the floor they all stand on.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import re
import select
import sys
import warnings
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console, ConsoleDimensions
from rich.markup import escape

app = typer.Typer(
    help="fairmon: daily fairness metrics (REO with confidence intervals) from recommender logs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help text as written: [audit] is a config section, not markup
)
#: Columns of piped output (CI logs, files) when COLUMNS does not say.
PIPED_WIDTH = 130


class _Console(Console):
    """A console as wide as the terminal; piped, as wide as ``COLUMNS`` says
    at the moment it prints, else :data:`PIPED_WIDTH` (a CI log is not
    squeezed to 80 columns, and ``COLUMNS=80 fairmon ... | less`` shows
    what an 80-column terminal shows)."""

    @property
    def size(self) -> ConsoleDimensions:
        dims = super().size
        if self._width is None and not self.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
            return ConsoleDimensions(PIPED_WIDTH, dims.height)
        return dims

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self._width, self._height = new_size

    def on_broken_pipe(self) -> None:
        """The reader of this console's stream went away (``fairmon tables | head``): print nothing more and
        let the command finish its work and end with its own exit code. Rich's default ends the process
        with exit code 1, which is fairmon's "a day was quarantined", and would cut a run short."""
        self.quiet = True
        silence_stream(self.file)


def silence_stream(stream) -> None:
    """Point ``stream``'s file descriptor at ``/dev/null`` (its reader closed the pipe), so later writes and
    the final flush go nowhere instead of raising ``BrokenPipeError``; a stream without one is left as is."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def reader_gone(stream) -> bool:
    """Whether ``stream`` is a pipe whose reader closed it (``poll`` reports an error on its descriptor), so a
    ``BrokenPipeError`` came from the output and not from, say, a socket a command used; where ``poll`` is
    missing (Windows), assumed so."""
    poll = getattr(select, "poll", None)
    if poll is None:
        return True
    try:
        poller = poll()
        poller.register(stream.fileno(), select.POLLOUT)
    except (AttributeError, OSError, ValueError):
        return False
    return any(events & select.POLLERR for _, events in poller.poll(0))


# No highlighting: messages quote user values (a group name of a megabyte), and the highlighter's
# regular expressions over such a value cost minutes, not the milliseconds of printing it.
console = _Console(highlight=False)
err = _Console(stderr=True, highlight=False)

#: Characters of a message an ``error:`` line prints; the rest is counted, not shown.
MESSAGE_CHARS = 2_000


def clip(text: str, limit: int = MESSAGE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how many were left out."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit:,} more characters)"


def seconds_option(value: float) -> float:
    """A ``--wait`` value: finite and not negative (``nan`` or ``inf`` would wait forever, or never)."""
    if not math.isfinite(value) or value < 0:
        raise typer.BadParameter(f"{value!r}: give a finite number of seconds, 0 or more")
    return value


ConfigOpt = Annotated[
    Path,
    typer.Option("--config", "-c", envvar="FAIRMON_CONFIG", help="fairmon TOML config file (or $FAIRMON_CONFIG)."),
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print one JSON document on stdout (messages go to stderr).", metavar="")
]

#: Exit codes of every command (docs "Exit codes").
EXIT_PUBLISHED = 0  # every day published (or nothing to do)
EXIT_QUARANTINED = 1  # a day was quarantined by its data-quality gate
EXIT_USAGE = 2  # bad options or config
EXIT_REFUSED = 3  # refused: the release would overspend the privacy budget
EXIT_FAILED = 4  # a day failed (crash or unreadable input)
EXIT_LOCKED = 5  # another run holds the project's DuckDB file
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as a shell reports a process the signal ended


def exit_code(results: list[dict]) -> int:
    """The command's exit code for per-day run summaries: 4 when a day failed,
    else 1 when one was quarantined, else 0."""
    status = {r["status"] for r in results}
    if "failed" in status:
        return EXIT_FAILED
    return EXIT_QUARANTINED if "quarantined" in status else EXIT_PUBLISHED


def dump_json(doc: dict) -> None:
    """One JSON document on stdout (dates and paths as strings, decimals and
    NumPy scalars as numbers, NaN and ±inf as null, so the output is strict
    JSON that any parser reads)."""
    import json
    import math
    from decimal import Decimal

    def clean(x):
        if isinstance(x, Decimal):
            x = float(x)
        elif hasattr(x, "item") and hasattr(x, "dtype") and getattr(x, "ndim", 1) == 0:
            x = x.item()  # a NumPy scalar
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {str(k): clean(v) for k, v in x.items()}
        if isinstance(x, list | tuple):
            return [clean(v) for v in x]
        return x

    sys.stdout.write(json.dumps(clean(doc), default=str, allow_nan=False) + "\n")


def _print_version(value: bool) -> None:
    if value:
        from fairmon import __version__

        console.print(f"fairmon {__version__}", markup=False)
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


def run_with_progress(
    cfg, config: Path, days: list[dt.date], show_progress: bool = True, out: Console | None = None, **options
) -> list[dict]:
    """The runner over ``days`` with a progress bar on ``out`` (default stdout);
    a held run lock ends the command (exit 5), a warehouse or DuckDB path that
    is not what the config says or cannot be written exit 2, a disk that
    fails (full, unwritable) under them exit 4, each as one ``error:`` line."""
    from fairmon.pipelines.core.config import ConfigError
    from fairmon.pipelines.faces.views import run_days_with_progress
    from fairmon.pipelines.orchestration.prefect_guard import TemporaryServerError
    from fairmon.pipelines.storage.locking import RunLockedError
    from fairmon.pipelines.storage.ownership import WarehouseOwnedError

    try:
        return run_days_with_progress(
            out or console, cfg, days, config_path=str(config), show_progress=show_progress, **options
        )
    except RunLockedError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(EXIT_LOCKED) from None
    except WarehouseOwnedError as e:  # another project's warehouse: nothing ran
        err.print(f"[red]error:[/red] {escape(str(e))}", soft_wrap=True)
        raise typer.Exit(EXIT_USAGE) from None
    except TemporaryServerError as e:  # Prefect's temporary API did not come up: no day ran
        err.print(f"[red]error:[/red] {escape(str(e))}", soft_wrap=True)  # one line, however narrow the terminal
        raise typer.Exit(EXIT_FAILED) from None
    except ConfigError as e:
        fail(str(e), EXIT_USAGE)
    except OSError as e:  # e.g. ENOSPC under the DuckDB folder: nothing more can be recorded
        fail(os_error_text(e), EXIT_FAILED)
    except Exception as e:
        import duckdb

        if not isinstance(e, duckdb.IOException):  # DuckDB's own disk errors (full, unwritable) are not OSError
            raise
        fail(f"{cfg.duckdb_path}: {str(e).splitlines()[0]}", EXIT_FAILED)


def os_error_text(e: OSError) -> str:
    """An OS error as one line naming the path: ``/x/fairmon.duckdb: No space left on device``."""
    what = e.strerror or str(e)
    return f"{e.filename}: {what}" if e.filename else what


def fail(message: str, code: int) -> NoReturn:
    """End the command with one ``error:`` line and exit ``code``."""
    err.print(f"[red]error:[/red] {escape(clip(message))}", soft_wrap=True)
    raise typer.Exit(code)


def show_stage_logs() -> None:
    """``--verbose`` for days run in process (no Prefect run logger): the
    ``fairmon`` logger's per-stage lines (rows in/out, seconds) and warnings
    on stderr, in the shape of Prefect's log lines."""
    import logging

    _show_warnings(logging.INFO, "%(asctime)s.%(msecs)03d | %(levelname)-7s | fairmon - %(message)s")


def _show_warnings(level: int = 0, fmt: str = "warning: %(message)s") -> None:
    """fairmon's own warnings (``fairmon`` logger: a missing input file, a day
    without random traffic, a file not staged) on stderr, once; from ``level``
    (default WARNING) in format ``fmt`` when given."""
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
        handler.setFormatter(logging.Formatter(fmt, datefmt="%H:%M:%S"))
        handler.setLevel(level or logging.WARNING)
        handler.fairmon_cli = True
        log.addHandler(handler)
        log.propagate = False
        if level and log.getEffectiveLevel() > level:
            log.setLevel(level)


def prefect_env(verbose: bool = False) -> None:
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


PrefectOpt = Annotated[
    bool | None,
    typer.Option(
        "--prefect/--no-prefect",
        help="Run the days as Prefect flow runs (default when PREFECT_API_URL is configured; without one "
        "fairmon starts Prefect's temporary server) or in process with no Prefect API "
        "(default when none is configured). Outputs and exit codes are the same.",
        show_default=False,
    ),
]


def use_prefect(prefect: bool | None) -> bool:
    """Whether a command's days run through Prefect: as ``--prefect/--no-prefect``
    says, else through Prefect exactly when an API is configured
    (``PREFECT_API_URL``; :func:`fairmon.pipelines.orchestration.prefect_settings.api_configured`),
    so that no command starts a Prefect server it does not need."""
    if prefect is not None:
        return prefect
    from fairmon.pipelines.orchestration.prefect_settings import api_configured

    return api_configured()


def launch_api(prefect: bool = True) -> None:
    """Start Prefect's temporary local API now when the command will need one
    (``prefect``: its days run through Prefect and no API is configured;
    :func:`fairmon.pipelines.orchestration.prefect_guard.launch_temporary_server`): its
    seconds of start-up overlap the command's imports and work. Does nothing
    for days run in process."""
    if not prefect:
        return
    from fairmon.pipelines.orchestration.prefect_guard import launch_temporary_server

    launch_temporary_server()


#: Lines of pre-flight findings a command prints at most (the JSON document has them all).
PREFLIGHT_LINES = 20


def preflight_or_exit(
    cfg, days: list[dt.date], as_json: bool = False, config_path: str = "", record: bool = True, announce: str = ""
) -> None:
    """The pre-flight check of ``days`` (:func:`fairmon.pipelines.ingest.preflight.preflight`:
    file listings and headers; then, for days whose headers pass,
    :func:`fairmon.pipelines.ingest.preflight_values.value_findings`: the raw
    suite's critical value rules on the files not yet staged; no Prefect,
    no GX). When every day has a
    finding nothing would publish: its ``error:`` lines (each naming the
    file, the columns found and the config key to edit) and exit 1, the
    code of a quarantine, in seconds instead of after Prefect's and GX's
    start (with ``as_json``, the runs' JSON document, each day quarantined
    at stage ``preflight``); with ``record`` (the commands that publish:
    run, backfill) each refused day is recorded in ``runs`` as quarantined,
    so numbers it published before leave the published views (``ingest``
    publishes nothing and records nothing).
    When only some days have one, a ``warning:``
    line each and the run goes on: those days are quarantined by their
    gate as before, their outcome recorded, and the others publish.
    ``announce`` (a command's first line, plain text) is printed once the
    headers leave a day to check, before the value scan imports the readers
    and reads the files: a command says what it does within a fraction of a
    second, and a header's mistake is still the first line."""
    from fairmon.pipelines.ingest.preflight import describe, preflight, preflight_summary

    found = preflight(cfg, days)
    left = [d for d in days if d not in found]
    if announce and left:
        err.print(announce, markup=False)
    if left:
        from fairmon.pipelines.ingest.preflight_values import value_findings

        found |= value_findings(cfg, left)
    if not found:
        return
    lines = describe(found)
    if len(lines) > PREFLIGHT_LINES:  # e.g. a path template that matches no day of a year's backfill
        lines = [*lines[:PREFLIGHT_LINES], f"... and {len(lines) - PREFLIGHT_LINES} more of the same kind"]
    if len(found) < len(days):
        for line in lines:
            err.print(f"[yellow]warning:[/yellow] pre-flight: {escape(line)}", soft_wrap=True)
        return
    for line in lines:
        err.print(f"[red]error:[/red] {escape(line)}", soft_wrap=True)
    alerts = []
    if record:
        alerts = record_preflight(cfg, config_path, {ds: found[ds] for ds in days}, err if as_json else console)
    err.print(
        f"pre-flight: nothing ran ({len(days)} day(s) checked from file headers and values; exit {EXIT_QUARANTINED})",
        markup=False,
    )
    if as_json:
        summaries = [preflight_summary(ds, found[ds]) for ds in days]
        dump_json({"days": summaries, "alerts": alerts, "exit_code": EXIT_QUARANTINED})
    raise typer.Exit(EXIT_QUARANTINED)


def preflight_inputs_or_exit(cfg) -> None:
    """``serve``'s pre-flight check, before Prefect's server starts: each
    configured input at the latest day its files are named for
    (:func:`fairmon.pipelines.ingest.preflight.preflight_inputs`: what the
    next scheduled run reads). A finding gives the ``error:`` lines
    :func:`preflight_or_exit` prints and exit 1; an input with no file yet
    is a ``warning:`` (its data may not have arrived) and serving goes on.
    Records nothing in ``runs``: no day was run."""
    from fairmon.pipelines.ingest.preflight import describe, preflight_inputs

    found, empty = preflight_inputs(cfg)
    for line in empty:
        err.print(f"[yellow]warning:[/yellow] pre-flight: {escape(line)}", soft_wrap=True)
    if not found:
        return
    lines = describe(found)
    for line in lines[:PREFLIGHT_LINES]:
        err.print(f"[red]error:[/red] {escape(line)}", soft_wrap=True)
    days = ", ".join(str(d) for d in sorted(found))
    err.print(
        f"pre-flight: serve not started (latest input files of {days} checked from their headers; exit 1)", markup=False
    )
    raise typer.Exit(EXIT_QUARANTINED)


def record_preflight(cfg, config_path: str, refused: dict[dt.date, list], out: Console) -> list[dict]:
    """Record the days the pre-flight check refused (day -> its findings)
    (:func:`fairmon.pipelines.executor.publishing.record_refused`) and print
    the alerts that raised on ``out`` (stdout, where a run prints its alerts; stderr under ``--json``);
    a project held by another run ends the command
    with its ``error:`` line (exit 5); a DuckDB file that cannot be written is
    a warning, as the run itself would have failed on it. Returns the new
    alerts (dicts of ``alerts`` rows)."""
    from fairmon.pipelines.executor.alerting import update_alerts_logged
    from fairmon.pipelines.executor.publishing import record_refused
    from fairmon.pipelines.faces.views import alert_lines
    from fairmon.pipelines.storage.locking import RunLockedError

    try:
        update = record_refused(cfg, config_path, refused, then=update_alerts_logged)
        new = update.new if update is not None else []
        for line in alert_lines(new):
            out.print(line, soft_wrap=True)
        return new
    except RunLockedError as e:
        fail(str(e), EXIT_LOCKED)
    except Exception as e:  # e.g. a read-only DuckDB folder: the findings still answer
        err.print(
            f"[yellow]warning:[/yellow] the refused days were not recorded ({type(e).__name__}: {escape(str(e))})"
        )
        return []


def parse_date(value: str, name: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        shape = re.fullmatch(r"\d{4}-\d{2}-\d{2}", value) is not None
        why = "is no day of the calendar" if shape else "is not a date YYYY-MM-DD"
        raise typer.BadParameter(f"{value!r} {why}", param_hint=name) from None


def load_or_exit(config: Path):
    from fairmon.pipelines.core.config import ConfigError, load_config

    try:
        return load_config(config)
    except ConfigError as e:
        err.print(f"[red]error:[/red] {escape(clip(str(e)))}")
        raise typer.Exit(EXIT_USAGE) from None


def parse_floats(value: str, name: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in value.split(","))
    except ValueError:
        raise typer.BadParameter(f"{value!r}: expected comma-separated numbers", param_hint=name) from None


def new_project_or_exit(path: Path) -> Path:
    """:func:`out_or_exit` for a command that writes a new project into folder ``path`` (the simulations): also
    ends it (exit 2) when ``path`` already holds a project's ``fairmon.toml``, which it would overwrite with its
    day files while that project's warehouse, if it ran, keeps the days published from the old files."""
    out_or_exit(path)
    if (path / "fairmon.toml").exists():
        fail(
            f"--out {path} holds a project ({path / 'fairmon.toml'}); a simulation would overwrite its config and "
            "day files: remove the folder or choose another --out",
            EXIT_USAGE,
        )
    return path


def out_or_exit(path: Path, option: str = "--out", folder: bool = True) -> Path:
    """``path`` for an ``--out`` option, checked before anything is written:
    a folder (``folder``) or a file that is not the other kind, under the
    nearest existing folder that can be written. Ends the command with an
    ``error:`` line naming the option (exit 2) otherwise. Returns ``path``."""
    kind = "folder" if folder else "file"
    if path.exists() and path.is_dir() != folder:
        fail(f"{option} {path} is a {'file' if folder else 'folder'}; give a {kind} to write into", EXIT_USAGE)
    near = path.absolute() if folder else path.absolute().parent  # a file: its folder must take it (again)
    while not near.exists() and near != near.parent:
        near = near.parent
    if near != path.absolute() or not folder:
        if not near.is_dir():
            fail(f"{option} {path}: {near} is a file, not a folder", EXIT_USAGE)
        if not os.access(near, os.W_OK | os.X_OK):
            fail(f"{option} {path}: folder {near} is read-only", EXIT_USAGE)
    return path
