"""The runner: the one loop that runs days (``fairmon run``, ``fairmon
backfill``, the demo, the scheduled job and bench/ all use it).

For a list of days it opens one run (:class:`fairmon.pipelines.core.run.Run`,
config loaded once), holds the DuckDB file's run lock and one connection for
the whole range, creates the GX gate while Prefect's API starts, profiles,
stages and counts a multi-day range ahead (:func:`prestage_impressions`),
then runs the daily flow for each day (``concurrency`` at a time; one failing
day never stops the others) and builds Data Docs once at the end. It knows
nothing of terminals: progress goes to the callbacks the caller passes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from prefect import flow

from fairmon.pipelines.checks.gate import gate_for, preload_gate, prune_gx
from fairmon.pipelines.core import timing
from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.core.run import Run, in_run, run_scope
from fairmon.pipelines.ingest.staging import prestage_impressions
from fairmon.pipelines.orchestration.flows import DayQuarantined, backfill_day, daily, precheck_days, refresh_run_views
from fairmon.pipelines.orchestration.heartbeat import beating, prefect_heartbeat_off
from fairmon.pipelines.orchestration.prefect_guard import launch_temporary_server, wait_for_api
from fairmon.pipelines.storage import db
from fairmon.pipelines.storage.locking import project_lock
from fairmon.pipelines.storage.warehouse import clean_tmp

#: Days prestaged together in a backfill (:func:`run_days`): a quarter's files
#: profiled and staged at once; memory follows this, not the range's length.
#: Each chunk pays fixed costs (one GX run per suite, ~1.2 s): 31-day chunks
#: made a year's backfill 86 s, 92-day chunks 74 s at 0.89 GB peak (issue 21).
PRESTAGE_DAYS = 92
#: The same on Spark, whose clustered profiles are split by bucket (up to ~9x
#: more rows than DuckDB's two grouping sets, adapters.profile_rows): a month.
PRESTAGE_DAYS_SPLIT = 31


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


def start_api_in_background() -> Future:
    """:func:`start_api` in a thread of its own, so that the caller can work
    (profile, check and stage a backfill's files: nothing there needs Prefect)
    while Prefect's temporary server starts. The server (and its guard) is
    launched from the calling thread. Returns the future; wait for it before
    the first flow run."""
    launch_temporary_server()
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fairmon-prefect-api")
    future = pool.submit(start_api)
    pool.shutdown(wait=False)  # the thread ends when start_api returns
    return future


@contextmanager
def docs_deferred(run: Run) -> Iterator[None]:
    """Build Data Docs once when the block ends (a backfill) instead of once
    per day: each build re-renders the index, about 0.35 s a day."""
    run.docs_deferred = True
    try:
        yield
    finally:
        run.docs_deferred = False
        prune_gx(run.cfg.gx_root, run.cfg.gx.keep_days)  # [gx] keep_days: GX's files do not grow without end
        gate_for(run.cfg).build_docs()


def day_summary(run: Run, ds: dt.date, force_ingest: bool, wait_seconds: float, in_backfill: bool = False) -> dict:
    """Run day ``ds`` in ``run`` and summarise it:
    {ds, status: published | quarantined | failed, ...the day's result, or error}.
    A day alone is the flow run ``fairmon-daily/<ds>`` (:func:`daily`); a day
    of a backfill (``in_backfill``) is the task run of that name under the
    backfill's parent flow run (:func:`backfill_day`)."""
    if in_backfill:
        state = backfill_day(run.cfg, ds, force_ingest, wait_seconds, return_state=True)
    else:
        with prefect_heartbeat_off():  # the flow sends its own (fairmon.pipelines.orchestration.heartbeat)
            state = daily(run.cfg, ds, force_ingest, wait_seconds, return_state=True)
    try:
        return {"ds": ds, "status": "published", **state.result()}
    except DayQuarantined as e:
        return {"ds": ds, "status": "quarantined", "error": str(e)}
    except Exception as e:  # the day's own exception, re-raised by result()
        return {"ds": ds, "status": "failed", "error": f"{type(e).__name__}: {e}"}


def run_days(
    cfg: FairmonConfig,
    days: list[dt.date],
    *,
    config_path: str = "",
    force_ingest: bool = False,
    concurrency: int = 1,
    wait_seconds: float = 0.0,
    on_prestage: Callable[[dict], None] | None = None,
    on_day: Callable[[dict], None] | None = None,
    prestage_days: int | None = None,
) -> list[dict]:
    """Run the daily flow for each of ``days`` in one run of ``cfg``.

    A range of more than one day is prestaged (one profile scan, staging
    transaction and count, and the checks ahead) in chunks of at most
    ``prestage_days`` consecutive days (default :data:`PRESTAGE_DAYS`, on
    Spark :data:`PRESTAGE_DAYS_SPLIT`), each just before its days run, so
    that memory follows the chunk, not the range. ``on_prestage`` receives
    each chunk's prestage figures ({files, staged, ingest, checks, counts,
    estimators}); ``on_day`` each day's summary as it finishes. Returns one
    summary per day, in day order
    (see :func:`day_summary`). Raises
    :class:`fairmon.pipelines.storage.locking.RunLockedError` when another
    process holds the DuckDB file longer than ``wait_seconds``.
    """
    run = Run(cfg, config_path)
    path = cfg.duckdb_path
    results: dict[dt.date, dict] = {}
    lock = project_lock(path, cfg.warehouse_path, wait_seconds)
    with run_scope(run), lock as fresh, db.session(path), docs_deferred(run):
        if fresh:  # nothing else writes this warehouse now: a killed run's leftovers can go
            clean_tmp(cfg.warehouse_path, older_than_s=0)
            refresh_run_views(cfg)  # views over what the warehouse holds now
        preload_gate(cfg)  # GX imports while Prefect's API starts
        if prestage_days is None:
            prestage_days = PRESTAGE_DAYS_SPLIT if cfg.engine == "spark" else PRESTAGE_DAYS
        step = max(1, prestage_days)
        chunks = [days[i : i + step] for i in range(0, len(days), step)]

        def prestage(chunk: list[dt.date]) -> None:
            """One scan, one staging transaction and one count for the chunk; its checks ahead."""
            pre = prestage_impressions(cfg, chunk, force_ingest)
            timing.start("prestage")
            with timing.clock("prestage", "checks"):  # the days' checks on their counts and outputs ahead
                estimators = precheck_days(cfg, chunk)  # (one GX run a suite), their estimates with them
            pre["checks"] = pre.get("checks", 0.0) + timing.take("prestage").get("checks", 0.0)  # less estimators
            pre["estimators"] = estimators
            if on_prestage is not None:
                on_prestage(pre)

        api = start_api_in_background()  # its temporary server starts (seconds) while the range is prestaged
        try:
            if len(days) > 1:
                prestage(chunks[0])
        finally:
            api.result()  # raises what starting the API raised

        def each_day() -> None:
            # a backfill's days are task runs of its parent flow run
            one = in_run(lambda ds: day_summary(run, ds, force_ingest, wait_seconds, in_backfill=len(days) > 1))
            for k, chunk in enumerate(chunks):
                if k:
                    prestage(chunk)
                with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
                    for r in pool.map(one, chunk):
                        results[r["ds"]] = r
                        if on_day is not None:
                            on_day(r)

        def each_day_recording_meanwhile() -> None:
            """The days, their artifacts recorded by a thread of their own (about 50 ms a day of
            API calls); all recorded before the parent run ends."""
            try:
                with ThreadPoolExecutor(max_workers=1, thread_name_prefix="fairmon-artifacts") as run.artifacts:
                    each_day()
            finally:
                run.artifacts = None

        if len(days) > 1:  # one parent run in Prefect's UI; the days are its fairmon-daily/<ds> task runs
            with prefect_heartbeat_off():  # the flow sends its own (fairmon.pipelines.orchestration.heartbeat)
                backfill(days[0], days[-1], len(days), each_day_recording_meanwhile)
        else:
            each_day()
    return [results[d] for d in days]


@flow(name="fairmon-backfill", flow_run_name="fairmon-backfill/{start}..{end}", validate_parameters=False)
def backfill(start: dt.date, end: dt.date, n_days: int, each_day: Any) -> None:
    """The parent flow run of a range of days (``fairmon-backfill/<start>..<end>``):
    ``each_day`` runs the days, each as its task run ``fairmon-daily/<ds>``.
    Its state is Completed when every day was run, whatever each day's own
    outcome (published, quarantined or failed: see the day runs); an error
    outside the days fails it."""
    with beating():
        each_day()
