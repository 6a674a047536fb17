"""Running days in process: a range of days (in batches of consecutive days), or one day.

This is the loop every command runs days through (``fairmon run``,
``fairmon backfill``, the demo, the scheduled job, bench/): Prefect's
runner (:mod:`fairmon.pipelines.orchestration.runner`) calls it with hooks
that make the days Prefect runs; called with the default hooks it needs no
Prefect API and starts no server.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from fairmon.pipelines.checks.gate import build_docs, gate_for, prune_gx
from fairmon.pipelines.checks.preload import preload_gate, thaw
from fairmon.pipelines.core.config import FairmonConfig, check_paths, check_writable, load_config
from fairmon.pipelines.core.run import Run, ensure_run
from fairmon.pipelines.executor.alerting import AlertsUpdate, update_alerts_logged
from fairmon.pipelines.executor.batch import Batch, execute
from fairmon.pipelines.executor.outcomes import Hooks
from fairmon.pipelines.executor.publishing import WarehouseViews, refresh_run_views
from fairmon.pipelines.ingest.snapshots import read_snapshot
from fairmon.pipelines.ingest.sources import configured_inputs
from fairmon.pipelines.ingest.staging import ingest_days, run_logger
from fairmon.pipelines.storage import db
from fairmon.pipelines.storage.locking import project_lock
from fairmon.pipelines.storage.ownership import claim_duckdb, claim_warehouse
from fairmon.pipelines.storage.warehouse import clean_tmp

#: Days run as one batch in a range (:func:`run_days`): a quarter's files
#: profiled, staged and counted at once; memory follows this, not the range's
#: length, and each batch pays fixed costs (one GX run per suite; bench/README.md).
BATCH_DAYS = 92
#: The same on Spark, whose clustered profiles are split by bucket (up to ~9x
#: more rows than DuckDB's two grouping sets, profiles.profile_rows): a month.
BATCH_DAYS_SPLIT = 31


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


class LibraryExitError(RuntimeError):
    """A library called ``sys.exit`` inside a run (fairmon's executor never
    does): raised in its place by :func:`run_days`, so the run fails with
    its exit code instead of ending the process as a success with its days
    unpublished. Names the code and the file and line that raised it."""

    def __init__(self, e: SystemExit):
        tb = e.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        where = "unknown code" if tb is None else f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
        super().__init__(f"sys.exit({e.code!r}) called by {where} inside the run; the run stopped there")


def _no_library_exit(fn: Callable) -> Callable:
    """``fn`` with a ``SystemExit`` raised anywhere inside it (its days, or
    the cleanup of its run, lock and Data Docs) raised as
    :class:`LibraryExitError`."""

    @functools.wraps(fn)
    def guarded(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except SystemExit as e:
            raise LibraryExitError(e) from e

    return guarded


@_no_library_exit
def run_days(
    cfg: FairmonConfig,
    days: list[dt.date],
    *,
    config_path: str = "",
    force_ingest: bool = False,
    concurrency: int = 1,
    wait_seconds: float = 0.0,
    on_batch: Callable[[dict], None] | None = None,
    on_day: Callable[[Any], None] | None = None,
    batch_days: int | None = None,
    hooks: Hooks | None = None,
    on_alerts: Callable[[AlertsUpdate | None], None] | None = None,
) -> list[Any]:
    """Run ``days`` of config ``cfg`` (its path ``config_path``, for the run
    records) in the current run, or in a run of their own.

    Holds the project lock (waiting up to ``wait_seconds`` for another
    process) and one DuckDB connection throughout; Data Docs are built once
    at the end. The days run in batches of at most ``batch_days``
    consecutive days (default :data:`BATCH_DAYS`, on Spark
    :data:`BATCH_DAYS_SPLIT`), each with one ingest (one profile scan and
    staging transaction) and one count
    (:func:`fairmon.pipelines.executor.batch.execute`; ``concurrency`` days'
    per-day units at a time). ``on_batch`` receives each batch's ingest and
    count figures ({files, staged, ingest, checks, counts}); ``on_day`` each day's
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
    the DuckDB file is not what the config says or cannot be written,
    :class:`LibraryExitError` when a library called ``sys.exit`` inside the run.
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
        batch = Batch(run.cfg, run.config_path, force_ingest, hooks, WarehouseViews(), max(1, concurrency), on_batch)
        if fresh:  # nothing else writes this warehouse now: a killed run's leftovers can go
            clean_tmp(cfg.warehouse_path, older_than_s=0)
            try:
                refresh_run_views(cfg, None, batch.known)  # views over what the warehouse holds now
            except Exception as e:  # each day records it when its publish refreshes them again
                run_logger().warning("refreshing the views failed (%s: %s)", type(e).__name__, e)
        preload_gate(cfg)  # GX imports while whatever the hooks start starts
        if batch_days is None:
            batch_days = BATCH_DAYS_SPLIT if cfg.engine == "spark" else BATCH_DAYS
        step = max(1, batch_days)
        hooks.start()  # e.g. Prefect's temporary server, while GX imports

        def body() -> list[Any]:
            for chunk in (days[i : i + step] for i in range(0, len(days), step)):
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
    cfg: FairmonConfig, ds: dt.date, force: bool = False, config_path: str = "", step: Callable | None = None
) -> list:
    """Validate and stage every configured input that day ``ds`` needs (for
    impressions: its default traffic and the random traffic of its trailing
    window; scores and labels: the days of their windows; a reach snapshot is
    checked, never staged), in process: ``fairmon ingest``, and the body of
    the Prefect flow of the same name (``step(fn, *args)``: how the ingest of
    each input runs, e.g. as a Prefect task; None: a plain call), through the
    same ingest as a run's (:func:`fairmon.pipelines.ingest.staging.ingest_days`).
    Re-ingesting replaces. Returns one
    :class:`fairmon.pipelines.checks.suites.DQResult` per file. Raises
    :class:`fairmon.transforms.contract.InputContractError` for a file that
    breaks its input contract, and what staging raises."""
    step = step or (lambda fn, *args: fn(*args))
    results = []
    with ensure_run(cfg, config_path):
        for name in (kind.source for kind in configured_inputs(cfg)):
            if name == "reach":
                results += read_snapshot(cfg, ds, gate_for(cfg), str(ds))[1]
                continue
            got = step(ingest_days, cfg, [ds], name, force)[ds]
            if isinstance(got, Exception):
                raise got
            results += got
        build_docs(cfg)
    return results
