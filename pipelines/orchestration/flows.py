"""Prefect's view of the executor: the flows, tasks, run names, states and artifacts of fairmon's days.

All the work is the executor's (:mod:`fairmon.pipelines.executor`); this
module only says how Prefect shows it. A day alone is the flow run
``fairmon-daily/<ds>`` whose steps (count-groups, check-day, estimate-reo,
check-outputs, publish-day, ...) are task runs of their own; a backfill's
day is the task run ``fairmon-daily/<ds>`` of the parent flow run (see
:mod:`fairmon.pipelines.orchestration.runner`). A day whose critical check
failed ends in a failed state named ``Quarantined`` carrying the
:class:`DayQuarantined`; a published day records its Prefect artifacts.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import re
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.states import Failed, State

from fairmon.pipelines.checks.suites import DQResult
from fairmon.pipelines.core.config import FairmonConfig, load_config
from fairmon.pipelines.executor import estimators
from fairmon.pipelines.executor.days import ingest_day, run_days
from fairmon.pipelines.executor.outcomes import DayFailed, DayQuarantined, DayResult, Hooks
from fairmon.pipelines.ingest.staging import run_logger, warn
from fairmon.pipelines.orchestration.heartbeat import beating

__all__ = ["DayFailed", "DayQuarantined", "DayResult", "FlowSteps", "backfill_day", "daily", "ingest"]

_TASKS: dict[Callable, Any] = {}

#: The count step as a Prefect task (bench/ calls its function, ``count_groups.fn``).
count_groups = task(name="count-groups", cache_policy=NO_CACHE)(estimators.count_groups)


def task_for(fn: Callable):
    """The Prefect task (named by the step's name, :func:`fairmon.pipelines.executor.outcomes.step`;
    never cached) that runs executor step ``fn``, made once per function."""
    made = _TASKS.get(fn)
    if made is None:
        made = _TASKS[fn] = task(name=getattr(fn, "step_name", fn.__name__), cache_policy=NO_CACHE)(fn)
    return made


def prefect_slug(name: str) -> str:
    """``name`` as Prefect's artifact keys allow it: lowercase letters, digits
    and dashes (every other run of characters one dash, none at the ends);
    ``project`` when nothing is left."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "project"


def run_tags(cfg: FairmonConfig, kind: str) -> list[str]:
    """The tags of a flow run of ``cfg``'s project: ``fairmon``,
    ``project:<slug>`` (:func:`prefect_slug` of ``[project] name``) and
    ``kind`` (``daily``, ``backfill``, ``ingest``, ``scheduled``), so that
    Prefect's UI filters one project's runs of one kind."""
    return ["fairmon", f"project:{prefect_slug(cfg.project_name)}", kind]


def artifact_keys(cfg: FairmonConfig, ds: dt.date) -> tuple[str, str]:
    """The keys of day ``ds``'s two artifacts, ``fairmon-<project>-reo-<ds>``
    and ``fairmon-<project>-outputs-<ds>`` (<project>: :func:`prefect_slug`
    of ``[project] name``): the same day of two projects on one Prefect
    server are two artifacts, a re-run of the day a new version of its own."""
    slug = prefect_slug(cfg.project_name)
    return f"fairmon-{slug}-reo-{ds.isoformat()}", f"fairmon-{slug}-outputs-{ds.isoformat()}"


def absolute_config_path(config_path: str) -> str:
    """``config_path`` made absolute (a flow run's parameter must name the file from anywhere), or ''."""
    return str(Path(config_path).resolve()) if config_path else ""


