"""The ``fairmon`` command line (Typer): the entry point.

The commands are grouped by what they do, each group in a module of its own
that registers on one app (:mod:`fairmon.pipelines.faces.cli_common`):
computing and serving days (:mod:`~fairmon.pipelines.faces.cli_runs`),
sizing and releasing audits (:mod:`~fairmon.pipelines.faces.cli_plans`),
making and querying data (:mod:`~fairmon.pipelines.faces.cli_data`). This
module imports them, orders the commands as ``fairmon --help`` lists them,
sets their one-line summaries and ends the process (:func:`main`). Names used
from here before the split (``app``, ``main``, the exit codes, ``exit_code``)
stay importable from here.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import traceback
from typing import NoReturn

from fairmon.pipelines.faces import cli_data, cli_plans, cli_runs
from fairmon.pipelines.faces.cli_common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_LOCKED,
    EXIT_PUBLISHED,
    EXIT_QUARANTINED,
    EXIT_REFUSED,
    EXIT_USAGE,
    app,
    err,
    exit_code,
    reader_gone,
    silence_stream,
)
from fairmon.pipelines.faces.cli_extras import guard_commands, missing_module_exit

__all__ = [
    "EXIT_FAILED",
    "EXIT_LOCKED",
    "EXIT_PUBLISHED",
    "EXIT_QUARANTINED",
    "EXIT_REFUSED",
    "EXIT_USAGE",
    "SHORT_HELP",
    "app",
    "exit_code",
    "main",
]

#: The command modules (importing one registers its commands on ``app``).
COMMAND_MODULES = (cli_runs, cli_plans, cli_data)

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
    "train-snapshot": "Train a matrix factorisation on Coat and write a reachability project (seed 003).",
    "demo": "Run everything on bundled and simulated data.",
    "sql": "Query the published outputs with DuckDB SQL (read-only).",
    "alerts": "List the alerts raised (REO over its line, A/B changes, bad days, budgets).",
    "init": "Write a commented starter config for an input format.",
    "tables": "Print the data dictionary: every output table's columns, units and meaning.",
}


#: The order ``fairmon --help`` lists the commands in (the command modules register theirs on import, in
#: whatever order their imports run); a command missing here is listed after these.
COMMAND_ORDER = (
    "run",
    "ingest",
    "backfill",
    "serve",
    "report",
    "plan",
    "audit-export",
    "sample-size",
    "envy-plan",
    "simulate",
    "simulate-labels",
    "simulate-envy",
    "train-snapshot",
    "demo",
    "alerts",
    "sql",
    "init",
    "tables",
)


def _command_name(info) -> str:
    """A registered command's name as Typer derives it (its callback's name, ``_`` as ``-``)."""
    return info.name or (info.callback.__name__.replace("_", "-") if info.callback else "")


def _arrange_commands() -> None:
    """List the commands in :data:`COMMAND_ORDER` and set each one's one-line
    summary from :data:`SHORT_HELP`."""
    rank = {name: i for i, name in enumerate(COMMAND_ORDER)}
    app.registered_commands.sort(key=lambda info: rank.get(_command_name(info), len(rank)))
    for info in app.registered_commands:
        name = _command_name(info)
        if info.short_help is None and name in SHORT_HELP:
            info.short_help = SHORT_HELP[name]


_arrange_commands()
guard_commands(app)  # a command whose extra is not installed says which (pip install 'fairmon[...]'), exit 2


def main() -> None:
    """Entry point of the ``fairmon`` script: the command, then :func:`_exit`."""
    try:
        app()
    except SystemExit as e:
        if e.code == EXIT_INTERRUPTED:  # Typer's answer to Ctrl-C: said, not a bare exit 130
            _say_interrupted()
        _exit(e.code)
    except ModuleNotFoundError as e:  # an extra's module a command needed after all: name the extra
        _exit(missing_module_exit(e, app))
    except KeyboardInterrupt:  # Ctrl-C outside Typer's own handling
        _say_interrupted()
        _exit(EXIT_INTERRUPTED)
    except BrokenPipeError:  # the reader of stdout went away (`fairmon export ... | head`): only printing was cut
        if not reader_gone(sys.stdout):
            traceback.print_exc()
            _exit(EXIT_FAILED)
        silence_stream(sys.stdout)
        _exit(0)
    except Exception:  # a crash no command handled: the exit code of a crash (4), not Python's 1 (quarantined)
        traceback.print_exc()
        _exit(EXIT_FAILED)
    _exit(0)


def _say_interrupted() -> None:
    """The line Ctrl-C ends a command with: days it cut short are left ``running`` or recorded failed
    ("interrupted"), never published, and ``--only-failed`` picks them up."""
    err.print(
        "[yellow]interrupted:[/yellow] the day(s) not finished are not published; "
        "`fairmon backfill --only-failed` runs them again"
    )


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
    at import, for nothing (cost in bench/README.md). A normal ``sys.exit`` when a non-daemon thread still runs
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
