"""Fault injection for crash-safety tests: ``FAIRMON_FAULT=<point>`` makes the
process SIGKILL itself when it reaches that point (no cleanup, no atexit),
exactly like an OOM kill or a pulled plug. Points:

* ``parquet_write``: new partition files written aside, none swapped in yet;
* ``parquet_swap``: the first of a day's partitions swapped in, the rest not;
* ``publish_record``: every partition of the day swapped in, the run not yet recorded as published.
"""

from __future__ import annotations

import os
import signal

POINTS = ("parquet_write", "parquet_swap", "publish_record")


def fault_point(name: str) -> None:
    """Kill this process with SIGKILL if ``FAIRMON_FAULT`` names this point."""
    if os.environ.get("FAIRMON_FAULT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
