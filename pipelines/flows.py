"""Prefect flows: ingest impressions for a day, and the daily REO run.

Wiring only: reading/writing is in :mod:`pipelines.adapters` and
:mod:`pipelines.warehouse`, SQL in ``sql/``, statistics in :mod:`transforms`.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import polars as pl
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from pipelines import db
from pipelines.adapters import IngestUnit, load_unit, units_for_day, window_start
from pipelines.config import FairmonConfig, load_config
from pipelines.warehouse import sync_duckdb, write_partitions
from transforms.contract import InputContractError
from transforms.reo_tables import GROUP_COUNTS_SCHEMA, reo_tables


class DayFailed(RuntimeError):
    """A day could not be computed; the message names the day, the stage and the input."""


def _fingerprint(path: Path) -> tuple[int, int]:
    if path.is_dir():  # Coat: the folder's files
        files = sorted(p for p in path.rglob("*") if p.is_file())
        return sum(p.stat().st_size for p in files), max((p.stat().st_mtime_ns for p in files), default=0)
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def _last_fingerprint(cfg: FairmonConfig, file: Path) -> tuple | None:
    with db.connect(cfg.duckdb_path) as con:
        db.execute(con, "ingest_log_create")
        seen = db.query(con, "ingest_log_lookup", file=str(file))
    return seen.row(0) if seen.height else None


def _replace_unit(cfg: FairmonConfig, unit: IngestUnit, staged: pl.DataFrame, size: int, mtime: int, fp: str) -> None:
    """Replace the unit's staged rows and record its fingerprint, in one transaction."""
    with db.connect(cfg.duckdb_path) as con:
        con.register("staged", staged)
        db.execute(con, "impressions_create")
        have = db.query(con, "impressions_columns").get_column("column_name").to_list()
        if have != staged.columns:
            raise InputContractError(
                f"the staging table in {cfg.duckdb_path} has columns {have}, but this config gives "
                f"{staged.columns}; use a separate duckdb path for a different set of attributes",
                file=str(unit.file),
            )
        with db.transaction(con):
            db.execute(con, "impressions_delete_unit", ds_start=unit.ds_start, ds=unit.ds_end, scope=unit.scope)
            db.execute(con, "impressions_insert")
            db.execute(
                con, "ingest_log_upsert", file=str(unit.file), size=size, mtime_ns=mtime, config_fp=fp,
                ds_start=unit.ds_start, ds=unit.ds_end, scope=unit.scope, rows=staged.height,
            )
        con.unregister("staged")


@task(name="stage-unit", cache_policy=NO_CACHE)
def stage_unit(cfg: FairmonConfig, unit: IngestUnit, force: bool = False) -> int:
    """Stage one file into the DuckDB ``impressions`` table, replacing its previous rows.

    Skipped (returns -1) when the file and the config are unchanged since it
    was last staged. Returns the number of rows staged. Raises
    :class:`InputContractError` on bad input; nothing is changed then.
    """
    logger = get_run_logger()
    t0 = time.perf_counter()
    size, mtime = _fingerprint(unit.file)
    fp = cfg.fingerprint()
    if not force and _last_fingerprint(cfg, unit.file) == (size, mtime, fp):
        logger.info("unchanged, skipped: %s", unit.file)
        return -1
    staged = load_unit(cfg, unit)
    _replace_unit(cfg, unit, staged, size, mtime, fp)
    logger.info("ingest %s: %d rows in, %d rows staged, %.2fs", unit.file, staged.height, staged.height,
                time.perf_counter() - t0)
    return staged.height


@flow(name="fairmon-ingest-impressions")
def ingest_impressions(config_path: str, ds: dt.date, force: bool = False) -> dict[str, int]:
    """Stage the impressions that day ``ds`` needs (its default traffic and the
    random traffic of its trailing window). Re-ingesting replaces. Returns
    {file: rows staged (-1 = unchanged, skipped)}."""
    cfg = load_config(config_path)
    return {str(u.file): stage_unit(cfg, u, force) for u in units_for_day(cfg, ds)}


@task(name="count-groups", cache_policy=NO_CACHE)
def count_groups(cfg: FairmonConfig, ds: dt.date) -> pl.DataFrame:
    """Per-group counts of day ``ds`` (sql/group_counts.sql). Raises
    :class:`DayFailed` when the day has no default traffic staged."""
    logger = get_run_logger()
    t0 = time.perf_counter()
    w0 = window_start(ds, cfg.impressions.random_window_days)
    with db.connect(cfg.duckdb_path) as con:
        totals = dict(db.query(con, "traffic_totals", ds=ds, window_start=w0).iter_rows())
        if not totals.get("default"):
            raise DayFailed(f"{ds}: stage counts: no default traffic staged for the day")
        counts = db.query(con, "group_counts", ds=ds, window_start=w0)
    counts = counts.cast(GROUP_COUNTS_SCHEMA).select(list(GROUP_COUNTS_SCHEMA))
    logger.info("counts: %d staged rows in, %d group rows out, %.2fs",
                sum(totals.values()), counts.height, time.perf_counter() - t0)
    return counts


@task(name="estimate-reo", cache_policy=NO_CACHE)
def estimate(cfg: FairmonConfig, counts: pl.DataFrame, ds: dt.date) -> tuple[pl.DataFrame, pl.DataFrame]:
    """REO per group and overall from the counts (transforms.reo_tables)."""
    logger = get_run_logger()
    t0 = time.perf_counter()
    est = cfg.estimation
    group, overall = reo_tables(counts, ds, ci_method=est.ci_method, level=est.confidence_level)
    logger.info("estimators: %d count rows in, %d reo rows out, %.3fs", counts.height, overall.height,
                time.perf_counter() - t0)
    return group, overall


@task(name="publish-day", cache_policy=NO_CACHE)
def publish(cfg: FairmonConfig, ds: dt.date, tables: dict[str, pl.DataFrame]) -> dict[str, str]:
    """Atomically replace the day's partitions, then mirror them into DuckDB."""
    logger = get_run_logger()
    t0 = time.perf_counter()
    paths = write_partitions(cfg.warehouse_path, ds, tables)
    with db.connect(cfg.duckdb_path) as con:
        sync_duckdb(con, ds, tables)
    logger.info("published %s in %.2fs", ", ".join(f"{k}={v.height}" for k, v in tables.items()),
                time.perf_counter() - t0)
    return {k: str(v) for k, v in paths.items()}


@flow(name="fairmon-daily")
def daily(config_path: str, ds: dt.date, force_ingest: bool = False) -> dict:
    """One day end to end: ingest -> counts -> estimators -> publish.

    Returns {ds, reo: rows of the reo table as dicts, paths}. Raises
    :class:`DayFailed` (naming day, stage and input); nothing is published then.
    """
    cfg = load_config(config_path)
    try:
        ingest_impressions(config_path, ds, force_ingest)
    except InputContractError as e:
        raise DayFailed(f"{ds}: stage ingest: {e}") from e
    counts = count_groups(cfg, ds)
    group, overall = estimate(cfg, counts, ds)
    paths = publish(cfg, ds, {"group_counts": counts, "reo_group": group, "reo": overall})
    return {"ds": ds, "reo": overall.to_dicts(), "paths": paths}
