"""Running days in process: a range of days (prestaged in chunks, each chunk a batch), or one day.

This is the loop every command runs days through (``fairmon run``,
``fairmon backfill``, the demo, the scheduled job, bench/): Prefect's
runner (:mod:`fairmon.pipelines.orchestration.runner`) calls it with hooks
that make the days Prefect runs; called with the default hooks it needs no
Prefect API and starts no server.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from fairmon.pipelines.checks.gate import build_docs, gate_for, prune_gx
from fairmon.pipelines.checks.preload import preload_gate, thaw
from fairmon.pipelines.core.config import FairmonConfig, check_paths, check_writable, load_config
from fairmon.pipelines.core.run import Run, ensure_run
from fairmon.pipelines.executor.alerting import AlertsUpdate, update_alerts_logged
from fairmon.pipelines.executor.batch import Batch, configured_inputs, execute
from fairmon.pipelines.executor.outcomes import Hooks
from fairmon.pipelines.executor.publishing import WarehouseViews, refresh_run_views
from fairmon.pipelines.ingest.snapshots import read_snapshot
from fairmon.pipelines.ingest.staging import ingest_source, prestage_impressions, run_logger
from fairmon.pipelines.storage import db
from fairmon.pipelines.storage.locking import project_lock
from fairmon.pipelines.storage.ownership import claim_duckdb, claim_warehouse
from fairmon.pipelines.storage.warehouse import clean_tmp

#: Days prestaged together, and run as one batch, in a range (:func:`run_days`):
#: a quarter's files profiled and staged at once; memory follows this, not the
#: range's length. Each chunk pays fixed costs (one GX run per suite, ~1.2 s):
#: 31-day chunks made a year's backfill 86 s, 92-day chunks 74 s at 0.89 GB peak.
PRESTAGE_DAYS = 92
#: The same on Spark, whose clustered profiles are split by bucket (up to ~9x
#: more rows than DuckDB's two grouping sets, profiles.profile_rows): a month.
PRESTAGE_DAYS_SPLIT = 31


@contextmanager
def docs_deferred(run: Run) -> Iterator[None]:
    """Build Data Docs once when the block ends (a range of days) instead of
    once per day: each build re-renders the index, about 0.35 s a day. GX's
    old files are pruned first (``[gx] keep_days``)."""
    run.docs_deferred = True
    try:
        yield
    finally:
        run.docs_deferred = False
        try:
            prune_gx(run.cfg.gx_root, run.cfg.gx.keep_days)  # [gx] keep_days: GX's files do not grow without end
            gate_for(run.cfg).build_docs()
        finally:
            thaw()  # the collector's freeze while GX loaded ends with the run


def run_days(
    cfg: FairmonConfig,
    days: list[dt.date],
    *,
    config_path: str = "",
    force_ingest: bool = False,
    concurrency: int = 1,
    wait_seconds: float = 0.0,
    on_prestage: Callable[[dict], None] | None = None,
    on_day: Callable[[Any], None] | None = None,
    prestage_days: int | None = None,
    hooks: Hooks | None = None,
    on_alerts: Callable[[AlertsUpdate | None], None] | None = None,
) -> list[Any]:
    """Run ``days`` of config ``cfg`` (its path ``config_path``, for the run
    records) in the current run, or in a run of their own.

    Holds the project lock (waiting up to ``wait_seconds`` for another
    process) and one DuckDB connection throughout; Data Docs are built once
    at the end. A range of more than one day is prestaged (one profile scan,
    staging transaction and count) in chunks of at most ``prestage_days``
    consecutive days (default :data:`PRESTAGE_DAYS`, on Spark
    :data:`PRESTAGE_DAYS_SPLIT`), each just before its days run as one batch
    (:func:`fairmon.pipelines.executor.batch.execute`; ``concurrency`` days'
    per-day units at a time). ``on_prestage`` receives each chunk's prestage
    figures ({files, staged, ingest, checks, counts}); ``on_day`` each day's
    outcome as it finishes. ``hooks``: how each unit runs (default: in
    process, no Prefect). After the days, the project's alerts are brought
    up to date (:func:`fairmon.pipelines.executor.alerting.update_alerts`,
    still under the lock; never raising) and handed to ``on_alerts``.

    Returns one outcome per day, in day order: with the default hooks the
    day's summary {ds, status: published | quarantined | failed, ...the
    day's result (:func:`fairmon.pipelines.executor.batch.finish_day`), or
    error}. A day's own failure never stops the others. Raises
    :class:`fairmon.pipelines.storage.locking.RunLockedError` when another
    process holds the project longer than ``wait_seconds``,
    :class:`fairmon.pipelines.storage.ownership.WarehouseOwnedError` when the warehouse or the
    DuckDB file belongs to another project, ValueError when a run of another config is in scope,
    :class:`fairmon.pipelines.core.config.ConfigError` when the warehouse or
    the DuckDB file is not what the config says or cannot be written.
    """
    hooks = hooks or Hooks()
    check_paths(cfg)  # what is on disk now: a CSV named as duckdb, a file as warehouse
    check_writable(cfg)  # a read-only warehouse or DuckDB folder: refused before anything is written
    path = cfg.duckdb_path
    results: dict[dt.date, Any] = {}
    with (
        ensure_run(cfg, config_path) as run,
        project_lock(path, cfg.warehouse_path, wait_seconds) as fresh,
        db.session(path),
        docs_deferred(run),
    ):
        # another project's warehouse is refused before anything is written
        claim_warehouse(cfg.warehouse_path, cfg.project_name, cfg.project.name is not None, run.config_path)
        claim_duckdb(cfg.duckdb_path, cfg.warehouse_path, cfg.project_name)  # and another project's DuckDB file
        batch = Batch(run.cfg, run.config_path, force_ingest, hooks, WarehouseViews(), max(1, concurrency))
        if fresh:  # nothing else writes this warehouse now: a killed run's leftovers can go
            clean_tmp(cfg.warehouse_path, older_than_s=0)
            try:
                refresh_run_views(cfg, None, batch.known)  # views over what the warehouse holds now
            except Exception as e:  # each day records it when its publish refreshes them again
                run_logger().warning("refreshing the views failed (%s: %s)", type(e).__name__, e)
        preload_gate(cfg)  # GX imports while whatever the hooks start starts
        if prestage_days is None:
            prestage_days = PRESTAGE_DAYS_SPLIT if cfg.engine == "spark" else PRESTAGE_DAYS
        step = max(1, prestage_days)
        chunks = [days[i : i + step] for i in range(0, len(days), step)]

        def prestage(chunk: list[dt.date]) -> None:
            try:
                pre = prestage_impressions(cfg, chunk, force_ingest)
            except Exception as e:  # the days stage their own files, and each records what stops it
                run_logger().warning("prestaging %s..%s failed (%s: %s)", chunk[0], chunk[-1], type(e).__name__, e)
                return
            if on_prestage is not None:
                on_prestage(pre)

        wait = hooks.start()  # e.g. Prefect's temporary server starts (seconds) while the range is prestaged
        try:
            if days:
                prestage(chunks[0])
        finally:
            wait()  # raises what starting raised

        def body() -> list[Any]:
            for k, chunk in enumerate(chunks):
                if k:
                    prestage(chunk)
                for ds, out in zip(chunk, execute(batch, chunk), strict=True):
                    results[ds] = out
                    if on_day is not None:
                        on_day(out)
            return [results[d] for d in days]

        out = hooks.around(days, body)
        update = update_alerts_logged(run.cfg, batch.known)
        if on_alerts is not None:
            on_alerts(update)
        return out


def run_day(config: FairmonConfig | str, ds: dt.date, *, force_ingest: bool = False) -> dict:
    """Day ``ds`` of ``config`` (a loaded config or the path of one) in
    process, with no Prefect API and no server: ingest -> counts -> checks
    -> estimators -> checks -> publish, gated, its run recorded in ``runs``.
    ``force_ingest`` re-stages its files even when unchanged. Returns the
    day's summary {ds, status: published | quarantined | failed, ...the
    day's result, or error} (:func:`run_days`). Raises
    :class:`fairmon.pipelines.storage.locking.RunLockedError` when another
    process holds the project, and what loading the config raises."""
    cfg = config if isinstance(config, FairmonConfig) else load_config(config)
    path = "" if isinstance(config, FairmonConfig) else str(config)
    (summary,) = run_days(cfg, [ds], config_path=path, force_ingest=force_ingest)
    return summary


def ingest_day(
    cfg: FairmonConfig, ds: dt.date, force: bool = False, config_path: str = "", stage: Callable | None = None
) -> list:
    """Validate and stage every configured input that day ``ds`` needs (for
    impressions: its default traffic and the random traffic of its trailing
    window; scores and labels: the days of their windows; a reach snapshot is
    checked, never staged), in process: ``fairmon ingest``, and the body of
    the Prefect flow of the same name (``stage``: its task form of
    :func:`fairmon.pipelines.ingest.staging.stage_unit`; None: plain calls).
    Re-ingesting replaces. Returns one
    :class:`fairmon.pipelines.checks.suites.DQResult` per file. Raises what
    staging raises."""
    with ensure_run(cfg, config_path):
        results = [
            r
            for name in configured_inputs(cfg)
            for r in (
                read_snapshot(cfg, ds, gate_for(cfg), str(ds))[1]
                if name == "reach"
                else ingest_source(cfg, name, ds, force, stage)
            )
        ]
        build_docs(cfg)
    return results
