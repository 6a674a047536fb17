"""Input identity (DESIGN §2 "Input identity"): an ingest unit (one file,
the Coat folder, or a catalog table's ds partition) is identified by its path
relative to the config's folder and fingerprinted by its size and mtime, so
moving the whole project folder changes nothing and a changed file is staged
again. Which units a day needs is :mod:`fairmon.pipelines.ingest.sources`'s
question; this module names and fingerprints them.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.core.run import active_run
from fairmon.transforms.contract import InputContractError


@dataclass(frozen=True)
class IngestUnit:
    """One file to stage: rows for ds_start..ds_end; ``scope`` = traffic it owns."""

    file: Path
    ds_start: dt.date
    ds_end: dt.date
    scope: str  # 'all' | 'random' | 'nonrandom'
    traffic: str | None = None  # fills the traffic column when the file has none


def unit_key(cfg: FairmonConfig, path: Path) -> str:
    """A staged file's identity (DESIGN §2 "Input identity"): its path relative
    to the config's folder (POSIX form), or its absolute path when it lies
    outside; so moving the whole project folder changes no identity. A
    catalog table's partition (``[impressions] table``) is
    ``spark-table:<table>/ds=<day>``. Raises :class:`InputContractError`
    naming the file when its path cannot be resolved (a loop of symbolic links)."""
    if table_partition(path) is not None:
        return str(path)
    base = cfg.base_dir.resolve()
    try:
        real = Path(path).resolve()
    except (RuntimeError, OSError):  # a symbolic link loop: RuntimeError up to Python 3.12, OSError after
        raise InputContractError("cannot be read: its symbolic links form a loop", file=str(path)) from None
    try:
        return real.relative_to(base).as_posix()
    except ValueError:
        return real.as_posix()


#: How a catalog table's ds partition is named where a file's path would be (messages, ingest log).
TABLE_PREFIX = "spark-table:"


def first_line(error: BaseException) -> str:
    """An engine error's first line (Spark's go on with hints and a JVM stack trace)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def table_unit_path(table: str, ds: dt.date) -> Path:
    """The name of the ``ds`` partition of catalog table ``table`` as an
    ingest unit's path: ``spark-table:<table>/ds=<day>``."""
    return Path(f"{TABLE_PREFIX}{table}/ds={ds.isoformat()}")


def table_partition(path: Path | str) -> tuple[str, dt.date] | None:
    """(table, ds) of a :func:`table_unit_path`, or None for a file."""
    text = str(path)
    if not text.startswith(TABLE_PREFIX):
        return None
    table, _, day = text[len(TABLE_PREFIX) :].rpartition("/ds=")
    return table, dt.date.fromisoformat(day)


def file_fingerprint(path: Path, cfg: FairmonConfig | None = None) -> tuple[int, int]:
    """(size, mtime_ns) of a file, or summed size and latest mtime of a folder's
    files (Coat), or of a catalog table partition's data files (``cfg``
    needed: the Spark engine lists them, once per run); what re-ingest and
    late-data detection compare. Raises OSError when the file (or the
    partition) is gone."""
    part = table_partition(path)
    if part is not None:
        if cfg is None:
            raise ValueError(f"{path}: a table partition's fingerprint needs the config (Spark engine)")
        fp = partition_fingerprints(cfg, part[0], [part[1]]).get(part[1])
        if fp is None:
            raise FileNotFoundError(f"{path}: no such partition")
        return fp
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
        return sum(p.stat().st_size for p in files), max((p.stat().st_mtime_ns for p in files), default=0)
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def partition_fingerprints(cfg: FairmonConfig, table: str, days: list[dt.date]) -> dict[dt.date, tuple[int, int]]:
    """The ds partitions among ``days`` of ``table`` that exist, with their
    (bytes, mtime_ns) (:func:`table_fingerprints`). Within a run each day is
    listed once (:class:`fairmon.pipelines.core.run.Run`; a backfill lists its
    whole range in one query, :func:`prime_table_fingerprints`); outside a
    run, at each call. Raises :class:`InputContractError` naming the table
    when Spark cannot list it."""
    from fairmon.pipelines.ingest.engines import table_fingerprints  # DuckDB's and Spark's readers: only here
    from fairmon.pipelines.storage.spark import session_lock, spark_error_types, spark_session

    run = active_run()
    known: dict[dt.date, tuple[int, int] | None] = {}
    if run is not None:
        with run.lock:
            known = run.table_fingerprints.setdefault(table, {})
    todo = [d for d in days if d not in known]
    if todo:
        with session_lock():
            spark = spark_session(cfg.spark)
            try:
                found = table_fingerprints(spark, table, todo)
            except spark_error_types() as e:
                where = f"{TABLE_PREFIX}{table}"
                raise InputContractError(f"cannot list the table's partitions: {first_line(e)}", file=where) from None
        new = {d: found.get(d) for d in todo}  # None: no such partition (as of this run)
        if run is None:
            known = new
        else:
            with run.lock:
                known.update(new)
    return {d: known[d] for d in days if known.get(d) is not None}
