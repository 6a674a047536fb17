"""No orphaned Prefect server: when fairmon starts Prefect's temporary local
API (no ``PREFECT_API_URL`` set), a small guard process is tied to it and to
fairmon. If fairmon dies in any way, SIGKILL included, the guard sees its
pipe close and stops the server (which Prefect's own ``atexit`` hook cannot
do after a SIGKILL). On a normal exit Prefect stops the server itself and the
guard finds nothing to do.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# The guard: wait for EOF on stdin (the parent's end closes when it dies), then
# stop the server if it is still the Prefect server it was started for.
_GUARD = r"""
import os, signal, sys, time
pid = int(sys.argv[1])
sys.stdin.buffer.read()
try:
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        if b"prefect.server.api.server" not in fh.read():
            sys.exit(0)
    os.kill(pid, signal.SIGTERM)
    for _ in range(50):
        time.sleep(0.1)
        os.kill(pid, 0)
    os.kill(pid, signal.SIGKILL)
except (OSError, ProcessLookupError):
    pass
"""

# Process-wide by nature: one temporary server per process, one guard for it.
_guards: dict[int, subprocess.Popen] = {}


def guard_temporary_server() -> int | None:
    """Tie Prefect's temporary server of this process (if it started one) to
    this process's life. Returns the server's pid, or None when there is none
    (an API URL is configured). Idempotent."""
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()  # Prefect keeps one instance per port; this is the ephemeral one
    proc = server.server_process
    if proc is None or proc.poll() is not None:
        return None
    if proc.pid not in _guards:
        _guards[proc.pid] = subprocess.Popen(
            [sys.executable, "-c", _GUARD, str(proc.pid)],
            stdin=subprocess.PIPE,
            start_new_session=True,  # a Ctrl-C to fairmon's group must not kill the guard first
            close_fds=True,
        )
    return proc.pid


def temporary_servers(prefect_home: Path) -> list[int]:
    """Pids of live Prefect API servers started under ``PREFECT_HOME=prefect_home``
    (Linux ``/proc``): how tests and bench/faults.py check that none outlives its run."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            env = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if b"prefect.server.api.server" in cmd and f"PREFECT_HOME={prefect_home}".encode() in env:
            found.append(int(pid))
    return found
