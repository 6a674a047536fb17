"""Staging: each input file is checked by its raw suite and, when it passes,
its parsed rows replace the file's earlier rows in the DuckDB staging table
of its input (``impressions``, ``scores``, ``labels``; declared, their SQL
generated, in :mod:`fairmon.pipelines.ingest.staging_tables`), recorded in
``ingest_log`` with its fingerprint. Which files a day needs is
:mod:`fairmon.pipelines.ingest.sources`' answer. A backfill profiles and
stages all its impressions files ahead (:func:`prestage_impressions`) and
counts the range in one statement
(:mod:`fairmon.pipelines.ingest.range_counts`).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from fairmon.pipelines.checks.gate import gate_for
from fairmon.pipelines.checks.suites import DQResult
from fairmon.pipelines.core import timing
from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.core.run import active_run, ensured
from fairmon.pipelines.ingest import staging_tables
from fairmon.pipelines.ingest.adapters import (
    IngestUnit,
    envy_profile,
    file_fingerprint,
    normalize_log_unit,
    normalize_unit,
    prefetch_profiles,
    read_log_unit,
    read_unit,
    rows_in,
)
from fairmon.pipelines.ingest.identity import unit_key
from fairmon.pipelines.ingest.preflight import explain_raw, raw_params
from fairmon.pipelines.ingest.range_counts import count_range
from fairmon.pipelines.ingest.sources import ImpressionsInput, input_of, prime_table_fingerprints
from fairmon.pipelines.ingest.windows import random_window_note
from fairmon.pipelines.storage import db
from fairmon.transforms.contract import InputContractError, without_buckets
from fairmon.transforms.gate_frames import raw_check_frame


def run_logger() -> logging.Logger | logging.LoggerAdapter:
    """Prefect's run logger inside a flow or task run; the ``fairmon`` logger
    outside one. Ingest does not import Prefect: when no one imported it
    (an in-process run), there is no run to log to."""
    prefect = sys.modules.get("prefect")
    if prefect is None:
        return logging.getLogger("fairmon")
    from prefect.exceptions import MissingContextError

    try:
        return prefect.get_run_logger()
    except MissingContextError:
        return logging.getLogger("fairmon")


def warn(msg: str, *args) -> None:
    """A warning a user must see: to the run's Prefect log (the UI) and to the
    ``fairmon`` logger, which the command line shows on stderr even when
    Prefect's own logs are quiet (without ``-v``)."""
    log = run_logger()
    log.warning(msg, *args)
    if not isinstance(log, logging.Logger) or log.name != "fairmon":
        logging.getLogger("fairmon").warning(msg, *args)


@dataclass(frozen=True)
class InputSource:
    """How one input (impressions, scores or labels) is read, checked and staged."""

    name: str  # its staging table (staging_tables.STAGING_TABLES)
    suite: str
    params: dict
    text_columns: list[str]
    read: Callable[[IngestUnit], pl.DataFrame]
    normalize: Callable[[IngestUnit, pl.DataFrame], pl.DataFrame]
    delete_params: Callable[[IngestUnit], dict]  # binds $file: the unit's identity (identity.unit_key)


def input_source(cfg: FairmonConfig, name: str) -> InputSource:
    """The :class:`InputSource` of ``name`` under ``cfg``. Raises ValueError for an unknown name."""
    if name == "impressions":
        imp = cfg.impressions
        return InputSource(
            "impressions",
            "impressions_raw",
            raw_params(cfg, name),
            ["ds", "traffic", *imp.signals],
            lambda u: read_unit(cfg, u),
            lambda u, raw: normalize_unit(cfg, u, raw),
            lambda u: {"file": unit_key(cfg, u.file)},
        )
    if name in ("scores", "labels"):
        text = ["ds", "score", "outcome"] if name == "scores" else ["ds", "label", "gold_label"]
        return InputSource(
            name,
            f"{name}_raw",
            raw_params(cfg, name),
            text,
            lambda u: read_log_unit(cfg, name, u),
            lambda u, raw: normalize_log_unit(cfg, name, u, raw),
            lambda u: {"file": unit_key(cfg, u.file)},
        )
    raise ValueError(f"unknown input {name!r}")


