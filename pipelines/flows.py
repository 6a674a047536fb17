"""Prefect flows: ingest a day's inputs, and the gated daily run.

Wiring only: reading/writing is in :mod:`fairmon.pipelines.ingest.adapters` and
:mod:`fairmon.pipelines.storage.warehouse`, data-quality suites in :mod:`fairmon.pipelines.quality`
and ``expectations/``, SQL in ``sql/``, statistics in :mod:`fairmon.transforms`.

A day's run, for each configured input (impressions, scores, labels): ingest
(raw suite per file, then staging) -> counts -> checks -> estimators (REO and
A/B; prevalence at the threshold; SDT) -> output suites -> publish. A critical
data-quality failure quarantines the day: its metric partitions are left as
they were (not re-published), its ``dq_results`` partition records why, and
the flow ends in a failed state (:class:`DayQuarantined`) naming the failed
expectations. Every run is recorded in the ``runs`` table.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import polars as pl
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import MissingContextError

from fairmon.pipelines import timing
from fairmon.pipelines.config import FairmonConfig, load_config
from fairmon.pipelines.ingest.adapters import (
    IngestUnit,
    file_fingerprint,
    log_units_for_day,
    normalize_log_unit,
    normalize_unit,
    prefetch_profiles,
    read_log_unit,
    read_unit,
    rows_in,
    units_for_day,
    window_start,
)
from fairmon.pipelines.quality import DQResult, QualityGate, dq_frame
from fairmon.pipelines.storage import db
from fairmon.pipelines.storage.locking import run_lock
from fairmon.pipelines.storage.warehouse import sync_duckdb, write_partitions
from fairmon.transforms.contract import InputContractError
from fairmon.transforms.decision_tables import sdt_table, threshold_tables
from fairmon.transforms.quality import day_check_frame, group_counts_check_frame, raw_check_frame, reo_check_frame
from fairmon.transforms.reo_tables import GROUP_COUNTS_SCHEMA, ab_pairs, reo_ab_table, reo_tables


def _logger() -> logging.Logger | logging.LoggerAdapter:
    """Prefect's run logger inside a flow or task run; the ``fairmon`` logger
    when a task's function is called directly (``task.fn``, as bench/ does)."""
    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger("fairmon")


class DayFailed(RuntimeError):
    """A day could not be computed; the message names the day, the stage and the input."""


class DayQuarantined(RuntimeError):
    """A critical data-quality expectation failed; the message names it."""


_GATES: dict[Path, QualityGate] = {}
_GATES_LOCK = threading.Lock()


def gate_for(cfg: FairmonConfig) -> QualityGate:
    """One GX context per project folder and process (creating one costs seconds;
    two would race on the same files when a backfill runs days in threads)."""
    root = cfg.gx_root.resolve()
    with _GATES_LOCK:
        if root not in _GATES:
            _GATES[root] = QualityGate(root, dict(cfg.quality.severity))
        _GATES[root].severity = dict(cfg.quality.severity)
        return _GATES[root]


_DOCS_DEFERRED: set[Path] = set()


def build_docs(cfg: FairmonConfig) -> Path:
    """Render the validations run so far into GX Data Docs (unless a
    :func:`docs_deferred` block is open). Returns the Data Docs index page."""
    gate = gate_for(cfg)
    with _GATES_LOCK:
        deferred = cfg.gx_root.resolve() in _DOCS_DEFERRED
    return gate.data_docs_index if deferred else gate.build_docs()


@contextmanager
def docs_deferred(cfg: FairmonConfig) -> Iterator[None]:
    """Build Data Docs once when the block ends (a backfill) instead of once
    per day: each build re-renders the index, about 0.35 s a day."""
    root = cfg.gx_root.resolve()
    with _GATES_LOCK:
        _DOCS_DEFERRED.add(root)
    try:
        yield
    finally:
        with _GATES_LOCK:
            _DOCS_DEFERRED.discard(root)
            gate = _GATES.get(root)
        if gate is not None:
            gate.build_docs()


