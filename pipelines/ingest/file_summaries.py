"""Per-file summaries of staged impressions rows that a day's file checks
compare, read once a batch.

Two of a day's checks pair its files by what their staged rows hold: the
copies check by a signature of the rows (sql/impressions_file_signatures.sql),
the shared-ids check by their traffic and dates
(sql/impressions_file_spans.sql). A random pool serves every day of its
window, and a file's summary does not depend on the day: the batch keeps
each summary it read (:class:`FileSummaries`, valid while nothing is
staged, which in a batch is after its ingest) so that a pool's staged rows
are read once a batch, not once a day.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import duckdb
import polars as pl

from fairmon.pipelines.storage import db

#: The summaries: sql/impressions_file_<kind>.sql for each kind.
KINDS = ("signatures", "spans")


@dataclass
class FileSummaries:
    """The summaries a batch has read, per (kind, file identity, pooled).
    ``lock`` guards them across the threads of a ``--concurrency`` batch."""

    kept: dict[tuple[str, str, bool], pl.DataFrame] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


def file_summaries(
    con: duckdb.DuckDBPyConnection, kind: str, files: list[str], pools: list[str], known: FileSummaries | None = None
) -> pl.DataFrame:
    """The rows of sql/impressions_file_<kind>.sql (``kind`` one of
    :data:`KINDS`) for the file identities ``files`` (a column ``file``; a
    file with no staged row has none), ``pools``: the identities of pooled
    files. A file summarised earlier in ``known`` (the batch's, as a pool or
    not alike) is taken from it; the others are read in one statement on
    ``con`` and kept there. Raises ValueError for another ``kind``, what DuckDB raises."""
    if kind not in KINDS:
        raise ValueError(f"unknown file summary {kind!r}; expected one of {KINDS}")
    pooled = set(pools)
    known = known or FileSummaries()
    with known.lock:
        hits = {f: known.kept.get((kind, f, f in pooled)) for f in files}
    todo = [f for f, hit in hits.items() if hit is None]
    have = [hit for hit in hits.values() if hit is not None]
    if not todo and have:
        return pl.concat(have)
    wanted = set(todo)
    read = db.query(con, f"impressions_file_{kind}", files=todo, pools=[p for p in pools if p in wanted])
    parts = read.partition_by("file", as_dict=True)
    with known.lock:
        for f in todo:
            known.kept[(kind, f, f in pooled)] = parts.get((f,), read.clear())
    return pl.concat([*have, read]) if have else read