def raw_suite(cfg: FairmonConfig, src: InputSource, unit: IngestUnit, raw: pl.DataFrame, run_name: str) -> DQResult:
    """The input's raw suite on one file as read (or its profile). Returns its :class:`DQResult`."""
    frame = raw_check_frame(without_buckets(raw), src.text_columns)
    result = gate_for(cfg).validate(src.suite, frame, src.params, str(unit.file), run_name)
    return explain_raw(cfg, src.name, unit.file, result)


def raw_suites(
    cfg: FairmonConfig, src: InputSource, units: list[tuple[IngestUnit, pl.DataFrame]], run_name: str
) -> list[DQResult]:
    """:func:`raw_suite` for several files, one GX run for the files that share
    a schema (:meth:`fairmon.pipelines.checks.gate.QualityGate.validate_many`:
    the same results as one run per file). Returns one result per file, in order."""
    frames = [(raw_check_frame(without_buckets(raw), src.text_columns), str(u.file), run_name) for u, raw in units]
    results = gate_for(cfg).validate_many(src.suite, frames, src.params)
    return [explain_raw(cfg, src.name, u.file, r) for (u, _raw), r in zip(units, results, strict=True)]


@dataclass(frozen=True)
class Staged:
    """One unit ready to stage: its parsed rows, file rows, fingerprint and raw-suite result."""

    unit: IngestUnit
    staged: pl.DataFrame
    rows: int
    size: int
    mtime: int
    dq: DQResult


