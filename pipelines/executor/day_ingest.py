"""A day's input files staged in process, without Prefect.

:func:`fairmon.pipelines.ingest.staging.ingest_source` stages each changed
file as a Prefect task run (``stage-unit``), and a Prefect task called
outside a flow run needs Prefect's API (Prefect starts its temporary server
for it). In process the executor stages the same files with the same
function, called as a plain function; an orchestrator's hooks call
``ingest_source`` itself (:meth:`fairmon.pipelines.executor.outcomes.Hooks.ingest`).
"""

from __future__ import annotations

import datetime as dt
import time

from fairmon.pipelines.checks.gate import DQResult
from fairmon.pipelines.core import timing
from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.ingest.staging import recorded_results, run_logger, stage_unit, units_for


def ingest_day(cfg: FairmonConfig, source: str, ds: dt.date, force: bool) -> list[DQResult]:
    """Stage every file of input ``source`` (impressions, scores, labels)
    that day ``ds`` needs, as ``ingest_source`` does: a file unchanged since
    it was staged (unless ``force``) takes its recorded raw-suite result
    (one ingest-log query for the day's files); the others are staged by
    ``stage_unit``'s function. Returns one :class:`DQResult` per file.
    Raises :class:`fairmon.transforms.contract.InputContractError` for a
    file that breaks its input contract."""
    units = units_for(cfg, source, ds)
    t0 = time.perf_counter()
    with timing.clock(str(ds), "ingest"):
        known = {} if force else recorded_results(cfg, source, units)
    out = []
    for u in units:
        if u.file in known:
            run_logger().info("ingest %s: unchanged since staged, skipped, %.2fs", u.file, time.perf_counter() - t0)
            out.append(known[u.file])
        else:
            out.append(stage_unit.fn(cfg, source, u, str(ds), force))
    return out