class FlowSteps(Hooks):
    """The executor's hooks inside a day's own flow run: each step is a task
    run; the day's end returns a :class:`DayResult` (its artifacts recorded,
    keyed by ``cfg``'s project) or a failed state named ``Quarantined``; any
    other error fails the flow run."""

    def __init__(self, cfg: FairmonConfig) -> None:
        self.cfg = cfg

    def step(self, fn: Callable, *args) -> Any:
        """``fn(*args)`` as a task run of the current flow run. Raises what ``fn`` raises."""
        return task_for(fn)(*args)

    def day(self, ds: dt.date, finish: Callable[[], Mapping]) -> DayResult | State:
        """The day's end in Prefect's terms (:func:`day_outcome`, artifacts recorded inline)."""
        return day_outcome(self.cfg, ds, finish, None)


def day_outcome(
    cfg: FairmonConfig, ds: dt.date, finish: Callable[[], Mapping], artifacts: ThreadPoolExecutor | None
) -> DayResult | State:
    """Run day ``ds`` (of ``cfg``)'s last unit ``finish``; a quarantine becomes a failed
    state named ``Quarantined`` (an outcome of the gate, not a crash: no
    traceback) carrying the :class:`DayQuarantined`. A published day's
    artifacts are recorded (:func:`day_artifacts`) inline, or by the
    ``artifacts`` thread meanwhile, in the day's own Prefect context.
    Returns the :class:`DayResult` or the state; raises what ``finish``
    raises otherwise."""
    try:
        result = finish()
    except DayQuarantined as e:
        return Failed(name="Quarantined", message=str(e), data=e)
    if artifacts is not None:
        done = artifacts.submit(contextvars.copy_context().run, day_artifacts, cfg, ds, result)
        done.add_done_callback(lambda f: _warn_if_failed(f, f"{ds}: Prefect artifacts not recorded"))
    else:
        day_artifacts(cfg, ds, result)
    return DayResult(dict(result))


@flow(name="fairmon-ingest")
def ingest(config: FairmonConfig | str, ds: dt.date, force: bool = False, config_path: str = "") -> list[DQResult]:
    """Validate and stage every configured input that day ``ds`` needs (for
    impressions: its default traffic and the random traffic of its trailing
    window; for scores and labels: the days of their windows). Re-ingesting
    replaces. Returns one :class:`DQResult` per file. ``config`` is a loaded
    config or the path of one (loaded once); ``config_path`` the file's path
    when ``config`` is loaded (a parameter Prefect shows). Raises what staging raises."""
    cfg = config if isinstance(config, FairmonConfig) else load_config(config)
    path = config_path or ("" if isinstance(config, FairmonConfig) else str(config))
    return ingest_day(cfg, ds, force, path, lambda fn, *args: task_for(fn)(*args))


@flow(name="fairmon-daily", flow_run_name="fairmon-daily/{ds}")
def daily(
    config: FairmonConfig | str,
    ds: dt.date,
    force_ingest: bool = False,
    wait_seconds: float = 0.0,
    body: Any = None,
    config_path: str = "",
) -> DayResult:
    """One day end to end, gated, for every configured input, as the flow
    run ``fairmon-daily/<ds>`` (:func:`fairmon.pipelines.executor.days.run_days`
    for one day, its steps as task runs). ``config`` is the run's loaded
    config or the path of one (loaded once). ``body``: the executor's work
    for the day when the runner has already prepared it (lock, session;
    :mod:`fairmon.pipelines.orchestration.runner`); None runs the day from
    the start (waiting up to ``wait_seconds`` for the project lock).
    ``config_path``: the config file (absolute), a parameter Prefect shows
    with the run when ``config`` is a loaded config.

    Returns a :class:`DayResult` mapping {ds, run_id, reo, reo_ab,
    threshold_prevalence, sdt, envy_audit (rows as dicts, empty when not
    configured), dq, paths, data_docs, timings}, or a failed state named
    ``Quarantined`` on a critical data-quality failure (its result raises
    :class:`DayQuarantined`). Raises :class:`DayFailed` when the day cannot
    be computed (naming the stage and input) and
    :class:`fairmon.pipelines.storage.locking.RunLockedError` when another
    run holds the project.
    """
    with beating():
        return daily_body(config, ds, force_ingest, wait_seconds, body, config_path)


