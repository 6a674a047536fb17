"""Importing Great Expectations without the optional packages fairmon never hands it.

GX imports, when they are installed, the integrations of every engine it can
validate on: SQLAlchemy (installed here for Prefect's server, which runs in a
process of its own) and PySpark (``fairmon[spark]``). fairmon gives GX only
pandas frames (:class:`fairmon.pipelines.checks.gate.QualityGate`'s pandas data
source), so those integrations are dead weight: 0.2–0.3 CPU-s of the ~2.1 s
that importing GX cost a run (bench/README.md "startup.py"). GX treats a
package it cannot import as not installed (its ``compatibility`` modules),
which is a configuration GX supports; the packages stay importable for
everything else in this process once GX is in.
"""

from __future__ import annotations

import sys
import threading

#: Optional integrations GX would import that no fairmon check uses.
UNUSED_BY_CHECKS = ("sqlalchemy", "pyspark")

_LOCK = threading.Lock()


def import_gx(spark: bool = False):
    """Import ``great_expectations`` (once per process) with the packages of
    :data:`UNUSED_BY_CHECKS` hidden from it while it loads, unless this
    process has imported them already; PySpark is never hidden when
    ``spark`` (a config with ``engine = "spark"``, whose count stage may be
    importing PySpark in another thread meanwhile). Returns the module."""
    with _LOCK:
        if "great_expectations" in sys.modules:
            import great_expectations

            return great_expectations
        hidden = [m for m in UNUSED_BY_CHECKS if m not in sys.modules and not (spark and m == "pyspark")]
        for name in hidden:
            sys.modules[name] = None  # type: ignore[assignment]  # "import name" raises ImportError
        try:
            import great_expectations
        finally:
            for name in hidden:
                if sys.modules.get(name, 0) is None:
                    del sys.modules[name]
        return great_expectations
