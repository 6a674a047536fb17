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

# The guard: until its stdin closes (the parent's end closes when the parent dies,
# however it dies), note every Prefect server the parent has started (polling
# /proc every 0.1 s); then stop those still alive.
_GUARD = r"""
import os, select, signal, sys, time
parent = int(sys.argv[1])
SERVER = b"prefect.server" + b".api.server"  # split: this script's own command line must not match
seen = set()

def scan():
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
            if ppid != parent:
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if SERVER in fh.read():
                    seen.add(int(pid))
        except (OSError, ValueError, IndexError):
            pass

while True:
    scan()
    ready, _, _ = select.select([sys.stdin], [], [], 0.1)
    if ready and not os.read(sys.stdin.fileno(), 1024):
        break
for pid in seen:
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        pass
deadline = time.monotonic() + 5
for pid in seen:
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except OSError:
            break
        time.sleep(0.1)
    else:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
"""

# Process-wide by nature: one guard per fairmon process.
_guard: list[subprocess.Popen] = []


def guard_temporary_server() -> None:
    """Start (once per process) the guard that stops any Prefect server this
    process starts when this process dies, SIGKILL included. Call it before
    the first flow run, so a server is noted from the moment it exists.
    Does nothing when ``PREFECT_API_URL`` is set (no temporary server)."""
    from prefect.settings import PREFECT_API_URL

    if _guard or PREFECT_API_URL.value():
        return
    _guard.append(
        subprocess.Popen(
            [sys.executable, "-c", _GUARD, str(os.getpid())],
            stdin=subprocess.PIPE,
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
