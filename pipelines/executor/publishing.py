"""A day's way out: its partitions published atomically, the DuckDB views there, its run recorded.

What a run knows of its warehouse (the views it created) is a
:class:`WarehouseViews` the batch owns and passes to :func:`publish`: the
views read their partitions when queried, so a publish creates none again
and a backfill's cost does not grow with the square of its days.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from fairmon.pipelines.core import timing
from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.executor.outcomes import step
from fairmon.pipelines.ingest.sources import current_inputs
from fairmon.pipelines.ingest.staging import run_logger
from fairmon.pipelines.storage import db
from fairmon.pipelines.storage.warehouse import refresh_views, remove_partitions, write_partitions


class WarehouseViews:
    """What a run knows of its DuckDB file, valid while it holds the project
    lock: ``views`` ({view: SQL}) created by its refreshes
    (:func:`fairmon.pipelines.storage.warehouse.refresh_views`). Empty: the
    next refresh checks every view (and creates those the DuckDB file does
    not hold marked with the same SQL). A plain object, not a dataclass: an
    orchestrator that walks a step's arguments (Prefect looks for futures in
    dataclasses and dicts) passes it through whole."""

    __slots__ = ("views",)

    def __init__(self) -> None:
        self.views: dict[str, str] = {}


@step("publish-day")
def publish(
    cfg: FairmonConfig,
    ds: dt.date,
    tables: dict[str, pl.DataFrame],
    complete: bool = True,
    known: WarehouseViews | None = None,
) -> dict[str, str]:
    """Atomically replace day ``ds``'s partitions of ``tables`` in the
    config's warehouse; when the run ``complete``-ly publishes the day, also
    remove the day's partitions of tables it no longer produces. Then refresh
    the DuckDB views over the warehouse (:func:`refresh_run_views` with
    ``known``). Returns {table: partition path}. Raises OSError when a file
    cannot be written or removed (``known`` is forgotten first)."""
    log = run_logger()
    t0 = time.perf_counter()
    with timing.clock(ds, "writes"):
        try:
            paths = write_partitions(cfg.warehouse_path, ds, tables)
            if complete:
                removed = remove_partitions(cfg.warehouse_path, ds, set(tables))
                if removed:
                    log.info("publish %s: removed partitions of tables this run does not produce: %s", ds, removed)
        except BaseException:
            forget_warehouse(known)  # the next refresh checks every view again
            raise
        refresh_run_views(cfg, ds, known)
    log.info(
        "publish %s: %d rows out (%s), %.2fs",
        ds,
        sum(v.height for v in tables.values()),
        ", ".join(f"{k}={v.height}" for k, v in tables.items()),
        time.perf_counter() - t0,
    )
    return {k: str(v) for k, v in paths.items()}


def refresh_run_views(cfg: FairmonConfig, ds: dt.date | None = None, known: WarehouseViews | None = None) -> None:
    """Create the DuckDB views over the config's warehouse
    (:func:`fairmon.pipelines.storage.warehouse.refresh_views`) that the
    refreshes ``known`` records have not created (None: nothing recorded:
    every view is checked). ``ds``: the day just published; None (the run has just taken the
    project lock, another process may have written meanwhile): what ``known``
    held is forgotten first. Once a run has created its views, a publish
    does not open the DuckDB file for them: they read the partitions when
    queried. Raises what DuckDB raises."""
    if ds is None:
        forget_warehouse(known)
    elif known is not None and known.views:
        return
    with db.connect(cfg.duckdb_path) as con:
        refresh_views(con, cfg.warehouse_path, None if known is None else known.views)


def forget_warehouse(known: WarehouseViews | None) -> None:
    """Forget the views ``known`` records as created, so that the next
    refresh checks them all again (creating those not marked with the same
    SQL in the DuckDB file): after the run takes the project lock
    (another process may have written meanwhile) or a publish that failed
    partway."""
    if known is not None:
        known.views.clear()


def start_record(
    cfg: FairmonConfig, config_path: str, run_id: str, ds: dt.date, params: dict
) -> tuple[str, Exception | None]:
    """Record day ``ds``'s run ``run_id`` in ``runs`` as 'running', started
    now, with ``params`` and the inputs the day needs now (file identities and
    fingerprints, :func:`fairmon.pipelines.ingest.sources.current_inputs`).
    The record is written even when the inputs cannot be listed (a pool file
    named with an impossible date): every attempt is recorded before it can
    fail, so a failed latest attempt unpublishes the day (DESIGN §3).
    ``config_path`` is recorded absolute (as the orchestrated runs' parameters
    are), so runs started from different folders name the same file alike.
    Returns (the inputs as recorded, JSON, for :func:`finish_record`; the
    listing's error or None). Raises what DuckDB raises."""
    started = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    listing: Exception | None = None
    try:
        inputs = json.dumps(current_inputs(cfg, ds), default=str)
    except Exception as e:  # recorded as the day's failure by the caller
        inputs, listing = "[]", e
    with db.connect(cfg.duckdb_path) as con:
        db.ensure(con, ("runs_create", "runs_migrate"))
        db.execute(
            con,
            "runs_start",
            run_id=run_id,
            ds=ds,
            started_at=started,
            config_path=str(Path(config_path).resolve()) if config_path else "",  # the file, wherever run from
            config_fp=cfg.fingerprint(),
            params=json.dumps(params, default=str),
            inputs=inputs,
        )
    return inputs, listing


def finish_record(
    cfg: FairmonConfig,
    run_id: str,
    ds: dt.date,
    recorded: str,
    status: str,
    detail: str,
    outputs: dict[str, int],
    timings: dict,
) -> None:
    """Close run ``run_id``'s record (status, detail, outputs, timings; its
    inputs, ``recorded`` by :func:`start_record`, gain the file rows each
    staged); a published day ``ds`` is no longer stale. Raises what DuckDB raises."""
    with db.connect(cfg.duckdb_path) as con:
        db.ensure(con, ("stale_create", "ingest_log_create", "ingest_log_migrate"))
        inputs = json.loads(recorded)
        staged = dict(db.rows(con, "ingest_log_rows", files=[i["file"] for i in inputs]))
        inputs = [{**i, "rows": staged.get(i["file"])} for i in inputs]
        db.execute(
            con,
            "runs_finish",
            run_id=run_id,
            status=status,
            detail=detail,
            inputs=json.dumps(inputs, default=str),
            outputs=json.dumps(outputs),
            timings=json.dumps(timings),
        )
        if status == "published":
            db.execute(con, "stale_clear", ds=ds)


def record_refused(
    cfg: FairmonConfig, config_path: str, refused: dict[dt.date, list], then: Callable | None = None
) -> Any:
    """Record each day of ``refused`` (day -> the pre-flight's findings that
    stopped it, :class:`fairmon.pipelines.ingest.preflight.Finding`) as a run
    that was quarantined at once, and replace its ``dq_results`` partition by
    the findings (:func:`fairmon.pipelines.ingest.preflight.preflight_results`),
    so that a day published before and refused now leaves the ``*_published``
    views (its latest attempt did not publish, DESIGN §3) and its dq_results
    say why: a stale "passing" must not outlive a file that went missing. The
    findings' rows are fairmon's own, not checked by GX (a refusal answers
    before GX is imported). Then, still under the lock,
    ``then(cfg)`` (the CLI brings the alerts up to date: a ``quarantined``
    alert), whose result is returned (None without ``then``). Takes the
    project lock without waiting and imports neither Prefect nor GX (but
    what ``then`` imports). Raises
    :class:`fairmon.pipelines.storage.locking.RunLockedError` when another
    process holds the project, what DuckDB raises."""
    import uuid

    from fairmon.pipelines.checks.suites import dq_frame
    from fairmon.pipelines.core.config import check_paths
    from fairmon.pipelines.ingest.preflight import preflight_results, preflight_summary
    from fairmon.pipelines.storage.locking import project_lock

    check_paths(cfg)
    with project_lock(cfg.duckdb_path, cfg.warehouse_path):
        for ds, found in refused.items():
            run_id = uuid.uuid4().hex
            recorded, _ = start_record(cfg, config_path, run_id, ds, {"ds": ds, "stage": "preflight"})
            dq = dq_frame(ds, preflight_results(found)).with_columns(pl.lit(run_id).alias("run_id"))
            publish(cfg, ds, {"dq_results": dq}, False)
            finish_record(cfg, run_id, ds, recorded, "quarantined", preflight_summary(ds, found)["error"], {}, {})
        return then(cfg) if then is not None else None
