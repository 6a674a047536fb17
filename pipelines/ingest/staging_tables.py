"""The DuckDB staging tables, each declared once (DESIGN §1 "Staging tables are
declared the same way"): its name, its columns with their DuckDB types, the
column that identifies a staging unit (a file, DESIGN §2 "Input identity")
and the name its batch frame is registered under. The statements that
create, fill, clear a unit of, probe and inspect a table are generated from
the declaration; there is no hand-written copy per table to drift.

Columns of a staging table are fixed ones plus one ``attr__<attribute>``
VARCHAR column per configured attribute (and, for impressions, one per
intersection, ``attr__a×b``, after the fixed ones). The generated DDL gives
exactly the schema earlier versions made from their first staged frame
(``CREATE TABLE … AS SELECT * FROM staged LIMIT 0``), column order included,
and it is ``CREATE TABLE IF NOT EXISTS``: a DuckDB file staged by an earlier
version keeps its tables and re-stages nothing.

Identifiers come only from the declaration and the validated config: each
must match ``[A-Za-z_][A-Za-z0-9_]*`` (an intersection column: such names
joined by ``×``) and is double-quoted; every value is a bound parameter.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import duckdb

from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.storage import db
from fairmon.pipelines.storage.ddl import ident
from fairmon.transforms.contract import ATTR_PREFIX, INTERSECTION_SEP
from fairmon.transforms.intersections import intersection_name

#: A column: (name, DuckDB type).
Column = tuple[str, str]


def column_ident(name: str) -> str:
    """``name`` double-quoted as a column identifier: a plain identifier
    (:func:`fairmon.pipelines.storage.ddl.ident`) or an intersection's
    ``attr__a×b`` (identifiers joined by ``×``, which needs no escaping
    either). Raises ValueError for any other name."""
    parts = name.split(INTERSECTION_SEP)
    for part in parts:
        ident(part)  # raises ValueError naming the part
    return f'"{name}"'


@dataclass(frozen=True)
class StagingTable:
    """One staging table's declaration.

    ``leading`` and ``trailing`` are the fixed columns before and after the
    attribute columns; ``unit_key`` the column holding each row's file
    identity (what re-staging a file deletes by); ``frame`` the name a
    batch's frame is registered under for the insert; ``addable`` the fixed
    columns an older table may lack and that are added to it (with the
    attribute columns) when a config asks for them; ``intersections``
    whether the table carries the impressions' intersection columns.
    """

    name: str
    leading: tuple[Column, ...]
    trailing: tuple[Column, ...]
    unit_key: str = "src_file"
    frame: str = "staged"
    addable: tuple[str, ...] = ()
    intersections: bool = False

    def columns(self, attributes: Sequence[str], intersections: Sequence[Sequence[str]] = ()) -> tuple[Column, ...]:
        """Every column, in table order, for the configured ``attributes`` and
        (when the table carries them) ``intersections``."""
        attrs = tuple((ATTR_PREFIX + a, "VARCHAR") for a in attributes)
        crossed = tuple((ATTR_PREFIX + intersection_name(list(n)), "VARCHAR") for n in intersections)
        return (*self.leading, *attrs, *self.trailing, *(crossed if self.intersections else ()))

    def may_add(self, column: str) -> bool:
        """Whether ``column`` may be added to an existing table (an attribute
        or intersection column, or one of ``addable``)."""
        return column.startswith(ATTR_PREFIX) or column in self.addable


IMPRESSIONS = StagingTable(
    "impressions",
    leading=(("ds", "DATE"), ("ds_start", "DATE"), ("traffic", "VARCHAR"), ("arm", "VARCHAR"), ("y", "BOOLEAN")),
    trailing=(("cbucket", "INTEGER"), ("n", "BIGINT"), ("src_file", "VARCHAR"), ("src_row", "BIGINT")),
    addable=("cbucket",),
    intersections=True,
)
SCORES = StagingTable(
    "scores",
    leading=(("ds", "DATE"), ("model", "VARCHAR"), ("item_id", "VARCHAR"), ("score", "DOUBLE"), ("outcome", "BOOLEAN")),
    trailing=(("src_file", "VARCHAR"),),
    intersections=True,
)
LABELS = StagingTable(
    "labels",
    leading=(
        ("ds", "DATE"),
        ("item_id", "VARCHAR"),
        ("labeler_id", "VARCHAR"),
        ("label", "BOOLEAN"),
        ("gold_label", "BOOLEAN"),
    ),
    trailing=(("src_file", "VARCHAR"),),
)
#: Per-user rows of the impressions files for the envy audit (DESIGN §4.7; adapters.envy_profile).
ENVY_ROWS = StagingTable(
    "envy_rows",
    leading=(
        ("ds", "DATE"),
        ("src_file", "VARCHAR"),
        ("user_id", "VARCHAR"),
        ("donor_user_id", "VARCHAR"),
        ("donor_group", "VARCHAR"),
    ),
    trailing=(("n", "BIGINT"), ("n_pos", "BIGINT")),
    frame="envy_staged",
)
#: Every staging table by name.
STAGING_TABLES: dict[str, StagingTable] = {t.name: t for t in (IMPRESSIONS, SCORES, LABELS, ENVY_ROWS)}


def staging_table(name: str) -> StagingTable:
    """The declaration of staging table ``name``. Raises ValueError for an unknown name."""
    try:
        return STAGING_TABLES[name]
    except KeyError:
        raise ValueError(f"unknown staging table {name!r}") from None


def config_columns(cfg: FairmonConfig, table: StagingTable) -> tuple[Column, ...]:
    """``table``'s columns under ``cfg``: the attributes of its input
    (impressions' for ``envy_rows``; intersections for impressions and scores)."""
    if table.name in ("impressions", "envy_rows"):
        imp = cfg.impressions
        return table.columns(imp.attributes, imp.intersections)
    source = getattr(cfg, table.name)
    return table.columns(source.attributes, getattr(source, "intersections", []))


# --- generated statements (cached: a table's text is built once a process) -------------


@functools.cache
def create_sql(table: StagingTable, columns: tuple[Column, ...]) -> str:
    """``CREATE TABLE IF NOT EXISTS`` ``table`` with ``columns`` (an existing table is left as it is)."""
    body = ", ".join(f"{column_ident(c)} {kind}" for c, kind in columns)
    return f"CREATE TABLE IF NOT EXISTS {ident(table.name)} ({body})"


@functools.cache
def add_column_sql(table: StagingTable, column: str, kind: str) -> str:
    """``ALTER TABLE … ADD COLUMN`` for a column a config added (an attribute or cluster bucket)."""
    return f"ALTER TABLE {ident(table.name)} ADD COLUMN {column_ident(column)} {kind}"


@functools.cache
def insert_sql(table: StagingTable) -> str:
    """Append the frame registered as ``table.frame`` (columns matched by name)."""
    return f"INSERT INTO {ident(table.name)} BY NAME SELECT * FROM {ident(table.frame)}"


@functools.cache
def delete_unit_sql(table: StagingTable) -> str:
    """Remove one unit's rows (``$file``: its identity) before they are re-inserted."""
    return f"DELETE FROM {ident(table.name)} WHERE {ident(table.unit_key)} = $file"


#: Whether a table exists in the main schema of the open database (``$table`` bound).
EXISTS_SQL = (
    "SELECT count(*)::BIGINT AS n FROM duckdb_tables() "
    "WHERE table_name = $table AND schema_name = 'main' AND database_name = current_database()"
)


@functools.cache
def drop_sql(table: StagingTable) -> str:
    """Drop ``table`` (its rows are derived from the input files and staged again when needed)."""
    return f"DROP TABLE IF EXISTS {ident(table.name)}"


@functools.cache
def head_sql(table: StagingTable) -> str:
    """The table bound but not run: its columns."""
    return f"SELECT * FROM {ident(table.name)} LIMIT 0"


# --- running them ---------------------------------------------------------------------


def create(con: duckdb.DuckDBPyConnection, table: StagingTable, columns: tuple[Column, ...]) -> None:
    """Create ``table`` with ``columns`` unless it exists (then it is left as it is)."""
    db.run_statement(con, create_sql(table, tuple(columns)))


def restart(con: duckdb.DuckDBPyConnection, table: StagingTable, columns: tuple[Column, ...]) -> None:
    """Drop ``table`` and create it again with ``columns``, forgetting in the
    ingest log every file staged into it (each is staged again when a day
    needs it): for a config whose attributes no longer match the staged
    columns (an attribute removed or replaced)."""
    db.run_statement(con, drop_sql(table))
    db.execute(con, "ingest_log_forget", source=table.name)
    create(con, table, columns)


def add_column(con: duckdb.DuckDBPyConnection, table: StagingTable, column: str, kind: str) -> None:
    """Add ``column`` of DuckDB type ``kind`` to an existing ``table``."""
    db.run_statement(con, add_column_sql(table, column, kind))


def insert(con: duckdb.DuckDBPyConnection, table: StagingTable) -> None:
    """Append the frame registered under ``table.frame`` to ``table``; run it
    inside :func:`one_thread`."""
    db.run_statement(con, insert_sql(table))


@contextmanager
def one_thread(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """DuckDB on one thread inside the block (sql/settings_threads.sql), the
    database's thread count restored after it, also when the block raises. For
    staging: a parallel insert leaves partly filled row groups that the
    checkpoint at close merges again, as much CPU as the insert itself for
    millions of rows (bench/README.md). The setting is
    the database's, not the connection's; wrap the block's transaction, not a
    statement inside it: after a failed statement an open transaction refuses
    every statement, the restoring one included, until it is rolled back."""
    threads = db.rows(con, "settings_threads_current")[0][0]
    db.execute(con, "settings_threads", threads=1)
    try:
        yield
    finally:
        db.execute(con, "settings_threads", threads=threads)


def delete_unit(con: duckdb.DuckDBPyConnection, table: StagingTable, file: str) -> None:
    """Delete the rows of the unit whose identity is ``file`` from ``table``."""
    db.run_statement(con, delete_unit_sql(table), file=file)


def exists(con: duckdb.DuckDBPyConnection, table: StagingTable) -> bool:
    """Whether ``table`` exists yet in the open database."""
    return db.run_statement(con, EXISTS_SQL, table=table.name)[0][0] > 0


def table_columns(con: duckdb.DuckDBPyConnection, table: StagingTable) -> list[str]:
    """The column names ``table`` has now (it must exist)."""
    return db.statement_columns(con, head_sql(table))
