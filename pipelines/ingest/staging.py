"""Staging: each input file is checked by its raw suite and, when it passes,
its parsed rows replace the file's earlier rows in the DuckDB staging table
of its input (``impressions``, ``scores``, ``labels``; declared, their SQL
generated, in :mod:`fairmon.pipelines.ingest.staging_tables`), recorded in
``ingest_log`` with its fingerprint. Which files a day needs is
:mod:`fairmon.pipelines.ingest.sources`' answer. A batch of days is
ingested at once (:func:`ingest_days`): each file once, however many of the
days need it.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import polars as pl

from fairmon.pipelines.checks.gate import gate_for
from fairmon.pipelines.checks.suites import DQResult
from fairmon.pipelines.checks.value_checks import dated_outside, shown_as_checked
from fairmon.pipelines.core import timing
from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.ingest import staging_tables
from fairmon.pipelines.ingest.adapters import (
    IngestUnit,
    envy_profile,
    is_kept,
    normalize_log_unit,
    normalize_unit,
    profile_files,
    read_log_unit,
    read_unit,
    rows_in,
)
from fairmon.pipelines.ingest.identity import file_fingerprint, unit_key
from fairmon.pipelines.ingest.preflight import explain_raw, raw_params
from fairmon.pipelines.ingest.sources import input_of, prime_table_fingerprints
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
    read: Callable[[IngestUnit, pl.DataFrame | None], pl.DataFrame]  # the unit, its batch profile if any
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
            lambda u, profile: read_unit(cfg, u, profile),
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
            lambda u, _profile: read_log_unit(cfg, name, u),
            lambda u, raw: normalize_log_unit(cfg, name, u, raw),
            lambda u: {"file": unit_key(cfg, u.file)},
        )
    raise ValueError(f"unknown input {name!r}")


def raw_suites(
    cfg: FairmonConfig, src: InputSource, units: list[tuple[IngestUnit, pl.DataFrame]], run_name: str
) -> list[DQResult]:
    """The input's raw suite on each file as read (or its profile), one GX run for the files that share
    a schema (:meth:`fairmon.pipelines.checks.gate.QualityGate.validate_many`:
    the same results as one run per file), and on each impressions file with
    a ``ds`` column the check that its rows are dated within the days it is read for
    (:func:`fairmon.pipelines.checks.value_checks.dated_outside`, one more
    critical expectation: a file that fails it is not staged and quarantines
    the days that read it, as a suite's failure does, where parsing it would
    have failed them). Returns one result per file, in order."""
    shown = [without_buckets(raw) for _u, raw in units]
    frames = [(raw_check_frame(raw, src.text_columns), str(u.file), run_name) for (u, _), raw in zip(units, shown)]
    results = gate_for(cfg).validate_many(src.suite, frames, src.params)
    out = []
    for (u, _), raw, (checked, _, _), r in zip(units, shown, frames, results, strict=True):
        if src.name == "impressions" and "ds" in checked.columns:  # scores and labels rows may carry any day
            quoted = shown_as_checked(raw, checked)  # a zoned ds in UTC, not in the machine's zone
            dated = [_as_gate_failure(f) for f in dated_outside(checked, u.ds_start, u.ds_end, quoted)]
            r = replace(r, n_expectations=r.n_expectations + 1, failures=[*r.failures, *dated])
        out.append(explain_raw(cfg, src.name, u.file, r))
    return out


def _as_gate_failure(found: dict) -> dict:
    """A :func:`~fairmon.pipelines.checks.value_checks.failing_values` failure as
    the gate lists a failed expectation (:func:`fairmon.pipelines.checks.split.failure`)."""
    return {
        "name": found["name"],
        "severity": "critical",  # failing_values finds only critical expectations
        "type": found["type"],
        "column": found["column"],
        "unexpected_count": found["rows"],
        "rows": [found["first_row"]],
        "sample": found["values"],
        "error": None,
    }


@dataclass(frozen=True)
class Staged:
    """One unit ready to stage: its parsed rows, file rows, fingerprint and raw-suite result."""

    unit: IngestUnit
    staged: pl.DataFrame
    rows: int
    size: int
    digest: int
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
        db.ensure(con, ("ingest_log_create", "ingest_log_migrate"))  # also on a first run with force_ingest
        declared = staging_tables.config_columns(cfg, table)
        staging_tables.create(con, table, declared)
        have = staging_tables.table_columns(con, table)
        if not set(have) <= set(staged.columns):  # an attribute removed or replaced: the rows staged under the
            warn("staged %s rows have the columns %s, not this config's: staged anew", src.name, have)
            staging_tables.restart(con, table, declared)  # old config go, each file staged again when needed
            have = staging_tables.table_columns(con, table)
        added = [c for c in staged.columns if c not in have and table.may_add(c)]
        if set(have) != set(staged.columns) - set(added):
            raise InputContractError(
                f"the file's rows have the columns {staged.columns}, which the staging table {src.name} "
                f"({have}) cannot take",
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
                    digest=b.digest,
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


def all_passed(results: list[DQResult]) -> bool:
    """A day's files are all staged: there is at least one, and every one passed its raw suite."""
    return bool(results) and all(r.success for r in results)


