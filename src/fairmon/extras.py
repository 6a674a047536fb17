"""Which optional part of fairmon (an *extra* of ``pip install 'fairmon[...]'``)
a command or function needs, and a one-line answer when it is not installed.

``pip install fairmon`` is the estimators, the Python API (:mod:`fairmon.api`)
and the ``fairmon`` command line; the extras add what a group of commands
needs (pyproject.toml, docs "Getting started"):

- ``pipeline``: Prefect, Great Expectations, pandas, PyArrow -- ``fairmon run``,
  ``ingest``, ``backfill``, ``serve``, ``sql``, :func:`fairmon.run_day`,
  :func:`fairmon.read_table`;
- ``report``: Jinja and Matplotlib -- ``fairmon report`` (with ``pipeline``), :func:`fairmon.plot_reo`;
- ``audit``: OpenDP -- ``fairmon audit-export`` (with ``pipeline``);
- ``spark``: PySpark and sqlglot -- ``engine = "spark"``.

Why a check before the work: a command that found its extra missing half-way
would have started Prefect or written files for nothing, and would end in a
traceback naming a module the user never asked for. :func:`missing` looks the
modules up without importing them (:func:`importlib.util.find_spec`), so the
check costs milliseconds.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib.util import find_spec

#: Extra -> the top-level modules it installs that fairmon imports (pyproject.toml's extras).
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "pipeline": ("prefect", "great_expectations", "pandas", "pyarrow"),
    "report": ("jinja2", "matplotlib"),
    "audit": ("opendp",),
    "spark": ("pyspark", "sqlglot"),
}

#: Module -> the extra that installs it (for an import that failed anyway).
MODULE_EXTRA: dict[str, str] = {m: extra for extra, mods in EXTRA_MODULES.items() for m in mods}


class MissingExtraError(ImportError):
    """A fairmon command or function needs an extra that is not installed.
    ``str(error)`` is the whole message, with the ``pip install`` line."""

    def __init__(self, what: str, extras: Iterable[str], modules: Iterable[str] = ()):
        self.what, self.extras, self.modules = what, tuple(extras), tuple(modules)
        super().__init__(missing_message(what, self.extras, self.modules))


def _installed(module: str) -> bool:
    try:
        return find_spec(module) is not None
    except (ImportError, ValueError):  # a broken or half-removed installation counts as missing
        return False


def missing(extras: Iterable[str]) -> dict[str, list[str]]:
    """{extra: its modules that are not installed} for those of ``extras`` that are incomplete
    (empty when all are installed). Raises KeyError for an unknown extra."""
    out = {}
    for extra in extras:
        absent = [m for m in EXTRA_MODULES[extra] if not _installed(m)]
        if absent:
            out[extra] = absent
    return out


def missing_message(what: str, extras: Iterable[str], modules: Iterable[str] = ()) -> str:
    """``<what> needs the pipeline extra: pip install 'fairmon[pipeline]'`` (several extras
    joined, as one ``pip install``), naming the ``modules`` not found."""
    extras = tuple(extras)
    names = extras[0] if len(extras) == 1 else f"{', '.join(extras[:-1])} and {extras[-1]}"
    line = f"{what} needs the {names} extra{'s' if len(extras) > 1 else ''}: pip install 'fairmon[{','.join(extras)}]'"
    modules = tuple(modules)
    return line + (f" (not installed: {', '.join(modules)})" if modules else "")


def require(what: str, *extras: str) -> None:
    """Raise :class:`MissingExtraError` naming ``what`` (e.g. ``"fairmon.read_table"``) when
    any of ``extras`` is not installed; return None when all are."""
    absent = missing(extras)
    if absent:
        raise MissingExtraError(what, absent, [m for mods in absent.values() for m in mods])


def extra_of(error: ModuleNotFoundError) -> str | None:
    """The extra that installs the module an import failed to find (None: not one of an extra's)."""
    return MODULE_EXTRA.get((error.name or "").split(".")[0])
