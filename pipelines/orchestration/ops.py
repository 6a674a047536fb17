"""Operations: scheduling, choosing which days to (re)run, and late-data staleness."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import threading
from pathlib import Path

import polars as pl
from prefect import flow, get_run_logger

from fairmon.pipelines.core.config import FairmonConfig, load_config
from fairmon.pipelines.ingest.windows import days_between
from fairmon.pipelines.orchestration.flows import prefect_slug
from fairmon.pipelines.orchestration.runner import run_days
from fairmon.pipelines.orchestration.staleness import stale_changes
from fairmon.pipelines.storage import db
from fairmon.pipelines.storage.locking import project_lock


def detect_stale(cfg: FairmonConfig) -> pl.DataFrame:
    """Compare, for every day that has run, the inputs its latest run used
    with the files the day needs now (resolved afresh: a changed, removed or
    *new* file, such as a late random pool, counts), and the config sections
    that shape its outputs with the current ones (:func:`config_change`: an
    arm, ``[ab]``, an attribute, an estimation setting), and mark the days
    that differ as stale (table ``stale_days``, one row per differing file,
    or ``config [section], ...``).

    Returns the newly found (ds, file) pairs.
    """
    with db.connect(cfg.duckdb_path) as con:
        for name in ("runs_create", "runs_migrate", "stale_create"):
            db.execute(con, name)
        found = [(ds, file) for ds, file, _ in stale_changes(cfg, db.query(con, "runs_latest"))]
        for ds, file in found:
            db.execute(con, "stale_insert", ds=ds, file=file)
    return pl.DataFrame(found, schema={"ds": pl.Date, "file": pl.String}, orient="row")


def days_to_run(
    cfg: FairmonConfig, start: dt.date, end: dt.date, *, only_failed: bool = False, only_stale: bool = False
) -> list[dt.date]:
    """The days of start..end a backfill should run: all of them, or only those
    whose latest run did not publish (or never ran), and/or only the stale ones
    (after :func:`detect_stale`). With both flags, the union."""
    days = days_between(start, end)
    if not (only_failed or only_stale):
        return days
    chosen: set[dt.date] = set()
    with db.connect(cfg.duckdb_path) as con:
        db.execute(con, "runs_create")
        db.execute(con, "stale_create")
        if only_failed:
            last = dict(db.query(con, "runs_last_status", start=start, end=end).select("ds", "status").iter_rows())
            chosen |= {d for d in days if last.get(d) != "published"}
        if only_stale:
            chosen |= set(db.query(con, "stale_list", start=start, end=end).get_column("ds").to_list())
    return sorted(chosen)


@flow(
    name="fairmon-scheduled",
    flow_run_name="fairmon-scheduled/lag-{lag_days}",
    retries=2,
    retry_delay_seconds=[60, 600],  # backoff: a busy lock or a late file system gets a minute, then ten
    timeout_seconds=6 * 3600,
)
def scheduled(config_path: str, lag_days: int = 1, wait_seconds: float = 600.0) -> list[dict]:
    """The scheduled job: compute the day ``lag_days`` before today (UTC), and
    recompute every day that late data made stale, through the runner's day
    loop (config loaded once). Returns one summary per day."""
    cfg = load_config(config_path)
    target = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=lag_days)
    with project_lock(cfg.duckdb_path, cfg.warehouse_path, wait_seconds):
        detect_stale(cfg)
        with db.connect(cfg.duckdb_path) as con:
            stale = db.query(con, "stale_list", start=dt.date(1900, 1, 1), end=target).get_column("ds").to_list()
        days = sorted(set(stale) | {target})
        results = run_days(cfg, days, config_path=config_path, wait_seconds=wait_seconds)
    out = [
        {"ds": str(r["ds"]), "status": r["status"], **({"detail": r["error"]} if "error" in r else {})} for r in results
    ]
    get_run_logger().info("scheduled run: %s", out)
    return out


def deployment_name(cfg: FairmonConfig) -> str:
    """The name ``fairmon serve`` registers ``cfg``'s deployment under:
    ``[schedule] name`` when the config sets it, else
    ``fairmon-daily-<project>`` (<project>: the slug of ``[project] name``,
    :func:`fairmon.pipelines.orchestration.flows.prefect_slug`), so that two
    projects served on one Prefect server are two deployments."""
    sc = cfg.schedule
    return sc.name if "name" in sc.model_fields_set else f"{sc.name}-{prefect_slug(cfg.project_name)}"


def build_deployment(
    config_path: Path, cron: str, timezone: str, lag_days: int, name: str = "fairmon-daily", project: str = ""
):
    """The Prefect deployment of :func:`scheduled` with a cron schedule (not
    started), named ``name`` (:func:`deployment_name`), its runs tagged
    ``fairmon``, ``scheduled`` and, given the ``project`` name,
    ``project:<slug>``; the config file's absolute path is a parameter."""
    from prefect.client.schemas.schedules import CronSchedule

    tags = ["fairmon", *([f"project:{prefect_slug(project)}"] if project else []), "scheduled"]
    return scheduled.to_deployment(
        name=name,
        schedule=CronSchedule(cron=cron, timezone=timezone),
        parameters={"config_path": str(Path(config_path).resolve()), "lag_days": lag_days},
        description="fairmon: compute yesterday's fairness metrics and recompute days made stale by late data",
        tags=tags,
    )


#: Seconds a stop waits for a runner that is still starting (then its start is cancelled).
_START_GRACE_S = 30.0


async def serve_until_stopped(deployment, stop: threading.Event | None = None) -> None:
    """Serve ``deployment`` (Prefect's Runner: polls for scheduled runs and
    executes them) until SIGTERM or SIGINT, then stop the runner with its own
    asynchronous shutdown and return. (Prefect's ``serve`` handles SIGTERM by
    calling the runner's stop without awaiting it.) ``stop``: set by the
    caller's SIGTERM handler before this loop took the signal over; if set,
    nothing is started. A SIGTERM while Prefect's temporary API is still
    starting stops cleanly too."""
    import signal

    from prefect.runner import Runner

    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()

    def request_stop(*_args) -> None:
        loop.call_soon_threadsafe(stopping.set)

    loop.add_signal_handler(signal.SIGTERM, request_stop)
    loop.add_signal_handler(signal.SIGINT, request_stop)
    if stop is not None and stop.is_set():
        return
    runner = Runner(pause_on_shutdown=False)
    await runner.aadd_deployment(deployment)
    if stopping.is_set():
        return
    runner.handle_sigterm = request_stop  # Runner.start installs this as its SIGTERM handler
    serving = asyncio.create_task(runner.start())
    stopped = asyncio.create_task(stopping.wait())
    await asyncio.wait({serving, stopped}, return_when=asyncio.FIRST_COMPLETED)
    if not serving.done():
        # a stop while the runner is still starting (its client and API checks): let it finish
        # starting, as Runner.astop refuses a runner that has not started, then stop it
        deadline = loop.time() + _START_GRACE_S
        while not runner.started and not serving.done() and loop.time() < deadline:
            await asyncio.sleep(0.05)
        if runner.started:
            await runner.astop()
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
    stopped.cancel()


def next_runs(cron: str, timezone: str, n: int = 5, after: dt.datetime | None = None) -> list[dt.datetime]:
    """The next ``n`` times the cron schedule fires (Prefect's own schedule logic)."""
    from prefect.server.schemas.schedules import CronSchedule

    after = after or dt.datetime.now(dt.UTC)
    return list(asyncio.run(CronSchedule(cron=cron, timezone=timezone).get_dates(n=n, start=after)))