def start_api() -> None:
    """Reach the Prefect API from the calling thread, starting Prefect's
    temporary local server when no PREFECT_API_URL is set. Called from the
    main thread before days run in worker threads: threads that each start
    the server race, and the loser's server outlives the process."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        client.api_healthcheck()


def preload_gate(cfg: FairmonConfig) -> threading.Thread:
    """Create the GX context in a background thread (importing GX takes
    seconds) while the caller starts Prefect; :func:`gate_for` then waits for
    it. Returns the started thread."""
    t = threading.Thread(target=gate_for, args=(cfg,), name="fairmon-gx-preload", daemon=True)
    t.start()
    return t


@dataclass(frozen=True)
class InputSource:
    """How one input (impressions, scores or labels) is read, checked and staged."""

    name: str  # staging table and sql/<name>_*.sql prefix
    suite: str
    params: dict
    text_columns: list[str]
    read: Callable[[IngestUnit], pl.DataFrame]
    normalize: Callable[[IngestUnit, pl.DataFrame], pl.DataFrame]
    delete_params: Callable[[IngestUnit], dict]


def input_source(cfg: FairmonConfig, name: str) -> InputSource:
    """The :class:`InputSource` of ``name`` under ``cfg``. Raises ValueError for an unknown name."""
    if name == "impressions":
        imp = cfg.impressions
        return InputSource(
            "impressions",
            "impressions_raw",
            {
                "required_columns": ["ds", "traffic", "arm", *imp.signals, *imp.attributes],
                "signals": imp.signals,
                "attributes": imp.attributes,
                "traffic_values": ["default", "random", *imp.traffic_stages],
            },
            ["ds", "traffic", *imp.signals],
            lambda u: read_unit(cfg, u),
            lambda u, raw: normalize_unit(cfg, u, raw),
            lambda u: {"ds_start": u.ds_start, "ds": u.ds_end, "scope": u.scope},
        )
    if name in ("scores", "labels"):
        sc = getattr(cfg, name)
        cols = (
            ["ds", "model", "item_id", "score", "outcome"]
            if name == "scores"
            else ["ds", "item_id", "labeler_id", "label", "gold_label"]
        )
        text = ["ds", "score", "outcome"] if name == "scores" else ["ds", "label", "gold_label"]
        return InputSource(
            name,
            f"{name}_raw",
            {"required_columns": [*cols, *sc.attributes], "attributes": sc.attributes},
            text,
            lambda u: read_log_unit(cfg, name, u),
            lambda u, raw: normalize_log_unit(cfg, name, u, raw),
            lambda u: {"file": str(u.file)},
        )
    raise ValueError(f"unknown input {name!r}")


def _raw_suite(cfg: FairmonConfig, src: InputSource, unit: IngestUnit, raw: pl.DataFrame, run_name: str) -> DQResult:
    """The input's raw suite on one file as read (or its profile)."""
    return gate_for(cfg).validate(
        src.suite, raw_check_frame(raw, src.text_columns), src.params, str(unit.file), run_name
    )


def _unchanged(cfg: FairmonConfig, file: Path) -> dict | None:
    """The file's ingest_log row when it was staged as it is now (same size,
    mtime and config), else None."""
    with db.connect(cfg.duckdb_path) as con:
        db.execute(con, "ingest_log_create")
        seen = db.query(con, "ingest_log_lookup", file=str(file))
    if not seen.height:
        return None
    row = seen.row(0, named=True)
    same = (row["size"], row["mtime_ns"], row["config_fp"]) == (*file_fingerprint(file), cfg.fingerprint())
    return row if same else None


@dataclass(frozen=True)
class Staged:
    """One unit ready to stage: its parsed rows, file rows, fingerprint and raw-suite result."""

    unit: IngestUnit
    staged: pl.DataFrame
    rows: int
    size: int
    mtime: int
    dq: DQResult


_GENERATION: dict[str, int] = {}  # DuckDB file -> number of staging writes in this process
_RANGE_COUNTS: dict[tuple[str, dt.date], tuple[int, pl.DataFrame, pl.DataFrame]] = {}
_COUNTS_LOCK = threading.Lock()