def daily_body(
    config: FairmonConfig | str, ds: dt.date, force_ingest: bool, wait_seconds: float, body: Any, config_path: str = ""
):
    """The body of :func:`daily` (its arguments): the prepared ``body``, or
    the executor for day ``ds`` with :class:`FlowSteps`. Returns the day's
    :class:`DayResult` or its Quarantined state; raises what the day raises."""
    if body is not None:
        (out,) = body()
        return out
    cfg = config if isinstance(config, FairmonConfig) else load_config(config)
    path = config_path or ("" if isinstance(config, FairmonConfig) else str(config))
    (out,) = run_days(
        cfg, [ds], config_path=path, force_ingest=force_ingest, wait_seconds=wait_seconds, hooks=FlowSteps(cfg)
    )
    return out


@task(name="fairmon-day", task_run_name="fairmon-daily/{ds}", cache_policy=NO_CACHE)
def backfill_day(
    config: FairmonConfig, ds: dt.date, finish: Callable[[], Mapping], artifacts: ThreadPoolExecutor | None = None
) -> DayResult:
    """Day ``ds``'s end (``finish``: publish or quarantine, its run recorded)
    as the task run ``fairmon-daily/<ds>`` of a backfill's parent flow run
    (``fairmon-backfill/<start>..<end>``), with the states and artifacts of a
    day alone (:func:`day_outcome`; artifacts recorded by the ``artifacts``
    thread meanwhile). A flow run per day cost its API round trips to
    Prefect's server: 0.15 s for an empty subflow and 1.3-1.8 s with five
    tasks (bench/README.md); a task run reports its
    states as events and does not wait. ``config`` names the run's config
    (Prefect shows it). Returns the :class:`DayResult` or the Quarantined
    state; raises what the day raises."""
    return day_outcome(config, ds, finish, artifacts)


def _warn_if_failed(future, what: str) -> None:
    """A warning naming ``what`` and the error when ``future`` (background work that must not fail the day) raised."""
    if future.exception() is not None:
        warn("%s: %s", what, future.exception())


def day_artifacts(cfg: FairmonConfig, ds: dt.date, result: Mapping) -> None:
    """Prefect artifacts of a published day ``ds`` of ``cfg``'s project (its
    ``result``), under stable keys (:func:`artifact_keys`; re-runs of the
    day add versions of the same artifact): ``fairmon-<project>-reo-<ds>``,
    a table of REO per arm × attribute with its CI and verdict, and
    ``fairmon-<project>-outputs-<ds>``, a link to the day's reo partition
    (the other tables sit beside it) and the Data Docs. Best effort: a
    failure to record them is logged, never fails the day."""
    from prefect.artifacts import create_link_artifact, create_table_artifact

    rows = [
        {
            "arm": r["arm"],
            "attribute": r["attribute"],
            "K": r["K"],
            "REO": round(r["reo"], 4) if r["reo"] == r["reo"] else None,
            "CI": f"[{r['ci_low']:.4f}, {r['ci_high']:.4f}]" if r["ci_low"] == r["ci_low"] else "undefined",
            "verdict": r["verdict_80pct"],
            "reason": r.get("reason") or "",
        }
        for r in result.get("reo", [])
    ]
    reo_key, outputs_key = artifact_keys(cfg, ds)
    try:
        if rows:
            create_table_artifact(rows, key=reo_key, description=f"REO and verdicts for {ds} ({cfg.project_name})")
        reo_path = result.get("paths", {}).get("reo")
        if reo_path:
            create_link_artifact(
                Path(reo_path).resolve().as_uri(),
                link_text=f"reo partition for {ds}",
                key=outputs_key,
                description=f"Data Docs: {result.get('data_docs', '')}",
            )
    except Exception as e:  # artifacts are a convenience: the day is published either way
        run_logger().warning("%s: Prefect artifacts not recorded: %s", ds, e)