@dataclass(frozen=True)
class Ingested:
    """What one ingest of an input gives a batch of days: per day, one
    :class:`DQResult` per file it needs (in the day's file order), or the
    :class:`InputContractError` that stops it (its files cannot be listed,
    or one of them cannot be parsed); ``files``: the files read and
    checked (new or changed), ``staged``: those staged."""

    days: dict[dt.date, list[DQResult] | InputContractError]
    files: int = 0
    staged: int = 0

    def __getitem__(self, ds: dt.date) -> list[DQResult] | InputContractError:
        """What the ingest gave day ``ds``."""
        return self.days[ds]

    def short(self) -> list[dt.date]:
        """The days whose rows are not all staged: an error, no file, or a file that failed its raw suite."""
        return sorted(ds for ds, r in self.days.items() if isinstance(r, Exception) or not all_passed(r))


def ingest_days(
    cfg: FairmonConfig, days: Iterable[dt.date], source: str, force: bool = False, quiet: bool = False
) -> Ingested:
    """Ingest input ``source`` (impressions, scores, labels) for the batch
    ``days`` (dates, or a mapping keyed by them) at once: every file a day needs is listed (a warning when a day
    has no default traffic), files unchanged since they were staged under
    this config (unless ``force``) keep their recorded raw-suite results
    (one ingest-log query), and the others are profiled together
    (impressions: one scan per schema), checked by their raw suite in one GX
    run, and the ones that pass are staged in one transaction (their earlier
    rows replaced). A file that cannot be read or fails its suite stops only
    the days that need it, and says so. Returns the :class:`Ingested`.
    Raises what DuckDB or GX raise for the batch as a whole (the executor
    then ingests each day alone). ``quiet``: no warning for a day without
    default traffic (earlier days that an envy audit's window reads). Its
    seconds go to the ``ingest`` and ``checks`` stages of the caller's clock
    (:func:`fairmon.pipelines.core.timing.within`)."""
    days = sorted(days)
    listed: dict[dt.date, list[IngestUnit] | InputContractError] = {}
    if source == "impressions":
        prime_table_fingerprints(cfg, days)  # a catalog table's partitions for the whole batch, in one query
    for ds in days:
        try:
            listed[ds] = input_of(cfg, source).units(ds) if quiet else units_for(cfg, source, ds)
        except InputContractError as e:
            listed[ds] = e
    units = {u.file: u for us in listed.values() if isinstance(us, list) for u in us}
    t0 = time.perf_counter()
    known = {} if force else recorded_results(cfg, source, list(units.values()))
    todo = [u for f, u in units.items() if f not in known]
    checked, broken, staged = _stage(cfg, source, todo, timing.batch_book(days), t0)
    out: dict[dt.date, list[DQResult] | InputContractError] = {}
    for ds, us in listed.items():
        if isinstance(us, InputContractError):
            out[ds] = us
            continue
        error = next((broken[u.file] for u in us if u.file in broken), None)
        out[ds] = error or [known[u.file][0] if u.file in known else checked[u.file] for u in us]
    seconds = time.perf_counter() - t0
    for u in units.values():
        if u.file in known:
            run_logger().info(
                "ingest %s: unchanged since staged (%d rows), skipped, %.2fs", u.file, known[u.file][1], seconds
            )
    return Ingested(out, len(todo), staged)


