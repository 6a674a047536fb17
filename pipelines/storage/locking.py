"""One fairmon run per DuckDB file at a time (DuckDB allows one writer process).

A run holds an exclusive ``flock`` on ``<duckdb file>.lock`` for its whole
duration (not only while a connection is open, so two runs can never
interleave their writes). Inside one process the lock is re-entrant (a
backfill's days, possibly in threads, share it). A second process waits up to
``wait_seconds`` and then fails with a message naming the holder.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class RunLockedError(RuntimeError):
    """Another fairmon process is running against the same DuckDB file."""


# Process-wide by nature: flock belongs to the process, so re-entrancy is counted per process.
_state: dict[Path, list] = {}  # lock path -> [file object, depth]
_guard = threading.Lock()


def lock_path(duckdb_path: Path) -> Path:
    """The run-lock file of a DuckDB file: ``<file>.lock`` beside it."""
    return duckdb_path.with_name(duckdb_path.name + ".lock")


def _holder(path: Path) -> str:
    try:
        info = json.loads(path.read_text() or "{}")
        return f"pid {info.get('pid')}, started {info.get('started')}, command {info.get('command')!r}"
    except (OSError, ValueError):
        return "unknown holder"


@contextmanager
def file_lock(path: Path, wait_seconds: float, owns: str) -> Iterator[bool]:
    """Hold the exclusive lock file ``path`` (re-entrant within the process);
    ``owns`` names what it protects, for the message. Yields True when this
    call acquired it (no other holder in this process), False when nested.

    Raises :class:`RunLockedError` naming the holder (pid, start, command)
    when another process keeps it longer than ``wait_seconds``.
    """
    with _guard:
        entry = _state.get(path)
        fresh = entry is None
        if entry is not None:
            entry[1] += 1
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            fh = open(path, "a+")  # noqa: SIM115 -- held open for the run, closed in finally
            deadline = time.monotonic() + wait_seconds
            while True:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        fh.close()
                        raise RunLockedError(
                            f"another fairmon run holds {path} ({_holder(path)}); it owns {owns} until it "
                            f"ends. Wait for it, or pass --wait SECONDS to queue behind it."
                        ) from None
                    time.sleep(0.2)
            fh.seek(0)
            fh.truncate()
            fh.write(
                json.dumps(
                    {
                        "pid": os.getpid(),
                        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
                        "command": " ".join(os.sys.argv),
                    }
                )
            )
            fh.flush()
            _state[path] = [fh, 1]
    try:
        yield fresh
    finally:
        with _guard:
            entry = _state[path]
            entry[1] -= 1
            if entry[1] == 0:
                fcntl.flock(entry[0].fileno(), fcntl.LOCK_UN)
                entry[0].close()
                del _state[path]


@contextmanager
def run_lock(duckdb_path: Path, wait_seconds: float = 0.0) -> Iterator[bool]:
    """Hold the run lock of ``duckdb_path`` (``<file>.lock``; re-entrant
    within the process). Yields whether this call acquired it. Raises
    :class:`RunLockedError` when another process keeps it longer than
    ``wait_seconds``."""
    with file_lock(lock_path(duckdb_path.resolve()), wait_seconds, str(duckdb_path)) as fresh:
        yield fresh


def warehouse_lock_path(warehouse: Path) -> Path:
    """The lock file of a warehouse folder: ``<warehouse>/.fairmon.lock``."""
    return warehouse.resolve() / ".fairmon.lock"


@contextmanager
def project_lock(duckdb_path: Path, warehouse: Path, wait_seconds: float = 0.0) -> Iterator[bool]:
    """Hold both the DuckDB file's run lock and the warehouse's lock, so two
    configs that share a warehouse (or a DuckDB file) never run at once.
    Yields True when this call acquired them (nothing else of this process
    is writing). Raises :class:`RunLockedError` naming the holder."""
    with (
        run_lock(duckdb_path, wait_seconds) as fresh,
        file_lock(warehouse_lock_path(warehouse), wait_seconds, str(warehouse)) as fresh_wh,
    ):
        yield fresh and fresh_wh
