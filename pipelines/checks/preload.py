"""The GX gate loaded ahead of a run, in a background thread, with the
garbage collector's freeze of what importing GX creates (see :func:`_preload`).
Apart from :mod:`fairmon.pipelines.checks.gate` because it is about the
process (its collector and exit), not about validating."""

from __future__ import annotations

import atexit
import gc
import sys
import threading

from fairmon.pipelines.checks.gate import gate_for
from fairmon.pipelines.core.config import FairmonConfig

#: The collector's freeze by :func:`_preload`: "" (none yet), "frozen", "thawed" (never again in this process).
_FREEZE = {"state": ""}
_FREEZE_LOCK = threading.Lock()


def _preload(cfg: FairmonConfig) -> None:
    """:func:`gate_for` with the garbage collector paused: importing GX
    creates ~300,000 objects, and each full collection it triggered walked
    all of them, holding the interpreter (4 collections, 0.44 s of a cold
    14-day backfill, bench/README.md). Collection resumes after.

    When this call imported GX (once per process), the objects alive then
    (modules, classes, GX's registries: what lives as long as the process)
    are moved to the collector's permanent generation (:func:`gc.freeze`)
    until the run ends (:func:`thaw`): re-enabled, the collector otherwise
    walked them three times over as they aged through its generations
    (bench/README.md "startup.py").
    Frozen objects are still freed when no longer referenced."""
    paused, first = gc.isenabled(), "great_expectations" not in sys.modules
    gc.disable()
    try:
        gate_for(cfg)
    finally:
        with _FREEZE_LOCK:
            if first and not _FREEZE["state"]:
                gc.freeze()
                _FREEZE["state"] = "frozen"
                atexit.register(_at_exit)  # a process that never ends its run still has its cycles collected at exit
        if paused:
            gc.enable()


def thaw() -> None:
    """Give the objects :func:`_preload` froze back to the collector
    (``gc.unfreeze()``), when the run that imported GX ends: a reference
    cycle through a frozen object (e.g. a failed day's traceback holding
    the run's DuckDB connection) would otherwise never be collected, not
    even at the interpreter's exit. No later preload in this process freezes."""
    with _FREEZE_LOCK:
        if _FREEZE["state"] == "frozen":
            gc.unfreeze()
        _FREEZE["state"] = "thawed"


def _at_exit() -> None:
    """At the interpreter's exit (``atexit``): :func:`thaw`, then leave the
    collector off. Python walks every object once before it tears its modules
    down (only when the collector is on) and again while it does (always,
    ``Py_FinalizeEx``); with GX loaded that is hundreds of thousands of objects
    a walk. The second walk finds every cycle the first would have, and runs
    their finalizers, so nothing is left uncollected (bench/README.md)."""
    thaw()
    gc.disable()


def preload_gate(cfg: FairmonConfig) -> threading.Thread:
    """Create the GX gate in a background thread (importing GX takes seconds)
    while the caller starts Prefect; :func:`gate_for` then finds it. Returns
    the started thread."""
    t = threading.Thread(target=_preload, args=(cfg,), name="fairmon-gx-preload", daemon=True)
    t.start()
    return t