def _replace_units(cfg: FairmonConfig, src: InputSource, batch: list[Staged]) -> None:
    """Replace the staged rows of every unit in ``batch`` and record their
    fingerprints and file rows, in one transaction (one insert for all)."""
    if not batch:
        return
    staged = pl.concat([b.staged for b in batch], how="vertical_relaxed")
    fp = cfg.fingerprint()
    with db.connect(cfg.duckdb_path) as con:
        con.register("staged", staged)
        db.execute(con, "ingest_log_create")  # also on a first run with force_ingest
        db.execute(con, f"{src.name}_create")
        have = db.relation(con, f"{src.name}_head").columns
        if have != staged.columns:
            raise InputContractError(
                f"the staging table {src.name} in {cfg.duckdb_path} has columns {have}, but this config gives "
                f"{staged.columns} (a different set of attributes, or a file from an earlier fairmon version): "
                f"use a separate duckdb path",
                file=str(batch[0].unit.file),
            )
        with db.transaction(con):
            for b in batch:
                db.execute(con, f"{src.name}_delete_unit", **src.delete_params(b.unit))
            db.execute(con, f"{src.name}_insert")
            for b in batch:
                u = b.unit
                db.execute(
                    con,
                    "ingest_log_upsert",
                    file=str(u.file),
                    source=src.name,
                    size=b.size,
                    mtime_ns=b.mtime,
                    config_fp=fp,
                    ds_start=u.ds_start,
                    ds=u.ds_end,
                    scope=u.scope,
                    rows=b.rows,
                    dq=json.dumps({"n_expectations": b.dq.n_expectations, "failures": b.dq.failures}, default=str),
                )
        con.unregister("staged")
    with _COUNTS_LOCK:  # counts computed before this write no longer hold
        key = str(cfg.duckdb_path.resolve())
        _GENERATION[key] = _GENERATION.get(key, 0) + 1


def _count_range(cfg: FairmonConfig, days: list[dt.date]) -> None:
    """Count every day of ``days`` in one statement each (group counts and
    traffic totals over min..max) and keep them for :func:`count_groups`,
    valid until the next staging write."""
    key = str(cfg.duckdb_path.resolve())
    with db.connect(cfg.duckdb_path) as con:
        if db.query(con, "impressions_exists").item() == 0:
            return
        rng = {"first": min(days), "last": max(days), "window_days": cfg.impressions.random_window_days}
        counts = db.query(con, "group_counts", **rng)
        with timing.within("checks"):  # the totals exist to check the counts
            totals = db.query(con, "traffic_totals", **rng)
    with _COUNTS_LOCK:
        gen = _GENERATION.get(key, 0)
        for ds in days:
            _RANGE_COUNTS[(key, ds)] = (
                gen,
                counts.filter(pl.col("ds") == ds),
                totals.filter(pl.col("ds") == ds).drop("ds"),
            )


def clear_range_counts() -> None:
    """Drop range counts no day took (end of a backfill)."""
    with _COUNTS_LOCK:
        _RANGE_COUNTS.clear()


def _take_range_counts(cfg: FairmonConfig, ds: dt.date) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    key = str(cfg.duckdb_path.resolve())
    with _COUNTS_LOCK:
        hit = _RANGE_COUNTS.pop((key, ds), None)
        return hit[1:] if hit and hit[0] == _GENERATION.get(key, 0) else None


