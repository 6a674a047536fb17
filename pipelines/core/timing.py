"""Wall seconds per stage of one day's run, for the ``runs`` table and bench/.

Stages (the split bench/daily.py reports): ``ingest`` (reading files,
profiling them in DuckDB, staging), ``checks`` (Great Expectations suites and
Data Docs), ``counts`` (sql/group_counts.sql), ``estimators`` (transforms),
``writes`` (partitions and the DuckDB mirror). Whatever a run's wall time
has beyond their sum is orchestration (Prefect) overhead.

Books live in the current run (:class:`fairmon.pipelines.core.run.Run`), one per
day, so the days of a concurrent backfill keep separate books; outside any
run nothing is recorded. Clocks nest: time spent in an inner block (e.g. a
check inside ingest, :func:`within`) counts for the inner stage only. The
stack of open clocks is per thread (a thread-local call stack, not run state).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

from fairmon.pipelines.core.run import STAGES, Run, active_run

__all__ = ["STAGES", "batch_book", "book", "clock", "share", "start", "take", "within"]

_local = threading.local()  # .stack: this thread's open clocks, [run, day, stage, child seconds]


def start(ds) -> None:
    """Open a fresh book for day ``ds`` (a date or a label such as a batch's, :func:`batch_book`) in the current run."""
    run = active_run()
    if run is not None:
        with run.lock:
            run.books[str(ds)] = dict.fromkeys(STAGES, 0.0)


def batch_book(days: list) -> str:
    """The book of a batch's shared work (its ingest, its count): the day's own for a day alone,
    ``<first>_<last>`` for several days (opened and taken by the executor)."""
    return str(days[0]) if len(days) == 1 else f"{min(days)}_{max(days)}"


@contextmanager
def clock(ds, stage: str) -> Iterator[None]:
    """Add the wall seconds of the block to ``stage`` of day ``ds``'s book
    (if open), less the time of clocks nested inside it.

    Raises ValueError for a stage not in :data:`STAGES`.
    """
    with _timed(active_run(), str(ds), stage):
        yield


@contextmanager
def within(stage: str) -> Iterator[None]:
    """Like :func:`clock`, in the book of the clock this thread is inside
    (for code below the flow that does not know the day); without one, a no-op."""
    stack = getattr(_local, "stack", None)
    outer = stack[-1] if stack else (None, None)
    with _timed(outer[0], outer[1], stage):
        yield


@contextmanager
def _timed(run: Run | None, day: str | None, stage: str) -> Iterator[None]:
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; one of {STAGES}")
    if run is None:
        yield
        return
    stack = _local.__dict__.setdefault("stack", [])
    frame = [run, day, stage, 0.0]
    stack.append(frame)
    t0 = time.perf_counter()
    try:
        yield
    finally:
        elapsed = time.perf_counter() - t0
        stack.pop()
        if stack:
            stack[-1][3] += elapsed
        with run.lock:
            book = run.books.get(day)
            if book is not None:
                book[stage] += elapsed - frame[3]


def book(ds) -> dict[str, float]:
    """Day ``ds``'s book so far, {stage: seconds} rounded to ms (the book stays open)."""
    run = active_run()
    with run.lock if run else nullcontext():
        b = run.books.get(str(ds)) if run else None
        return {k: round(v, 3) for k, v in (b or dict.fromkeys(STAGES, 0.0)).items()}


def take(ds) -> dict[str, float]:
    """Close day ``ds``'s book and return {stage: seconds} (rounded to ms)."""
    run = active_run()
    with run.lock if run else nullcontext():
        b = run.books.pop(str(ds), None) if run else None
    return {k: round(v, 3) for k, v in (b or dict.fromkeys(STAGES, 0.0)).items()}


def share(days: list, stage: str, seconds: float) -> None:
    """Add ``seconds`` spent on several days at once (one GX run for a batch's
    frames) to ``stage`` of each day's open book, in equal parts.

    Raises ValueError for a stage not in :data:`STAGES`.
    """
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; one of {STAGES}")
    run = active_run()
    if run is None or not days:
        return
    with run.lock:
        for ds in days:
            b = run.books.get(str(ds))
            if b is not None:
                b[stage] += seconds / len(days)
