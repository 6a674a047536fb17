"""Each command's extras (fairmon/extras.py): a command whose extra is not
installed ends with one ``error:`` line naming the extra and its ``pip
install``, exit code 2 (docs "Exit codes"), before it starts any work.

Why here and not in each command: the command modules import their heavy
modules lazily, inside the command, so ``fairmon --help`` and every
``fairmon CMD --help`` work in the core install (``pip install fairmon``);
the check wraps the commands' callbacks, so it runs only when a command
runs. An import that fails anyway (a need that depends on the options,
e.g. ``fairmon plan`` from published counts) gets the same line from
:func:`missing_module_exit`.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence

import typer
from rich.markup import escape

from fairmon.extras import extra_of, missing, missing_message
from fairmon.pipelines.faces.cli_common import EXIT_USAGE, err

#: Command (as typed after ``fairmon``) -> the extras it needs, beyond the core install.
#: The commands not listed (init, tables, plan from rates, sample-size, envy-plan, simulate*,
#: train-snapshot) run in the core install.
COMMAND_EXTRAS: dict[str, tuple[str, ...]] = {
    "run": ("pipeline",),
    "ingest": ("pipeline",),
    "backfill": ("pipeline",),
    "serve": ("pipeline",),
    "schedule show": ("pipeline",),
    "sql": ("pipeline",),
    "report": ("pipeline", "report"),
    "audit-export": ("pipeline", "audit"),
    "demo": ("pipeline", "report", "audit"),
}


def command_name(info) -> str:
    """A registered command's name as Typer derives it (its callback's name, ``_`` as ``-``)."""
    return info.name or (info.callback.__name__.replace("_", "-") if info.callback else "")


def _say_missing(command: str, extras: Sequence[str], modules: Sequence[str]) -> None:
    err.print(f"[red]error:[/red] {escape(missing_message(repr(command), extras, modules))}", soft_wrap=True)


def guarded(callback: Callable, command: str, extras: Sequence[str]) -> Callable:
    """``callback`` preceded by the check of ``extras`` (exit 2 with the ``error:`` line when one
    is missing); Typer reads the same options from it (``functools.wraps``)."""

    @functools.wraps(callback)
    def run(*args, **kwargs):
        absent = missing(extras)
        if absent:
            _say_missing(command, list(absent), [m for mods in absent.values() for m in mods])
            raise typer.Exit(EXIT_USAGE)
        return callback(*args, **kwargs)

    return run


def guard_commands(app: typer.Typer) -> None:
    """Wrap every command of ``app`` (and of its sub-apps, ``schedule show``) listed in
    :data:`COMMAND_EXTRAS` with :func:`guarded`; idempotent."""
    groups = [("", app)] + [(f"{g.name} ", g.typer_instance) for g in app.registered_groups if g.typer_instance]
    for prefix, typer_app in groups:
        for info in typer_app.registered_commands:
            command = prefix + command_name(info)
            extras = COMMAND_EXTRAS.get(command)
            if extras and info.callback is not None and not getattr(info.callback, "fairmon_extras", None):
                info.callback = guarded(info.callback, f"fairmon {command}", extras)
                info.callback.fairmon_extras = extras


def command_words(argv: Sequence[str], app: typer.Typer) -> str:
    """The command named on a command line (``run``, ``schedule show``): the words before the first option."""
    groups = {g.name for g in app.registered_groups}
    words: list[str] = []
    for token in argv:
        if token.startswith("-"):
            break
        words.append(token)
        if token not in groups:
            break
    return " ".join(words)


def missing_module_exit(error: ModuleNotFoundError, app: typer.Typer, argv: Sequence[str] | None = None) -> int:
    """For an import of an extra's module that failed during a command: print the ``error:`` line
    naming the extra and return exit code 2. Re-raises ``error`` when the module is not an extra's
    (a broken installation is not the user's mistake: its traceback is the useful answer)."""
    extra = extra_of(error)
    if extra is None:
        raise error
    words = command_words(sys.argv[1:] if argv is None else argv, app)
    _say_missing(f"fairmon {words}".strip(), [extra], [(error.name or "").split(".")[0]])
    return EXIT_USAGE
