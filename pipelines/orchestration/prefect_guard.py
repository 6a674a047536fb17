"""Prefect's temporary local API, started early and never orphaned.

When no ``PREFECT_API_URL`` is set, Prefect starts a temporary local server
in a subprocess at the first flow run. :func:`launch_temporary_server`
starts that same server (Prefect's own command and environment) as soon as a
command knows it will run days, without importing Prefect's server package
into fairmon's process (about 1.5 s of import that Prefect's launcher costs
there, holding the interpreter while the run's own work waits), and points
this process's Prefect settings at it.

No orphaned server: a small guard process is tied to the server and to
fairmon. If fairmon dies in any way, SIGKILL included, the guard sees its
pipe close and stops the server and every other process fairmon started
(they carry its token: e.g. the flow runs ``fairmon serve``'s runner starts),
which an ``atexit`` hook cannot do after a SIGKILL. On a normal exit the
server is stopped at exit and the guard finds nothing to do.

The server runs in a session of its own: a SIGTERM or Ctrl-C to fairmon's
process group (``systemctl stop``, a terminal) reaches fairmon, which still
needs the API to stop cleanly (``fairmon serve`` stops its runner through it),
and not the server, which fairmon stops at exit (or the guard when fairmon
was killed).
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

# The guard: wait until its stdin closes (the parent's end closes when the parent
# dies, however it dies), then stop every process but itself that carries the
# parent's token in its environment: Prefect's server and anything else fairmon
# started (children inherit the parent's environment, so a server started a
# moment before a kill is found too, and so are the flow-run processes of
# `fairmon serve`'s runner).
#: The guard's script (run with ``python -c``; its one argument is the token).
GUARD_SCRIPT = r"""
import os, signal, sys, time
token = ("FAIRMON_RUN_TOKEN=" + sys.argv[1]).encode()
me = os.getpid()
sys.stdin.buffer.read()

def servers():
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == me:
            continue
        try:
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
            [sys.executable, "-c", GUARD_SCRIPT, token],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C to fairmon's group must not stop the guard first
            close_fds=True,
        )
    )


#: Prefect's temporary server started by :func:`launch_temporary_server` (one per process).
_server: list[subprocess.Popen] = []
_server_log: list = []

#: Prefect's server package (its launcher lives there): once imported here, Prefect may have started a server.
_SERVER_MODULE = "prefect.server" + ".api.server"  # split: no command line quoting this file looks like a server

#: Exit code of Prefect's server when its port was taken meanwhile (Prefect's launcher retries on it too).
_PORT_TAKEN = 3

#: Prefect's setting that bounds the wait for its temporary server (:func:`wait_for_api` follows it).
STARTUP_TIMEOUT_SETTING = "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"


class TemporaryServerError(RuntimeError):
    """Prefect's temporary server did not start: it exited, or did not answer
    within ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS`` (the message
    names the setting). Commands report it as one ``error:`` line (exit 4)."""


def launch_temporary_server() -> str | None:
    """Start Prefect's temporary local API now, when Prefect would start it at
    the first flow run (no ``PREFECT_API_URL`` set), and set this process's
    ``PREFECT_API_URL`` to it. Returns immediately with the API URL (the
    server takes seconds to answer: :func:`wait_for_api`); None when an API
    URL is set, or when Prefect's server package is already imported in this
    process (Prefect's own launcher may have started a server: never a
    second one; Prefect then finds or starts its own). Once per process.

    The command and environment are those of Prefect 3.8's launcher
    (``prefect.server.api.server.SubprocessASGIServer``: uvicorn serving
    ``create_app`` on 127.0.0.1 without the UI, the current settings in its
    environment), so the server is the same; what differs is that Prefect's
    server package is imported only in the server's process. The server
    stops when this process exits (``atexit``), or when it dies (the guard,
    :func:`guard_temporary_server`, started first)."""
    from prefect.settings import PREFECT_API_URL

    if _server:
        return os.environ.get("PREFECT_API_URL")
    if PREFECT_API_URL.value() or _SERVER_MODULE in sys.modules:
        return None  # an API is set, or Prefect's own launcher may run a temporary server here: not a second one
    guard_temporary_server()
    atexit.register(stop_temporary_server)
    return _start_server()