def prestage_impressions(cfg: FairmonConfig, days: list[dt.date], force: bool = False) -> dict:
    """Before a backfill of ``days``: profile every impressions file those
    days need (new or changed; all with ``force``) in one DuckDB scan per
    schema, check each with its raw suite, stage the good ones in one
    transaction and count all the days in one statement. Each day's run then
    finds its files staged and its counts ready; if anything is staged in
    between, the day counts again. Files that cannot be read or fail their
    suite are left to the days' own runs, which report them.

    Returns {files, staged, ingest, checks, counts}: files profiled, files
    staged, and wall seconds per stage.
    """
    out = {"files": 0, "staged": 0, "ingest": 0.0, "checks": 0.0, "counts": 0.0}
    if cfg.impressions is None or not days:
        return out
    units: dict[Path, IngestUnit] = {}
    for ds in days:
        try:
            units.update({u.file: u for u in units_for_day(cfg, ds)})
        except InputContractError:
            continue
    todo = [u for f, u in units.items() if force or not _unchanged(cfg, f)]
    src = input_source(cfg, "impressions")
    book = (cfg.duckdb_path, "prestage")
    timing.start(*book)
    with timing.clock(*book, "ingest"):
        out["files"] = prefetch_profiles(cfg, [u.file for u in todo])
        batch = []
        for u in todo:
            try:
                raw = src.read(u)
                size, mtime = file_fingerprint(u.file)
                with timing.within("checks"):
                    dq = _raw_suite(cfg, src, u, raw, f"{min(days)}_{max(days)}")
                if dq.success:
                    batch.append(Staged(u, src.normalize(u, raw), rows_in(raw), size, mtime, dq))
            except InputContractError:
                continue
        _replace_units(cfg, src, batch)
        out["staged"] = len(batch)
    with timing.clock(*book, "counts"):
        _count_range(cfg, days)
    return out | {k: v for k, v in timing.take(*book).items() if k in out}


@task(name="stage-unit", cache_policy=NO_CACHE)
def stage_unit(cfg: FairmonConfig, source: str, unit: IngestUnit, run_name: str, force: bool = False) -> DQResult:
    """Validate one file of input ``source`` with its raw suite and, if no
    critical expectation failed, stage it into the DuckDB table of that name
    (replacing the file's previous rows). An unchanged file (same size, mtime
    and config) is not read again; its recorded result is returned.

    Returns the file's :class:`DQResult`. Raises :class:`InputContractError`
    when a file that passed the suite still cannot be parsed.
    """
    logger = _logger()
    src = input_source(cfg, source)
    t0 = time.perf_counter()
    with timing.clock(cfg.duckdb_path, run_name, "ingest"):
        size, mtime = file_fingerprint(unit.file)
        seen = None if force else _unchanged(cfg, unit.file)
        if seen:
            logger.info(
                "ingest %s: unchanged since staged (%d rows), skipped, %.2fs",
                unit.file,
                seen["rows"],
                time.perf_counter() - t0,
            )
            prev = json.loads(seen["dq"] or "{}")
            return DQResult(source, src.suite, str(unit.file), prev.get("n_expectations", 0), prev.get("failures", []))
        raw = src.read(unit)
    with timing.clock(cfg.duckdb_path, run_name, "checks"):
        dq = _raw_suite(cfg, src, unit, raw, run_name)
    if not dq.success:
        logger.warning("ingest %s: %d rows in, not staged: %s", unit.file, rows_in(raw), dq.summary())
        return dq
    with timing.clock(cfg.duckdb_path, run_name, "ingest"):
        staged = src.normalize(unit, raw)
        _replace_units(cfg, src, [Staged(unit, staged, rows_in(raw), size, mtime, dq)])
    logger.info(
        "ingest %s: %d rows in, %d staged, %.2fs", unit.file, rows_in(raw), staged.height, time.perf_counter() - t0
    )
    return dq


def _units(cfg: FairmonConfig, source: str, ds: dt.date) -> list[IngestUnit]:
    if source == "impressions":
        units = units_for_day(cfg, ds)
        if not any(u.scope != "random" for u in units):
            _logger().warning("%s: no default-traffic file matches %s", ds, cfg.resolve(cfg.impressions.path))
        return units
    return log_units_for_day(cfg, source, ds)


def _ingest(cfg: FairmonConfig, source: str, ds: dt.date, force: bool) -> list[DQResult]:
    return [stage_unit(cfg, source, u, str(ds), force) for u in _units(cfg, source, ds)]


@flow(name="fairmon-ingest")
def ingest(config_path: str, ds: dt.date, force: bool = False) -> list[DQResult]:
    """Validate and stage every configured input that day ``ds`` needs (for
    impressions: its default traffic and the random traffic of its trailing
    window; for scores and labels: the days of their windows). Re-ingesting
    replaces. Returns one :class:`DQResult` per file. (The daily flow runs the
    same tasks inline rather than as a subflow, which costs about a second.)"""
    cfg = load_config(config_path)
    results = [r for name in configured_inputs(cfg) for r in _ingest(cfg, name, ds, force)]
    build_docs(cfg)
    return results


