"""The state of one fairmon run, in one object.

A *run* is what one command does: ``fairmon run`` (one day), a backfill (many
days, possibly in threads), the scheduled job, or a direct call of a flow.
What the layers below the executor need of it lives in its :class:`Run`:
the config (loaded once, so an edit mid-backfill cannot change later days),
whether Data Docs wait for the end, and the per-day stage timings. What a
batch computes (its ingest, its counts, its files' summaries, what it knows
of the warehouse) is state the executor passes explicitly, not kept here.

The executor (:func:`fairmon.pipelines.executor.days.run_days`) opens a run
with :func:`ensure_run`; code below it reaches the run with :func:`active_run`
(a :class:`contextvars.ContextVar`, copied into worker
threads by :func:`in_run`). A flow called directly opens a run of its own
(:func:`ensure_run`); a task's function called outside any run (``.fn`` in a
test) keeps no caches and no timings.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from fairmon.pipelines.core.config import FairmonConfig

STAGES = ("ingest", "checks", "counts", "estimators", "writes")


@dataclass
class Run:
    """One run's state. ``cfg`` is the config it was started with.

    - ``docs_deferred``: Data Docs are built once when the run ends (a
      backfill), not after every day.
    - ``books``: wall seconds per stage, per day ({day: {stage: s}}).
    - ``table_fingerprints``: with ``[impressions] table`` (Spark engine),
      each day's partition (bytes, mtime_ns), or None when it has none,
      listed once per run.

    What the run knows of its DuckDB file's views is not here:
    the executor owns it (:class:`fairmon.pipelines.executor.publishing.WarehouseViews`)
    and passes it to each publish; so are a backfill's Prefect artifacts
    (:mod:`fairmon.pipelines.orchestration.runner`).

    ``lock`` guards these fields across the threads of a ``--concurrency`` backfill.
    """

    cfg: FairmonConfig
    config_path: str = ""
    docs_deferred: bool = False
    books: dict[str, dict[str, float]] = field(default_factory=dict)
    # per catalog table (engine = "spark"): each day's partition fingerprint (None: no partition), listed once a run
    table_fingerprints: dict[str, dict[dt.date, tuple[int, int] | None]] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    @property
    def duckdb_path(self) -> Path:
        """The run's DuckDB file."""
        return self.cfg.duckdb_path


_CURRENT: contextvars.ContextVar[Run | None] = contextvars.ContextVar("fairmon_run", default=None)


@contextmanager
def run_scope(run: Run) -> Iterator[Run]:
    """Make ``run`` the current run for the block (and for threads started
    with :func:`in_run`). Nested scopes restore the outer run on exit."""
    token = _CURRENT.set(run)
    try:
        yield run
    finally:
        _CURRENT.reset(token)


def active_run() -> Run | None:
    """The run in scope, or None outside any run."""
    return _CURRENT.get()


@contextmanager
def ensure_run(cfg: FairmonConfig, config_path: str = "") -> Iterator[Run]:
    """The run in scope when there is one (a flow called by the runner), else
    a new run of ``cfg`` for the block (a flow called directly). Raises
    ValueError when the run in scope has another config: a run never mixes
    configs."""
    run = _CURRENT.get()
    if run is not None:
        if cfg is not run.cfg and cfg != run.cfg:
            raise ValueError("a run cannot use two configs; start a new run for the other config")
        yield run
        return
    with run_scope(Run(cfg, config_path)) as new:
        yield new


def in_run(fn):
    """Wrap ``fn`` to run in a copy of the calling context (the current run),
    for a thread pool: ``pool.map(in_run(f), items)``."""
    ctx = contextvars.copy_context()

    def call(*args, **kwargs):
        return ctx.copy().run(fn, *args, **kwargs)

    return call
