"""Per-file summaries of staged impressions rows that a day's file checks
compare, kept in the current run while nothing is staged (``Run.generation``).

Two of a day's checks pair its files by what their staged rows hold: the
copies check by a signature of the rows (sql/impressions_file_signatures.sql),
the shared-ids check by their traffic and dates
(sql/impressions_file_spans.sql). A random pool serves every day of its
window, so summarising each day's files anew read the pool's staged rows
once a day (at K = 4,096 groups ~280,000 rows each time); a file's summary
does not depend on the day, so a run reads each file once.
"""

from __future__ import annotations

import duckdb
import polars as pl

from fairmon.pipelines.core.run import active_run
from fairmon.pipelines.storage import db

#: The summaries: sql/impressions_file_<kind>.sql for each kind.
KINDS = ("signatures", "spans")


def file_summaries(con: duckdb.DuckDBPyConnection, kind: str, files: list[str], pools: list[str]) -> pl.DataFrame:
    """The rows of sql/impressions_file_<kind>.sql (``kind`` one of
    :data:`KINDS`) for the file identities ``files`` (a column ``file``; a
    file with no staged row has none), ``pools``: the identities of pooled
    files. A file summarised earlier in the current run, as a pool or not
    alike, with nothing staged since, is taken from the run; the others are
    read in one statement on ``con`` and kept. Outside a run every file is
    read. Raises ValueError for another ``kind``, what DuckDB raises."""
    if kind not in KINDS:
        raise ValueError(f"unknown file summary {kind!r}; expected one of {KINDS}")
    run, pooled = active_run(), set(pools)
    known: list[pl.DataFrame] = []
    todo = list(files)
    if run is not None:
        with run.lock:
            generation, kept = run.generation, run.file_summaries
            hits = {f: kept.get((kind, f, f in pooled)) for f in files}
        known = [hit[1] for hit in hits.values() if hit is not None and hit[0] == generation]
        todo = [f for f, hit in hits.items() if hit is None or hit[0] != generation]
    if not todo and known:
        return pl.concat(known)
    wanted = set(todo)
    read = db.query(con, f"impressions_file_{kind}", files=todo, pools=[p for p in pools if p in wanted])
    if run is not None:
        parts = read.partition_by("file", as_dict=True)
        with run.lock:
            for f in todo:
                run.file_summaries[(kind, f, f in pooled)] = (generation, parts.get((f,), read.clear()))
    return pl.concat([*known, read]) if known else read