def server_command(port: int) -> list[str]:
    """The command of Prefect's temporary server on ``port`` (Prefect 3.8's launcher's:
    uvicorn serving ``create_app``, no UI). Tests replace it with a server that never answers."""
    import prefect

    cmd = [sys.executable, "-m", "uvicorn", "--app-dir", str(prefect.__module_path__.parent), "--factory"]
    cmd += ["prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(port)]
    return [*cmd, "--log-level", "error", "--lifespan", "on"]


def _start_server() -> str:
    """Start the server process on a port free now (its output to a temporary
    file, shown only if it fails to start, not its shutdown noise) and point
    this process's ``PREFECT_API_URL`` at it. Returns the API URL."""
    from prefect.context import refresh_global_settings_context
    from prefect.settings import get_current_settings

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))  # a free port, chosen by the OS
        port = sock.getsockname()[1]
    settings = get_current_settings().to_environment_variables(exclude_unset=True)
    env = {
        **{k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"},
        "PREFECT_UI_ENABLED": "0",
        "PREFECT__SERVER_EPHEMERAL": "1",
        "PREFECT__SERVER_FINAL": "1",
        **{k: v for k, v in settings.items() if k != "PREFECT_API_URL"},
    }
    log = tempfile.TemporaryFile()  # noqa: SIM115 (open while the server lives)
    # a session of its own: a signal to fairmon's process group must not stop the API fairmon still needs
    proc = subprocess.Popen(server_command(port), env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    _server.append(proc)
    _server_log.append(log)
    url = f"http://127.0.0.1:{port}/api"
    os.environ["PREFECT_API_URL"] = url
    refresh_global_settings_context()  # Prefect reads its settings from the environment once: again now
    return url


def wait_for_api(timeout_s: float | None = None) -> None:
    """Wait until the server :func:`launch_temporary_server` started answers
    ``/health`` (up to ``timeout_s``, default Prefect's
    ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS``). Does nothing when
    this process started none. Raises :class:`TemporaryServerError` naming
    the exit code when the server exited, or the timeout and its setting."""
    import httpx
    from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS

    if not _server:
        return
    proc, url = _server[-1], os.environ["PREFECT_API_URL"]
    limit = timeout_s if timeout_s is not None else PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()
    deadline = time.monotonic() + limit
    retries = 3
    with httpx.Client() as client:
        while time.monotonic() < deadline:
            if proc.poll() == _PORT_TAKEN and retries:  # another process took the port meanwhile: as Prefect does
                retries -= 1
                _server.pop()
                _server_log.pop().close()
                url = _start_server()
                proc = _server[-1]
                continue
            if proc.poll() is not None:
                taken = " (its port was taken)" if proc.returncode == _PORT_TAKEN else ""
                raise TemporaryServerError(
                    f"Prefect's temporary server exited with code {proc.returncode}{taken}: {_server_output()}"
                )
            try:
                if client.get(f"{url}/health", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
    output = _server_output()
    raise TemporaryServerError(
        f"Prefect's temporary server did not answer within {limit:g} s ({STARTUP_TIMEOUT_SETTING}={limit:g}) "
        f"at {url}: raise {STARTUP_TIMEOUT_SETTING} on a busy machine, set PREFECT_API_URL to a running server, "
        f"or run in process with --no-prefect" + ("" if output == "(no output)" else f"; the server wrote:\n{output}")
    )


def _server_output(limit: int = 4000) -> str:
    """The last ``limit`` characters the temporary server wrote."""
    if not _server_log:
        return ""
    log = _server_log[-1]
    log.seek(0)
    return log.read().decode(errors="replace")[-limit:].strip() or "(no output)"


def stop_temporary_server() -> None:
    """Stop the server :func:`launch_temporary_server` started (terminate,
    then kill after 5 s); at exit."""
    while _server:
        proc = _server.pop()
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


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
