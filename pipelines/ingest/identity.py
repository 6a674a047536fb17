"""Input identity (DESIGN §2 "Input identity"): an ingest unit (one file,
the Coat folder, or a catalog table's ds partition) is identified by its path
relative to the config's folder and fingerprinted by its size and a digest of
its content, so moving or copying the whole project folder changes nothing and
a changed file is staged again, even one whose modification time was set back
(``cp -p``, ``rsync -a``, ``touch -r``: a file changed that way republished its
old numbers when the fingerprint was its size and modification time). Which
units a day needs is :mod:`fairmon.pipelines.ingest.sources`'s question; this
module names and fingerprints them.
"""

from __future__ import annotations

import datetime as dt
import hashlib
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


#: Content digests read this process: (path, device, inode, size, mtime_ns, ctime_ns) -> digest. The status-change
#: time (ctime) moves on every write and no copy or restore can set it back, so a file keeps its entry only while
#: it is the same bytes; a file is read once a process however often a run asks.
_DIGESTS: dict[tuple, int] = {}

#: Bytes read at a time for a digest.
_CHUNK = 1 << 20


def content_digest(path: Path) -> int:
    """A 64-bit digest of the bytes of file ``path`` (the first 8 bytes of its SHA-1 as a signed integer, a
    DuckDB BIGINT): equal for equal content wherever the file lies or whatever its times. SHA-1 because it
    was the cheapest of :mod:`hashlib` measured here (bench/README.md); only accidental change matters.
    Raises OSError when the file cannot be read."""
    st = path.stat()
    key = (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key not in _DIGESTS:
        h = hashlib.sha1(usedforsecurity=False)
        with path.open("rb") as f:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
        _DIGESTS[key] = _bigint(h)
    return _DIGESTS[key]


def _bigint(h) -> int:
    """The first 8 bytes of hash ``h``'s digest as a signed integer (a DuckDB BIGINT)."""
    return int.from_bytes(h.digest()[:8], "big", signed=True)


def file_fingerprint(path: Path, cfg: FairmonConfig | None = None) -> tuple[int, int]:
    """(size, content digest) of a file (:func:`content_digest`), or summed size and a digest of a folder's
    files by their relative names and digests (Coat), or the bytes and latest modification time (ns) of a
    catalog table partition's data files (``cfg`` needed: the Spark engine lists them, once per run; the
    catalog gives no content); what re-ingest and late-data detection compare. Raises OSError when the
    file (or the partition) is gone."""
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
        h = hashlib.sha1(usedforsecurity=False)
        for p in files:
            h.update(f"{p.relative_to(path).as_posix()}\0{content_digest(p)}\0".encode())
        return sum(p.stat().st_size for p in files), _bigint(h)
    return path.stat().st_size, content_digest(path)


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