def configured_inputs(cfg: FairmonConfig) -> list[str]:
    """The inputs this config reads, in run order."""
    return [n for n in ("impressions", "scores", "labels") if getattr(cfg, n) is not None]


@task(name="count-groups", cache_policy=NO_CACHE)
def count_groups(cfg: FairmonConfig, ds: dt.date) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per-group counts of day ``ds`` (sql/group_counts.sql) and, counted
    independently, the staged rows per traffic and arm (sql/traffic_totals.sql);
    taken from :func:`prestage_impressions` when its backfill counted them and
    nothing was staged since."""
    logger = _logger()
    t0 = time.perf_counter()
    ready = _take_range_counts(cfg, ds)
    with timing.clock(cfg.duckdb_path, ds, "counts"), db.connect(cfg.duckdb_path) as con:
        if ready is not None:  # counted with its backfill's range, nothing staged since
            counts, totals = ready
        elif db.query(con, "impressions_exists").item() == 0:
            counts = pl.DataFrame(schema=GROUP_COUNTS_SCHEMA)
            totals = pl.DataFrame(schema={"traffic": pl.String, "arm": pl.String, "n": pl.Int64})
        else:
            rng = {"first": ds, "last": ds, "window_days": cfg.impressions.random_window_days}
            counts = db.query(con, "group_counts", **rng)
            with timing.within("checks"):  # the totals exist to check the counts
                totals = db.query(con, "traffic_totals", **rng).drop("ds")
    counts = counts.cast(GROUP_COUNTS_SCHEMA).select(list(GROUP_COUNTS_SCHEMA))
    logger.info(
        "counts %s: %d staged rows in, %d group rows out, %.2fs",
        ds,
        int(totals.get_column("n").sum() or 0),
        counts.height,
        time.perf_counter() - t0,
    )
    return counts, totals


@task(name="check-day", cache_policy=NO_CACHE)
def check_day(cfg: FairmonConfig, ds: dt.date, counts: pl.DataFrame) -> DQResult:
    """The ``impressions_day`` suite on the day's counts (traffic present,
    positives per group, positive-rate bounds, random-traffic sufficiency)."""
    q = cfg.quality
    frame = day_check_frame(counts, q.sufficiency_epsilon, q.sufficiency_delta)
    params = {"positive_rate_min": q.positive_rate_min, "positive_rate_max": q.positive_rate_max}
    with timing.clock(cfg.duckdb_path, ds, "checks"):
        return gate_for(cfg).validate("impressions_day", frame, params, f"impressions {ds}", str(ds))


@task(name="estimate-reo", cache_policy=NO_CACHE)
def estimate(cfg: FairmonConfig, counts: pl.DataFrame, ds: dt.date) -> dict[str, pl.DataFrame]:
    """REO per group and overall, and the A/B differences between arms, from
    the counts (transforms.reo_tables). Returns {reo_group, reo[, reo_ab]}."""
    logger = _logger()
    t0 = time.perf_counter()
    est, ab = cfg.estimation, cfg.ab
    with timing.clock(cfg.duckdb_path, ds, "estimators"):
        group, overall = reo_tables(
            counts,
            ds,
            ci_method=est.ci_method,
            level=est.confidence_level,
            n_boot=est.bootstrap_resamples,
            seed=est.seed,
        )
        out = {"reo_group": group, "reo": overall}
        arms = sorted(set(overall.get_column("arm").to_list()))
        pairs = ab_pairs(arms, ab.control, ab.pairs)
        if pairs:
            out["reo_ab"] = reo_ab_table(
                counts,
                ds,
                pairs,
                methods=tuple(ab.methods),
                level=est.confidence_level,
                folds=ab.partition_folds,
                n_boot=ab.bootstrap_resamples,
                seed=est.seed,
            )
    logger.info(
        "estimators %s: %d count rows in, %s out, %.3fs",
        ds,
        counts.height,
        ", ".join(f"{k}={v.height}" for k, v in out.items()),
        time.perf_counter() - t0,
    )
    return out


@task(name="check-outputs", cache_policy=NO_CACHE)
def check_outputs(
    cfg: FairmonConfig, ds: dt.date, tables: dict[str, pl.DataFrame], totals: pl.DataFrame | None = None
) -> list[DQResult]:
    """The output suites (expectations/<table>.json) on the day's new rows.

    group_counts is checked against ``totals`` (rows staged per traffic and
    arm); reo gets its √(K−1) bound as a column first.
    """
    gate = gate_for(cfg)
    frames = dict(tables)
    if "group_counts" in frames:
        frames["group_counts"] = group_counts_check_frame(frames["group_counts"], totals)
    if "reo" in frames:
        frames["reo"] = reo_check_frame(frames["reo"])
    with timing.clock(cfg.duckdb_path, ds, "checks"):
        return [gate.validate(name, frame, {}, name, str(ds)) for name, frame in frames.items()]


def _staged_query(con, table: str, query: str, empty: dict, **params) -> pl.DataFrame:
    """``sql/<query>.sql`` over the staging table ``table``, or an empty frame
    with the schema ``empty`` while that table does not exist yet."""
    if db.query(con, f"{table}_exists").item() == 0:
        return pl.DataFrame(schema=empty)
    return db.query(con, query, **params)


@task(name="estimate-threshold-prevalence", cache_policy=NO_CACHE)
def estimate_threshold(cfg: FairmonConfig, ds: dt.date) -> dict[str, pl.DataFrame]:
    """Prevalence at the threshold per model threshold × attribute × group over
    the trailing window, and the differences between groups (seed 002 §4-5.1)."""
    logger = _logger()
    t0 = time.perf_counter()
    sc = cfg.scores
    w0 = window_start(ds, sc.window_days)
    with timing.clock(cfg.duckdb_path, ds, "estimators"):
        with db.connect(cfg.duckdb_path) as con:
            rows = _staged_query(
                con,
                "scores",
                "scores_window",
                {
                    "model": pl.String,
                    "score": pl.Float64,
                    "outcome": pl.Boolean,
                    **{f"attr__{a}": pl.String for a in sc.attributes},
                },
                ds=ds,
                window_start=w0,
            )
        prev, diff = threshold_tables(
            rows,
            ds,
            (w0, ds),
            [(t.model, t.t, t.d) for t in sc.thresholds],
            sc.attributes,
            level=cfg.estimation.confidence_level,
            hc=sc.hc,
            min_rows=sc.min_rows,
        )
    logger.info(
        "estimators %s: %d scored rows in, threshold_prevalence=%d, diffs=%d, %.3fs",
        ds,
        rows.height,
        prev.height,
        diff.height,
        time.perf_counter() - t0,
    )
    return {"threshold_prevalence": prev, "threshold_prevalence_diff": diff}


@task(name="estimate-sdt", cache_policy=NO_CACHE)
def estimate_sdt(cfg: FairmonConfig, ds: dt.date) -> dict[str, pl.DataFrame]:
    """Signal-detection metrics per attribute × group, pooled and per labeler,
    over the trailing window (seed 002 §5.3); confusion counts in SQL."""
    logger = _logger()
    t0 = time.perf_counter()
    lc = cfg.labels
    w0 = window_start(ds, lc.window_days)
    with timing.clock(cfg.duckdb_path, ds, "estimators"):
        with db.connect(cfg.duckdb_path) as con:
            conf = _staged_query(
                con,
                "labels",
                "sdt_counts",
                {
                    "attribute": pl.String,
                    "group": pl.String,
                    "labeler_id": pl.String,
                    "tp": pl.Int64,
                    "fn": pl.Int64,
                    "fp": pl.Int64,
                    "tn": pl.Int64,
                },
                ds=ds,
                window_start=w0,
            )
        out = sdt_table(
            conf.filter(pl.col("group") != "(missing)"),
            ds,
            (w0, ds),
            level=cfg.estimation.confidence_level,
            min_pos=lc.min_pos,
            min_neg=lc.min_neg,
        )
    logger.info(
        "estimators %s: %d confusion rows in, sdt=%d, %.3fs", ds, conf.height, out.height, time.perf_counter() - t0
    )
    return {"sdt": out}


@task(name="publish-day", cache_policy=NO_CACHE)
def publish(cfg: FairmonConfig, ds: dt.date, tables: dict[str, pl.DataFrame]) -> dict[str, str]:
    """Atomically replace the day's partitions, then mirror them into DuckDB."""
    logger = _logger()
    t0 = time.perf_counter()
    with timing.clock(cfg.duckdb_path, ds, "writes"):
        paths = write_partitions(cfg.warehouse_path, ds, tables)
        with db.connect(cfg.duckdb_path) as con:
            sync_duckdb(con, ds, tables)
    logger.info(
        "publish %s: %d rows out (%s), %.2fs",
        ds,
        sum(v.height for v in tables.values()),
        ", ".join(f"{k}={v.height}" for k, v in tables.items()),
        time.perf_counter() - t0,
    )
    return {k: str(v) for k, v in paths.items()}


