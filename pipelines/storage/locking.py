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
def run_lock(duckdb_path: Path, wait_seconds: float = 0.0) -> Iterator[None]:
    """Hold the run lock of ``duckdb_path`` (re-entrant within the process).

    Raises :class:`RunLockedError` when another process keeps it longer than
    ``wait_seconds``.
    """
    path = lock_path(duckdb_path.resolve())
    with _guard:
        entry = _state.get(path)
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
                            f"another fairmon run holds {path} ({_holder(path)}); it owns {duckdb_path} until it "
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
        yield
    finally:
        with _guard:
            entry = _state[path]
            entry[1] -= 1
            if entry[1] == 0:
                fcntl.flock(entry[0].fileno(), fcntl.LOCK_UN)
                entry[0].close()
                del _state[path]
