"""Importing Great Expectations without the optional packages fairmon never hands it.

GX imports, when they are installed, the integrations of every engine it can
validate on: SQLAlchemy (installed here for Prefect's server, which runs in a
process of its own) and PySpark (``fairmon[spark]``). fairmon gives GX only
pandas frames (:class:`fairmon.pipelines.checks.gate.QualityGate`'s pandas data
source), so those integrations are dead weight in importing GX (bench/README.md
"startup.py"). GX treats a
package it cannot import as not installed (its ``compatibility`` modules),
which is a configuration GX supports; the packages stay importable for
everything else in this process once GX is in.

Two more modules GX imports at its top are needed only by expectations
fairmon does not use: ``scipy.stats`` (the KL-divergence and KS-test
expectations) and ``altair`` (the KL expectation's charts), a large part of
GX's import together. They are *deferred* while GX loads: GX binds a
stand-in module that imports the real one on its first attribute access, so
an expectation or any other caller that uses them gets them as usual, one
access later. fairmon's own daily estimators take their normal and χ²
functions from ``scipy.special`` (:mod:`fairmon.transforms.distributions`),
so a day at TikTok size imports neither. Two more are deferred the same way:
``jsonschema`` (only the JSON-schema expectation validates with it; ~40
modules) and ``mistune`` (Data Docs render Markdown with it, which fairmon's
suites and results never hold).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types

#: Optional integrations GX would import that no fairmon check uses. ``pyspark.sql.connect`` is hidden
#: even where PySpark itself is not (a Spark engine's run): fairmon's Spark engine is classic PySpark, and
#: that package's import ends the whole process with exit code 0 ("Skipping doctests", ``sys.exit``) when
#: Spark Connect's dependencies are missing and ``__main__`` has neither ``__spec__`` nor ``__file__``
#: (``python -c``, a script on stdin, an embedding interpreter).
UNUSED_BY_CHECKS = ("sqlalchemy", "pyspark", "pyspark.sql.connect")

#: Modules GX imports at its top that only unused expectations or renderers touch: deferred while GX loads.
DEFERRED = ("scipy.stats", "altair", "jsonschema", "mistune")

_LOCK = threading.Lock()


class _Deferred(types.ModuleType):
    """Stands in ``sys.modules`` for a module not imported yet. An attribute
    it does not hold imports the real module (which then takes its place in
    ``sys.modules`` and on its parent package) and is read from it."""

    def __getattr__(self, attr: str):
        name = self.__name__
        if sys.modules.get(name) is self:
            del sys.modules[name]
        return getattr(importlib.import_module(name), attr)


def _defer(name: str) -> bool:
    """Put a :class:`_Deferred` stand-in for ``name`` in ``sys.modules`` if it is
    neither imported nor absent; True when one was put."""
    if name in sys.modules:
        return False
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    stand_in = _Deferred(name)
    stand_in.__spec__ = spec  # the import system reads these without touching the real module
    stand_in.__loader__ = spec.loader  # no __path__: importing a submodule asks for it, which imports the module
    sys.modules[name] = stand_in
    return True


def import_gx(spark: bool = False):
    """Import ``great_expectations`` (once per process) with the packages of
    :data:`UNUSED_BY_CHECKS` hidden from it while it loads, unless this
    process has imported them already; PySpark is never hidden when
    ``spark`` (a config with ``engine = "spark"``, whose count stage may be
    importing PySpark in another thread meanwhile; that import does not
    reach Spark Connect, which stays hidden). Returns the module."""
    with _LOCK:
        if "great_expectations" in sys.modules:
            import great_expectations

            return great_expectations
        hidden = [m for m in UNUSED_BY_CHECKS if m not in sys.modules and not (spark and m == "pyspark")]
        for name in hidden:
            sys.modules[name] = None  # type: ignore[assignment]  # "import name" raises ImportError
        for name in DEFERRED:
            _defer(name)
        try:
            import great_expectations
        finally:
            for name in hidden:
                if sys.modules.get(name, 0) is None:
                    del sys.modules[name]
        return great_expectations