def _dq_table(cfg: FairmonConfig, ds: dt.date, results: list[DQResult]) -> pl.DataFrame:
    """The day's dq_results rows, checked by the dq_results suite."""
    frame = dq_frame(ds, results)
    with timing.clock(cfg.duckdb_path, ds, "checks"):
        meta = gate_for(cfg).validate("dq_results", frame, {}, "dq_results", str(ds))
    if not meta.success:
        raise DayFailed(f"{ds}: stage dq_results: {meta.summary()}")
    return frame


def _quarantine(cfg: FairmonConfig, ds: dt.date, results: list[DQResult], stage: str, run_id: str) -> None:
    """Record why the day failed its checks (dq_results only) and end the run failed."""
    publish(cfg, ds, {"dq_results": _dq_table(cfg, ds, results).with_columns(pl.lit(run_id).alias("run_id"))})
    with timing.clock(cfg.duckdb_path, ds, "checks"):
        build_docs(cfg)
    failed = "; ".join(r.summary() for r in results if not r.success)
    raise DayQuarantined(f"{ds}: quarantined at stage {stage}: {failed}")


class _Stop(Exception):
    """A stage's critical check failed (internal: turns into a quarantine)."""


def _gate(results: list[DQResult], new: list[DQResult]) -> None:
    results += new
    if not all(r.success for r in new):
        raise _Stop


