"""Which modules of :mod:`fairmon.transforms` declare output tables, found
without importing the rest.

A new audit table is one module: its declaration sits on the pure function
that computes it (DESIGN §1). For that to hold, the registry must find a new
family module by itself; listing it in ``registry.FAMILY_MODULES`` only fixes
where its tables stand in the order (stages compute their tables in that
order, and a day's ``dq_results`` rows follow it). The search reads each
module's source for a ``declares(``/``declare(`` call rather than importing
every module, so simulators and data-set readers are not imported for it.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re

#: A call of the registry's declaring functions at the start of a line (a decorator or a module-level call).
DECLARING = re.compile(r"^@?declares?\(", re.MULTILINE)


def declaring_modules(package: str = "fairmon.transforms") -> list[str]:
    """Dotted names of the modules under ``package`` whose source declares a
    table, sorted by name. A module whose source cannot be read (e.g. a
    compiled-only install) is skipped; the registry then relies on
    ``FAMILY_MODULES`` for it. Raises ModuleNotFoundError for an unknown
    ``package``."""
    paths = getattr(importlib.import_module(package), "__path__", None)  # the package's own, as imports see it
    if paths is None:
        raise ModuleNotFoundError(f"{package} is not a package")
    found = []
    for info in pkgutil.walk_packages(list(paths), prefix=f"{package}."):
        if info.ispkg:
            continue
        spec = importlib.util.find_spec(info.name)
        origin = spec.origin if spec is not None else None
        if origin is None or not origin.endswith(".py"):
            continue
        with open(origin, encoding="utf-8") as f:
            if DECLARING.search(f.read()):
                found.append(info.name)
    return sorted(found)