def replace_units(cfg: FairmonConfig, src: InputSource, batch: list[Staged]) -> None:
    """Replace the staged rows of every unit in ``batch`` and record their
    fingerprints and file rows, in one transaction (one insert for all)."""
    if not batch:
        return
    # rows carry their file's identity (path relative to the config's folder), not where it lies now
    staged = pl.concat(
        [b.staged.with_columns(pl.lit(unit_key(cfg, b.unit.file)).alias("src_file")) for b in batch],
        how="vertical_relaxed",
    )
    fp = cfg.fingerprint()
    envy = None
    if src.name == "impressions" and cfg.envy is not None:  # per-user rows of the same files (DESIGN §4.7)
        envy = pl.concat([envy_profile(cfg, b.unit) for b in batch], how="vertical_relaxed")
    table = staging_tables.staging_table(src.name)
    envy_table = staging_tables.ENVY_ROWS
    with db.connect(cfg.duckdb_path) as con:
        con.register(table.frame, staged)
        if envy is not None:
            con.register(envy_table.frame, envy)
            staging_tables.create(con, envy_table, staging_tables.config_columns(cfg, envy_table))
            have_envy = staging_tables.table_columns(con, envy_table)
            for col in [c for c in envy.columns if c not in have_envy]:  # an attribute added to the config
                staging_tables.add_column(con, envy_table, col, "VARCHAR")
        db.execute(con, "ingest_log_create")  # also on a first run with force_ingest
        declared = staging_tables.config_columns(cfg, table)
        staging_tables.create(con, table, declared)
        have = staging_tables.table_columns(con, table)
        added = [c for c in staged.columns if c not in have and table.may_add(c)]
        if set(have) != set(staged.columns) - set(added):
            raise InputContractError(
                f"the staging table {src.name} in {cfg.duckdb_path} has columns {have}, but this config gives "
                f"{staged.columns} (an attribute was removed, or the file is from an earlier fairmon version): "
                f"use a separate duckdb path",
                file=str(batch[0].unit.file),
            )
        kinds = dict(declared)
        for col in added:  # an attribute (or the cluster bucket) added: every file is re-staged with it (new config)
            staging_tables.add_column(con, table, col, kinds.get(col, "VARCHAR"))
        with staging_tables.one_thread(con), db.transaction(con):
            for b in batch:
                file = src.delete_params(b.unit)["file"]
                staging_tables.delete_unit(con, table, file)
                if envy is not None:
                    staging_tables.delete_unit(con, envy_table, file)
            staging_tables.insert(con, table)
            if envy is not None:
                staging_tables.insert(con, envy_table)
            for b in batch:
                u = b.unit
                db.execute(
                    con,
                    "ingest_log_upsert",
                    file=unit_key(cfg, u.file),
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
        con.unregister(table.frame)
        if envy is not None:
            con.unregister(envy_table.frame)
        run = active_run()
        if run is not None:  # counts and file summaries read before this write no longer hold: bumped
            with run.lock:  # before the connection is released, so no thread reads the file's new rows as old
                run.generation += 1


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
    prime_table_fingerprints(cfg, days)  # a catalog table's partitions for the whole range, in one query
    units: dict[Path, IngestUnit] = {}
    impressions = ImpressionsInput(cfg)
    for ds in days:
        try:
            units.update({u.file: u for u in impressions.units(ds)})
        except InputContractError:
            continue
    known = {} if force else recorded_results(cfg, "impressions", list(units.values()))
    todo = [u for f, u in units.items() if f not in known]
    src = input_source(cfg, "impressions")
    timing.start("prestage")
    with timing.clock("prestage", "ingest"):
        out["files"] = prefetch_profiles(cfg, [u.file for u in todo])
        read = []
        for u in todo:
            try:
                read.append((u, src.read(u), file_fingerprint(u.file, cfg)))
            except InputContractError:
                continue
        with timing.within("checks"):  # one GX run for all the files that share a schema
            results = raw_suites(cfg, src, [(u, raw) for u, raw, _ in read], f"{min(days)}_{max(days)}")
        batch = []
        for (u, raw, (size, mtime)), dq in zip(read, results):
            if not dq.success:
                continue
            try:
                batch.append(Staged(u, src.normalize(u, raw), rows_in(raw), size, mtime, dq))
            except InputContractError:
                continue
        replace_units(cfg, src, batch)
        out["staged"] = len(batch)
        # the files' profiles, as read and as staged, are in DuckDB now: at K = 4,096 groups they
        # are ~0.3 GB, held through the count's own peak otherwise
        del read, results, batch
    with timing.clock("prestage", "counts"):
        count_range(cfg, days)
    return out | {k: v for k, v in timing.take("prestage").items() if k in out}


def stage_unit(cfg: FairmonConfig, source: str, unit: IngestUnit, run_name: str, force: bool = False) -> DQResult:
    """Validate one file of input ``source`` with its raw suite and, if no
    critical expectation failed, stage it into the DuckDB table of that name
    (replacing the file's previous rows). An unchanged file (same size, mtime
    and config) is not read again; its recorded result is returned.

    A plain function: an orchestrator that wants each file as a unit of its
    own wraps it (:mod:`fairmon.pipelines.orchestration.flows` makes it the
    Prefect task ``stage-unit``) and hands it to :func:`ingest_source`.
    Returns the file's :class:`DQResult`. Raises :class:`InputContractError`
    when a file that passed the suite still cannot be parsed.
    """
    log = run_logger()
    src = input_source(cfg, source)
    t0 = time.perf_counter()
    with timing.clock(run_name, "ingest"):
        size, mtime = file_fingerprint(unit.file, cfg)
        seen = None if force else _recorded(cfg, source, [unit]).get(unit.file)
        if seen:
            seconds = time.perf_counter() - t0
            log.info("ingest %s: unchanged since staged (%d rows), skipped, %.2fs", unit.file, seen[1], seconds)
            return seen[0]
        raw = src.read(unit)
    with timing.clock(run_name, "checks"):
        dq = raw_suite(cfg, src, unit, raw, run_name)
    if not dq.success:
        warn("ingest %s: %d rows in, not staged: %s", unit.file, rows_in(raw), dq.summary())
        return dq
    with timing.clock(run_name, "ingest"):
        staged = src.normalize(unit, raw)
        replace_units(cfg, src, [Staged(unit, staged, rows_in(raw), size, mtime, dq)])
    log.info(
        "ingest %s: %d rows in, %d staged, %.2fs", unit.file, rows_in(raw), staged.height, time.perf_counter() - t0
    )
    return dq


def recorded_results(cfg: FairmonConfig, source: str, units: list[IngestUnit]) -> dict[Path, DQResult]:
    """The raw suite's results recorded when ``units``' files were staged,
    from one ingest-log query: {file: its recorded result} for the files
    unchanged since (same size, mtime and config fingerprint); the others
    are left out. What :func:`stage_unit`
    returns for such a file."""
    return {file: dq for file, (dq, _rows) in _recorded(cfg, source, units).items()}


def _recorded(cfg: FairmonConfig, source: str, units: list[IngestUnit]) -> dict[Path, tuple[DQResult, int]]:
    """:func:`recorded_results` with each file's staged rows."""
    if not units:
        return {}
    keys = {unit_key(cfg, u.file): u.file for u in units}
    with db.connect(cfg.duckdb_path) as con:
        db.ensure(con, ("ingest_log_create",), ensured())
        # (file, size, mtime_ns, config_fp, rows, dq) per logged file
        logged = {r[0]: r[1:] for r in db.rows(con, "ingest_log_results", files=list(keys))}
    suite, fp = input_source(cfg, source).suite, cfg.fingerprint()
    out = {}
    for key, file in keys.items():
        row = logged.get(key)
        if row is None or row[:3] != (*file_fingerprint(file, cfg), fp):
            continue
        prev = json.loads(row[4] or "{}")
        dq = DQResult(source, suite, str(file), prev.get("n_expectations", 0), prev.get("failures", []))
        out[file] = (dq, row[3] or 0)
    return out


def units_for(cfg: FairmonConfig, source: str, ds: dt.date) -> list[IngestUnit]:
    """The files of input ``source`` that day ``ds`` needs (a warning when no
    default-traffic file matches). Raises :class:`InputContractError` as
    :meth:`fairmon.pipelines.ingest.sources.InputKind.units` does."""
    if source == "impressions":
        units = input_of(cfg, source).units(ds)
        if cfg.impressions.table is not None and not any(u.ds_end == ds for u in units):
            warn("%s: no partition ds=%s in the table %s", ds, ds, cfg.impressions.table)
        elif not any(u.scope == "all" or u.traffic == "default" for u in units):
            wanted = cfg.resolve(cfg.impressions.path.replace("{ds}", ds.isoformat()))
            warn("%s: no default-traffic file %s (path %s)", ds, wanted, cfg.impressions.path)
        if cfg.impressions.format == "tiktok" and not any(u.scope == "random" for u in units):
            warn("%s: %s", ds, random_window_note(cfg, ds))
        return units
    return input_of(cfg, source).units(ds)


def ensure_staged(cfg: FairmonConfig, days: list[dt.date], run_name: str) -> list[dt.date]:
    """Stage the impressions files of ``days`` that are not staged as they are
    now (new, changed, or staged under another config), e.g. the earlier days
    of an envy audit's window when a day runs alone. One ingest-log query for
    all files; files staged as they are cost nothing more. Returns the days
    whose files are missing or did not pass their raw suite (their rows are
    not in the staging tables)."""
    units: list[tuple[dt.date, IngestUnit]] = []
    short: set[dt.date] = set()
    impressions = ImpressionsInput(cfg)
    for ds in days:
        try:
            found = impressions.units(ds)
        except InputContractError:
            found = []
        if not found:
            short.add(ds)
        units += [(ds, u) for u in found]
    if not units:
        return sorted(short)
    with db.connect(cfg.duckdb_path) as con:
        db.execute(con, "ingest_log_create")
        seen = {
            r[0]: r[1:]
            for r in db.query(
                con, "ingest_log_fingerprints", files=[unit_key(cfg, u.file) for _, u in units]
            ).iter_rows()
        }
    fp = cfg.fingerprint()
    for ds, u in units:
        if seen.get(unit_key(cfg, u.file)) == (*file_fingerprint(u.file, cfg), fp):
            continue
        try:
            if not stage_unit(cfg, "impressions", u, run_name).success:
                short.add(ds)
        except InputContractError:
            short.add(ds)
    return sorted(short)


def ingest_source(
    cfg: FairmonConfig, source: str, ds: dt.date, force: bool, stage: Callable[..., DQResult] | None = None
) -> list[DQResult]:
    """Stage every file of input ``source`` (impressions, scores, labels)
    that day ``ds`` needs, each by ``stage`` (default :func:`stage_unit`
    called in process; an orchestrator passes its wrapped form, e.g. a
    Prefect task, with the same arguments); a file unchanged since it was
    staged (unless ``force``) is not read again and its recorded result is
    taken from one ingest-log query for all the day's files (a backfill's
    files are all staged ahead). Returns one :class:`DQResult` per file.
    Raises :class:`fairmon.transforms.contract.InputContractError` for a
    file that breaks its input contract."""
    stage = stage or stage_unit
    units = units_for(cfg, source, ds)
    t0 = time.perf_counter()
    with timing.clock(str(ds), "ingest"):
        known = {} if force else _recorded(cfg, source, units)
    out = []
    for u in units:
        if u.file in known:
            dq, rows = known[u.file]
            seconds = time.perf_counter() - t0
            run_logger().info("ingest %s: unchanged since staged (%d rows), skipped, %.2fs", u.file, rows, seconds)
            out.append(dq)
        else:
            out.append(stage(cfg, source, u, str(ds), force))
    return out