def _impressions_stage(cfg: FairmonConfig, ds: dt.date, force: bool, results: list[DQResult]) -> dict:
    _gate(results, _ingest(cfg, "impressions", ds, force))
    counts, totals = count_groups(cfg, ds)
    _gate(results, [check_day(cfg, ds, counts)])
    tables = {"group_counts": counts, **estimate(cfg, counts, ds)}
    _gate(results, check_outputs(cfg, ds, tables, totals))
    return tables


def _scores_stage(cfg: FairmonConfig, ds: dt.date, force: bool, results: list[DQResult]) -> dict:
    _gate(results, _ingest(cfg, "scores", ds, force))
    tables = estimate_threshold(cfg, ds)
    _gate(results, check_outputs(cfg, ds, tables))
    return tables


def _labels_stage(cfg: FairmonConfig, ds: dt.date, force: bool, results: list[DQResult]) -> dict:
    _gate(results, _ingest(cfg, "labels", ds, force))
    tables = estimate_sdt(cfg, ds)
    _gate(results, check_outputs(cfg, ds, tables))
    return tables


STAGES = {"impressions": _impressions_stage, "scores": _scores_stage, "labels": _labels_stage}


def _record_run(
    cfg: FairmonConfig,
    config_path: str,
    run_id: str,
    ds: dt.date,
    started: dt.datetime,
    status: str,
    detail: str,
    params: dict,
    files: list[str],
    outputs: dict[str, int],
    timings: dict,
) -> None:
    """Append the run to the ``runs`` table; a published day is no longer stale."""
    with db.connect(cfg.duckdb_path) as con:
        db.execute(con, "runs_create")
        db.execute(con, "runs_migrate")
        db.execute(con, "stale_create")
        db.execute(con, "ingest_log_create")
        inputs = db.query(con, "ingest_log_for_days", files=files).to_dicts() if files else []
        db.execute(
            con,
            "runs_insert",
            run_id=run_id,
            ds=ds,
            started_at=started,
            status=status,
            detail=detail,
            config_path=str(config_path),
            config_fp=cfg.fingerprint(),
            params=json.dumps(params, default=str),
            inputs=json.dumps(inputs, default=str),
            outputs=json.dumps(outputs),
            timings=json.dumps(timings),
        )
        if status == "published":
            db.execute(con, "stale_clear", ds=ds)


