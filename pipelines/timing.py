"""Wall seconds per stage of one day's run, for the ``runs`` table and bench/.

Stages (the split bench/daily.py reports): ``ingest`` (reading files,
profiling them in DuckDB, staging), ``checks`` (Great Expectations suites and
Data Docs), ``counts`` (sql/group_counts.sql), ``estimators`` (transforms),
``writes`` (partitions and the DuckDB mirror). Whatever a run's wall time
has beyond their sum is orchestration (Prefect) overhead.

Clocks are keyed by (DuckDB file, day), so the days of a concurrent backfill
keep separate books. Clocks nest: time spent in an inner block (e.g. a check
inside ingest, :func:`within`) counts for the inner stage only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

STAGES = ("ingest", "checks", "counts", "estimators", "writes")

_lock = threading.Lock()
_books: dict[tuple[str, str], dict[str, float]] = {}
_local = threading.local()  # .stack: open clocks of this thread, [key, stage, child seconds]


def _key(db_path, ds) -> tuple[str, str]:
    return str(db_path), str(ds)


def start(db_path, ds) -> None:
    """Open a fresh book for the run of day ``ds`` on ``db_path``."""
    with _lock:
        _books[_key(db_path, ds)] = dict.fromkeys(STAGES, 0.0)


@contextmanager
def clock(db_path, ds, stage: str) -> Iterator[None]:
    """Add the wall seconds of the block to ``stage`` of the day's book (if
    open), less the time of clocks nested inside it.

    Raises ValueError for a stage not in :data:`STAGES`.
    """
    with _timed(_key(db_path, ds), stage):
        yield


@contextmanager
def within(stage: str) -> Iterator[None]:
    """Like :func:`clock`, in the book of the clock this thread is inside
    (for code below the flow that does not know the day); without one, a no-op."""
    stack = getattr(_local, "stack", None)
    with _timed(stack[-1][0] if stack else None, stage):
        yield


@contextmanager
def _timed(key: tuple[str, str] | None, stage: str) -> Iterator[None]:
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; one of {STAGES}")
    if key is None:
        yield
        return
    stack = _local.__dict__.setdefault("stack", [])
    frame = [key, stage, 0.0]
    stack.append(frame)
    t0 = time.perf_counter()
    try:
        yield
    finally:
        elapsed = time.perf_counter() - t0
        stack.pop()
        if stack:
            stack[-1][2] += elapsed
        with _lock:
            book = _books.get(key)
            if book is not None:
                book[stage] += elapsed - frame[2]


def book(db_path, ds) -> dict[str, float]:
    """The day's book so far, {stage: seconds} rounded to ms (the book stays open)."""
    with _lock:
        return {k: round(v, 3) for k, v in _books.get(_key(db_path, ds), dict.fromkeys(STAGES, 0.0)).items()}


def take(db_path, ds) -> dict[str, float]:
    """Close the day's book and return {stage: seconds} (rounded to ms)."""
    with _lock:
        book = _books.pop(_key(db_path, ds), dict.fromkeys(STAGES, 0.0))
    return {k: round(v, 3) for k, v in book.items()}
