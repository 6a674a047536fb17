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
import uuid
from pathlib import Path

# The guard: wait until its stdin closes (the parent's end closes when the parent
# dies, however it dies), then stop every Prefect server that carries the
# parent's token in its environment (servers inherit the parent's environment,
# so a server started a moment before a kill is found too).
_GUARD = r"""
import os, signal, sys, time
token = ("FAIRMON_RUN_TOKEN=" + sys.argv[1]).encode()
SERVER = b"prefect.server" + b".api.server"  # split: this script's own command line must not match
sys.stdin.buffer.read()

def servers():
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if SERVER not in fh.read():
                    continue
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if token in fh.read().split(b"\0"):
                    found.append(int(pid))
        except OSError:
            pass
    return found

for sig in (signal.SIGTERM, signal.SIGKILL):
    for pid in servers():
        try:
            os.kill(pid, sig)
        except OSError:
            pass
    deadline = time.monotonic() + 5
    while servers() and time.monotonic() < deadline:
        time.sleep(0.1)
"""

# Process-wide by nature: one guard per fairmon process.
_guard: list[subprocess.Popen] = []


def guard_temporary_server() -> None:
    """Start (once per process) the guard that stops any Prefect server this
    process starts when this process dies, SIGKILL included: the process's
    environment gets a token (``FAIRMON_RUN_TOKEN``) that its servers inherit,
    and the guard stops the servers carrying it. Call it before the first flow
    run. Does nothing when ``PREFECT_API_URL`` is set (no temporary server)."""
    from prefect.settings import PREFECT_API_URL

    if _guard or PREFECT_API_URL.value():
        return
    token = uuid.uuid4().hex
    os.environ["FAIRMON_RUN_TOKEN"] = token
    _guard.append(
        subprocess.Popen(
            [sys.executable, "-c", _GUARD, token],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C to fairmon's group must not stop the guard first
            close_fds=True,
        )
    )


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