@flow(name="fairmon-daily")
def daily(config_path: str, ds: dt.date, force_ingest: bool = False, wait_seconds: float = 0.0) -> dict:
    """One day end to end, gated, for every configured input: ingest -> counts
    -> checks -> estimators -> checks -> publish. A critical failure anywhere
    quarantines the whole day (dq_results are written, no metric is published).
    The run holds the DuckDB file's run lock throughout (waiting up to
    ``wait_seconds`` for another process) and one connection to it
    (:func:`fairmon.pipelines.storage.db.session`), and is recorded in ``runs`` with its
    inputs' fingerprints, parameters and stage timings.

    Returns {ds, run_id, reo, reo_ab, threshold_prevalence, sdt (rows as dicts,
    empty when not configured), dq, paths, data_docs, timings (wall seconds per
    stage, :mod:`fairmon.pipelines.timing`; also stored in ``runs``)}. Raises
    :class:`DayQuarantined` on a critical data-quality failure,
    :class:`DayFailed` when the day cannot be computed (naming the stage and
    input) and :class:`RunLockedError` when another run holds the file.
    """
    cfg = load_config(config_path)
    run_id = uuid.uuid4().hex
    started = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    params = {
        "ds": ds,
        "force_ingest": force_ingest,
        "estimation": cfg.estimation.model_dump(),
        "ab": cfg.ab.model_dump(),
        "quality": cfg.quality.model_dump(),
    }
    results: list[DQResult] = []
    tables: dict[str, pl.DataFrame] = {}
    status, detail = "failed", ""
    with run_lock(cfg.duckdb_path, wait_seconds), db.session(cfg.duckdb_path):
        timing.start(cfg.duckdb_path, ds)
        try:
            for name in configured_inputs(cfg):
                try:
                    tables.update(STAGES[name](cfg, ds, force_ingest, results))
                except InputContractError as e:
                    raise DayFailed(f"{ds}: stage {name} ingest: {e}") from e
                except _Stop:
                    tables = {}
                    _quarantine(cfg, ds, results, name, run_id)
            dq = _dq_table(cfg, ds, results)
            stamped = {
                k: v.with_columns(pl.lit(run_id).alias("run_id")) for k, v in {**tables, "dq_results": dq}.items()
            }
            paths = publish(cfg, ds, stamped)  # metrics first, dq_results last
            with timing.clock(cfg.duckdb_path, ds, "checks"):
                docs = build_docs(cfg)
            status = "published"
            rows = {
                k: tables[k].to_dicts() if k in tables else [] for k in ("reo", "reo_ab", "threshold_prevalence", "sdt")
            }
            return {
                "ds": ds,
                "run_id": run_id,
                **rows,
                "dq": dq.to_dicts(),
                "paths": paths,
                "data_docs": str(docs),
                "timings": timing.book(cfg.duckdb_path, ds),
            }
        except DayQuarantined as e:
            status, detail = "quarantined", str(e)
            raise
        except Exception as e:
            detail = f"{type(e).__name__}: {e}"
            _logger().error("%s: run failed: %s", ds, detail)
            raise
        finally:
            _record_run(
                cfg,
                config_path,
                run_id,
                ds,
                started,
                status,
                detail,
                params,
                sorted({r.subject for r in results if r.suite.endswith("_raw")}),
                {k: v.height for k, v in tables.items()},
                timing.take(cfg.duckdb_path, ds),
            )