def _stage(
    cfg: FairmonConfig, source: str, todo: list[IngestUnit], run_name: str, t0: float
) -> tuple[dict[Path, DQResult], dict[Path, InputContractError], int]:
    """For :func:`ingest_days`: read, check and stage the files ``todo``
    (``run_name``: the validations' name in Data Docs, the day or
    ``<first>_<last>``; ``t0``: when the batch's ingest began, for its log lines). Returns
    (raw-suite result per file checked, contract error per file that cannot
    be read or parsed, files staged)."""
    src = input_source(cfg, source)
    broken: dict[Path, InputContractError] = {}
    read = []
    fresh = [u for u in todo if source == "impressions" and not is_kept(cfg, u)]  # kept: read at pre-flight
    profiles = profile_files(cfg, [u.file for u in fresh]) if len(fresh) > 1 else {}
    for u in todo:
        try:
            read.append((u, src.read(u, profiles.pop(str(u.file), None)), file_fingerprint(u.file, cfg)))
        except InputContractError as e:
            broken[u.file] = e
    with timing.within("checks"):  # one GX run for all the files that share a schema
        results = raw_suites(cfg, src, [(u, raw) for u, raw, _ in read], run_name)
    batch, checked = [], {}
    for (u, raw, (size, digest)), dq in zip(read, results, strict=True):
        checked[u.file] = dq
        if not dq.success:
            # info, not a warning: the day's quarantine line (run, backfill) or the file's line (ingest) says it
            run_logger().info("ingest %s: %d rows in, not staged: %s", u.file, rows_in(raw), dq.summary())
            continue
        try:
            batch.append(Staged(u, src.normalize(u, raw), rows_in(raw), size, digest, dq))
        except InputContractError as e:
            broken[u.file] = e
    del read, results  # the profiles as read are large with many groups: not held through the staging
    try:
        replace_units(cfg, src, batch)
    except InputContractError as e:  # the staging table cannot take this config's rows: every file says so
        broken |= {b.unit.file: e for b in batch}
        return checked, broken, 0
    seconds = time.perf_counter() - t0
    for b in batch:
        run_logger().info("ingest %s: %d rows in, %d staged, %.2fs", b.unit.file, b.rows, b.staged.height, seconds)
    return checked, broken, len(batch)


def recorded_results(cfg: FairmonConfig, source: str, units: list[IngestUnit]) -> dict[Path, tuple[DQResult, int]]:
    """The raw suite's results recorded when ``units``' files were staged,
    with each file's staged rows, from one ingest-log query: {file: (its
    recorded result, rows)} for the files unchanged since (same size, content
    digest and config fingerprint); the others are left out."""
    if not units:
        return {}
    with db.connect(cfg.duckdb_path) as con:
        db.ensure(con, ("ingest_log_create", "ingest_log_migrate"))
        logged = unchanged_files(cfg, con, units)
    suite = input_source(cfg, source).suite
    out = {}
    for file, (rows, dq_json) in logged.items():
        prev = json.loads(dq_json or "{}")
        dq = DQResult(source, suite, str(file), prev.get("n_expectations", 0), prev.get("failures", []))
        out[file] = (dq, rows or 0)
    return out


def unchanged_files(cfg: FairmonConfig, con, units: list[IngestUnit]) -> dict[Path, tuple]:
    """{file: (staged rows, raw-suite result as JSON)} of ``units``' files
    the ingest log on ``con`` records with the size, content digest and config
    fingerprint they have now (one query; read-only connections do). Raises
    what DuckDB raises (no ingest log: a CatalogException)."""
    keys = {unit_key(cfg, u.file): u.file for u in units}
    # (file, size, digest, config_fp, rows, dq) per logged file
    logged = {r[0]: r[1:] for r in db.rows(con, "ingest_log_results", files=list(keys))}
    fp = cfg.fingerprint()
    return {
        file: logged[key][3:]
        for key, file in keys.items()
        if key in logged and logged[key][:3] == (*file_fingerprint(file, cfg), fp)
    }


def units_for(cfg: FairmonConfig, source: str, ds: dt.date) -> list[IngestUnit]:
    """The files of input ``source`` that day ``ds`` needs (a warning when a catalog table has no partition
    of the day; a missing default-traffic file is said by the day's ``default_traffic_present`` result,
    :func:`fairmon.pipelines.ingest.preflight.missing_default_note`, and by the command line's pre-flight).
    Raises :class:`InputContractError` as :meth:`fairmon.pipelines.ingest.sources.InputKind.units` does."""
    if source == "impressions":
        units = input_of(cfg, source).units(ds)
        if cfg.impressions.table is not None and not any(u.ds_end == ds for u in units):
            warn("%s: no partition ds=%s in the table %s", ds, ds, cfg.impressions.table)
        if cfg.impressions.format == "tiktok" and not any(u.scope == "random" for u in units):
            warn("%s: %s", ds, random_window_note(cfg, ds))
        return units
    return input_of(cfg, source).units(ds)
