"""The runner: days as Prefect runs (``fairmon run``, ``fairmon backfill``, the demo, the scheduled job, bench/).

The days themselves are the executor's (:func:`fairmon.pipelines.executor.days.run_days`:
one run, the project lock, ranges run in batches); this module
gives them Prefect's shape through the executor's hooks: Prefect's API is
reached (its temporary server started) while the gate's imports load; a day
alone is the flow run ``fairmon-daily/<ds>`` (:func:`fairmon.pipelines.orchestration.flows.daily`);
a range is the parent flow run ``fairmon-backfill/<start>..<end>`` whose
days are its task runs ``fairmon-daily/<ds>``, their artifacts recorded by
a thread of their own meanwhile. With ``prefect=False`` the same executor
runs in process with no API and no server. It knows nothing of terminals:
progress goes to the callbacks the caller passes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from prefect import flow, tags

from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.executor import days as executor_days
from fairmon.pipelines.executor.days import BATCH_DAYS, BATCH_DAYS_SPLIT, docs_deferred
from fairmon.pipelines.executor.outcomes import summarise
from fairmon.pipelines.orchestration.flows import FlowSteps, absolute_config_path, backfill_day, daily, run_tags
from fairmon.pipelines.orchestration.heartbeat import beating, prefect_heartbeat_off
from fairmon.pipelines.orchestration.prefect_guard import launch_temporary_server, wait_for_api

__all__ = ["BATCH_DAYS", "BATCH_DAYS_SPLIT", "backfill", "docs_deferred", "run_days", "start_api"]


def start_api() -> None:
    """Reach the Prefect API from the calling thread, starting Prefect's
    temporary local server when no PREFECT_API_URL is set
    (:func:`fairmon.pipelines.orchestration.prefect_guard.launch_temporary_server`, unless a
    command launched it earlier). Called from the main thread before days
    run in worker threads: threads that each start the server race. A server
    started here is stopped when this process dies, however it dies
    (:mod:`fairmon.pipelines.orchestration.prefect_guard`)."""
    from prefect.client.orchestration import get_client

    launch_temporary_server()  # the guard first: no window in which the server could be orphaned
    wait_for_api()
    with get_client(sync_client=True) as client:
        client.api_healthcheck()


def summarise_state(ds: dt.date, state) -> dict:
    """A day's Prefect ``state`` as the runner's summary of day ``ds``
    (:func:`fairmon.pipelines.executor.outcomes.summarise`: its result, or
    quarantined, or failed with the day's own error)."""
    return summarise(ds, state.result)


class _Reached(FlowSteps):
    """Days run through Prefect: its API is reached before the first of them
    (:func:`start_api`; the gate's imports load meanwhile in their own thread)."""

    def start(self) -> None:
        """Reach Prefect's API (its temporary server started). Raises what starting raises."""
        start_api()


class _Backfill(_Reached):
    """A range: one parent flow run, each day's end its task run (steps are plain calls inside)."""

    def __init__(self, cfg: FairmonConfig, config_path: str = "") -> None:
        super().__init__(cfg)
        self.config_path = absolute_config_path(config_path)
        self.artifacts: ThreadPoolExecutor | None = None

    def step(self, fn: Callable, *args) -> Any:
        """``fn(*args)``, a plain call inside the parent flow run. Raises what ``fn`` raises."""
        # each nested task run costs Prefect's server a run, its states and events: in a 14-day
        # backfill the server's share of the cores went to recording step runs (bench/README.md)
        return fn(*args)

    def around(self, days: list[dt.date], body: Callable[[], list[Any]]) -> list[Any]:
        """``body`` inside the parent flow run :func:`backfill` of ``days``, with
        an artifacts thread. Returns the days' summaries; raises what the parent run raises."""
        out: list[Any] = []

        def each_day() -> None:
            """The days, their artifacts recorded by a thread of their own (about 50 ms a day of
            API calls); all recorded before the parent run ends."""
            try:
                with ThreadPoolExecutor(max_workers=1, thread_name_prefix="fairmon-artifacts") as self.artifacts:
                    out.extend(body())
            finally:
                self.artifacts = None

        with prefect_heartbeat_off(), tags(*run_tags(self.cfg, "backfill")):  # the flow sends its own heartbeat
            backfill(days[0], days[-1], len(days), each_day, self.config_path)
        return out

    def day(self, ds: dt.date, finish: Callable[[], Mapping]) -> dict:
        """Day ``ds``'s end as its task run :func:`backfill_day`; returns its summary, never raising for the day."""
        return summarise_state(ds, backfill_day(self.cfg, ds, finish, self.artifacts, return_state=True))


class _DayAlone(_Reached):
    """A day alone: the flow run ``fairmon-daily/<ds>`` around the executor's work, steps as its task runs."""

    def __init__(
        self, cfg: FairmonConfig, force_ingest: bool, wait_seconds: float, on_day, config_path: str = ""
    ) -> None:
        super().__init__(cfg)
        self.force_ingest, self.wait_seconds, self.on_day = force_ingest, wait_seconds, on_day
        self.config_path = absolute_config_path(config_path)

    def around(self, days: list[dt.date], body: Callable[[], list[Any]]) -> list[Any]:
        """``body`` as the flow run :func:`daily` of the one day in ``days``;
        returns [its summary] (given to ``on_day`` too), never raising for the day."""
        (ds,) = days
        with prefect_heartbeat_off(), tags(*run_tags(self.cfg, "daily")):  # the flow sends its own heartbeat
            state = daily(
                self.cfg,
                ds,
                self.force_ingest,
                self.wait_seconds,
                body=body,
                config_path=self.config_path,
                return_state=True,
            )
        summary = summarise_state(ds, state)
        if self.on_day is not None:
            self.on_day(summary)
        return [summary]


def run_days(
    cfg: FairmonConfig,
    days: list[dt.date],
    *,
    config_path: str = "",
    force_ingest: bool = False,
    concurrency: int = 1,
    wait_seconds: float = 0.0,
    on_batch: Callable[[dict], None] | None = None,
    on_day: Callable[[dict], None] | None = None,
    batch_days: int | None = None,
    prefect: bool = True,
    on_alerts: Callable[[Any], None] | None = None,
) -> list[dict]:
    """Run ``days`` of ``cfg`` (:func:`fairmon.pipelines.executor.days.run_days`,
    whose arguments these are), as Prefect runs when ``prefect`` (a day
    alone: the flow run ``fairmon-daily/<ds>``; a range: the parent flow run
    ``fairmon-backfill/<start>..<end>`` with a task run per day; each
    tagged ``fairmon``, ``project:<name>`` and ``daily`` or ``backfill``,
    ``config_path`` among its parameters), or in
    process with no Prefect API and no server when not. Returns one summary
    per day, in day order: {ds, status: published | quarantined | failed,
    ...the day's result, or error}. Raises
    :class:`fairmon.pipelines.storage.locking.RunLockedError` when another
    process holds the project longer than ``wait_seconds``, and what
    starting Prefect's API raises.
    """
    options = dict(
        config_path=config_path,
        force_ingest=force_ingest,
        concurrency=concurrency,
        wait_seconds=wait_seconds,
        on_batch=on_batch,
        batch_days=batch_days,
        on_alerts=on_alerts,
    )
    if not prefect:
        return executor_days.run_days(cfg, days, on_day=on_day, **options)
    if len(days) == 1:
        hooks = _DayAlone(cfg, force_ingest, wait_seconds, on_day, config_path)
        return executor_days.run_days(cfg, days, hooks=hooks, **options)
    return executor_days.run_days(cfg, days, on_day=on_day, hooks=_Backfill(cfg, config_path), **options)


@flow(name="fairmon-backfill", flow_run_name="fairmon-backfill/{start}..{end}", validate_parameters=False)
def backfill(start: dt.date, end: dt.date, n_days: int, each_day: Any, config_path: str = "") -> None:
    """The parent flow run of a range of days (``fairmon-backfill/<start>..<end>``):
    ``each_day`` runs the days, each ending as its task run ``fairmon-daily/<ds>``;
    ``config_path`` (absolute) names the project's config among the run's
    parameters, and the runner tags the run (:func:`fairmon.pipelines.orchestration.flows.run_tags`).
    Its state is Completed when every day was run, whatever each day's own
    outcome (published, quarantined or failed: see the day runs); an error
    outside the days fails it."""
    with beating():
        each_day()
