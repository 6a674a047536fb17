"""DuckDB access: SQL statements are read from ``sql/*.sql`` (package data ``fairmon.sql``) (one statement per
file) and executed with bound parameters only. A statement may include another file's query as text,
``{{include <name>}}`` (e.g. as a subquery), so logic two statements share is written once."""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import polars as pl

from fairmon.resources import sql_file


class DatabaseBusyError(RuntimeError):
    """Another process holds the DuckDB file (DuckDB allows one writer process)."""


_INCLUDE = re.compile(r"\{\{\s*include\s+([A-Za-z0-9_/]+)\s*\}\}")


@functools.cache
def sql_text(name: str, _including: tuple[str, ...] = ()) -> str:
    """The statement in ``sql/<name>.sql`` (name may contain a subfolder),
    each ``{{include <other>}}`` replaced by the text of ``sql/<other>.sql``
    (itself expanded the same way). Raises FileNotFoundError for a missing
    file, ValueError for a file that includes itself (directly or not)."""
    if name in _including:
        raise ValueError(f"sql/{name}.sql includes itself: {' -> '.join((*_including, name))}")
    node = sql_file(name)
    if not node.is_file():
        raise FileNotFoundError(f"no SQL file {name}.sql in the fairmon package")
    return _INCLUDE.sub(lambda m: sql_text(m.group(1), (*_including, name)).rstrip(), node.read_text())


# Process-wide by nature: DuckDB lets one process hold a file read-write once, so
# the threads of this process share one connection per file (a session) and take
# turns on it. These tables say which connection is open and who holds its turn.
_path_locks: dict[str, threading.RLock] = {}
_path_locks_guard = threading.Lock()
_sessions: dict[str, list] = {}  # resolved path -> [open connection, number of open sessions]


def _lock_for(path: Path) -> tuple[str, threading.RLock]:
    key = str(path.resolve())
    with _path_locks_guard:
        return key, _path_locks.setdefault(key, threading.RLock())


@contextmanager
def connect(path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """Open the DuckDB file (creating its folder); close it on exit, unless a
    :func:`session` on the file is open, whose connection is then reused.

    Threads of one process take turns (a backfill with --concurrency runs its
    days' estimators in parallel, their database work one at a time). Raises
    :class:`DatabaseBusyError` with a clear message when another process has
    the file open.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    key, lock = _lock_for(path)
    with lock:
        if key in _sessions:
            yield _sessions[key][0]
            return
        with _open(path) as con:
            yield con


@contextmanager
def session(path: Path) -> Iterator[None]:
    """Keep one connection to the file open for the block (a day's run):
    every :func:`connect` inside it, from any thread, reuses it instead of
    opening the file again (about 13 ms each); it is closed, and so
    checkpointed, when the last open session on the file ends."""
    path.parent.mkdir(parents=True, exist_ok=True)
    key, lock = _lock_for(path)
    with lock:
        if key in _sessions:
            _sessions[key][1] += 1
        else:
            cm = _open(path)
            _sessions[key] = [cm.__enter__(), 1, cm]
    try:
        yield
    finally:
        with lock:
            entry = _sessions[key]
            entry[1] -= 1
            if entry[1] == 0:
                del _sessions[key]
                entry[2].__exit__(None, None, None)


@contextmanager
def _open(path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    try:
        con = duckdb.connect(str(path))
    except duckdb.IOException as e:
        if "lock" in str(e).lower():
            raise DatabaseBusyError(
                f"DuckDB file {path} is in use by another fairmon process; wait for it to finish"
            ) from e
        raise
    try:
        execute(con, "settings_memory")  # freed memory goes back to the system (sql/settings_memory.sql)
        yield con
    finally:
        con.close()
        # A failed run's traceback keeps this frame alive until exit; drop the
        # reference so DuckDB's bindings are not reported as leaked at shutdown.
        del con


def execute(con: duckdb.DuckDBPyConnection, name: str, **params) -> None:
    """Run the statement ``sql/<name>.sql`` with named parameters, discarding any result."""
    con.execute(sql_text(name), params or None)
    # DuckDB 2: an unfinished result owns the connection; drain it.
    con.fetchall()


def run_statement(con: duckdb.DuckDBPyConnection, statement: str, **params) -> list[tuple]:
    """Run a statement generated from a declaration (the staging tables,
    :mod:`fairmon.pipelines.ingest.staging_tables`) rather than read from
    ``sql/``, with named parameters; returns its rows (none for DDL and
    writes), which also drains the result as :func:`execute` does. The
    caller vouches that the text was built from checked identifiers only."""
    return con.execute(statement, params or None).fetchall()


def statement_columns(con: duckdb.DuckDBPyConnection, statement: str) -> list[str]:
    """The column names of a generated query, bound but not run (e.g. a
    table's ``SELECT * … LIMIT 0``: the columns it has now)."""
    return con.sql(statement).columns


def ensure(con: duckdb.DuckDBPyConnection, names: tuple[str, ...]) -> None:
    """Run the idempotent DDL statements ``names`` (``CREATE TABLE IF NOT
    EXISTS``, ``ADD COLUMN IF NOT EXISTS``): each time, so nothing has to
    remember what a file already has (a file deleted or replaced mid-run
    gets its tables again). Raises what DuckDB raises."""
    for name in names:
        execute(con, name)


def rows(con: duckdb.DuckDBPyConnection, name: str, **params) -> list[tuple]:
    """The rows of the query ``sql/<name>.sql`` as tuples, for small lookups
    (about half the cost of :func:`query`'s frame for a few rows)."""
    return con.execute(sql_text(name), params or None).fetchall()


def query(con: duckdb.DuckDBPyConnection, name: str, **params) -> pl.DataFrame:
    """Run the query ``sql/<name>.sql`` with named parameters and return a Polars frame."""
    return con.sql(sql_text(name), params=params or None).pl()


def relation(con: duckdb.DuckDBPyConnection, name: str, **params) -> duckdb.DuckDBPyRelation:
    """The query ``sql/<name>.sql`` as a lazy DuckDB relation (to register as a view or stream)."""
    return con.sql(sql_text(name), params=params or None)


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """BEGIN … COMMIT, rolled back on any exception."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
