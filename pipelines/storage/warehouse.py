"""Publishing a day's output tables: Hive-partitioned Parquet, replaced
atomically; the DuckDB file reads them through views (:func:`refresh_views`).

Layout: ``<warehouse>/<table>/ds=YYYY-MM-DD/part-0.parquet`` (the ``ds`` column
lives in the path, not in the file). A day is replaced by writing every new
file aside (``<warehouse>/_tmp``), fsyncing it, and only then ``os.replace``-ing
each into place: a reader sees the old file or the new file, never a partial
one, and an error before the swap leaves the previous partitions untouched.
"""

from __future__ import annotations

import datetime as dt
import glob
import os
import time
import uuid
from pathlib import Path

import duckdb
import polars as pl

from fairmon.pipelines.core.faults import fault_point
from fairmon.pipelines.storage import db, ddl
from fairmon.transforms.registry import GATED_TABLES, TABLES, across_days, check_frame

PART_FILE = "part-0.parquet"


def partition_path(warehouse: Path, table: str, ds: dt.date) -> Path:
    """Path of one day's partition file."""
    return warehouse / table / f"ds={ds.isoformat()}" / PART_FILE


def fsync_dir(path: Path) -> None:
    """fsync folder ``path``, so that a rename or removal inside it survives a crash. Raises OSError."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_partitions(
    warehouse: Path, ds: dt.date, tables: dict[str, pl.DataFrame], *, checked: bool = True
) -> dict[str, Path]:
    """Replace day ``ds`` of every table in ``tables`` ({name: frame with a ds column}).

    With ``checked`` (always, but in tests that fake a file an older fairmon
    wrote), every frame is first checked against its table's declaration
    (:func:`fairmon.transforms.registry.check_frame`: the declared columns
    plus ``run_id``, the declared dtypes), so nothing undeclared reaches the
    warehouse; raises :class:`fairmon.transforms.registry.SchemaMismatch`
    naming the table and the column, KeyError for an undeclared table,
    before any file is written.

    All files are written and fsynced aside first; then each is atomically
    renamed over its partition (dq_results last: a crash between two renames
    leaves tables whose ``run_id`` differs from the day's dq_results, which
    readers treat as not published). Returns {table: final path}. Raises
    ValueError when a frame holds rows of another day.
    """
    if checked:
        for name, frame in tables.items():
            check_frame(name, frame)
    clean_tmp(warehouse)
    tmp_dir = warehouse / "_tmp"
    tmp_dir.mkdir(parents=True, exist_ok=True)
    staged: dict[str, Path] = {}
    try:
        for name, frame in tables.items():
            if frame.height and (frame.get_column("ds") != ds).any():
                raise ValueError(f"{name}: rows of another day than {ds}")
            tmp = tmp_dir / f"{name}-{ds.isoformat()}-{uuid.uuid4().hex}.parquet"
            frame.drop("ds").write_parquet(tmp)
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            staged[name] = tmp
            fault_point("parquet_write")
        out = {}
        for name, tmp in staged.items():
            final = partition_path(warehouse, name, ds)
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, final)
            fsync_dir(final.parent)
            out[name] = final
            fault_point("parquet_swap")
        return out
    finally:
        for tmp in staged.values():
            tmp.unlink(missing_ok=True)


def clean_tmp(warehouse: Path, older_than_s: float = 3600.0) -> None:
    """Remove files a killed run left in ``<warehouse>/_tmp`` (older than an hour,
    so a concurrent writer's files are never touched). A file that a
    concurrent writer renames into place between the listing and its age
    check is skipped: it is no longer there to clean."""
    tmp_dir = warehouse / "_tmp"
    if not tmp_dir.is_dir():
        return
    now = time.time()
    for p in tmp_dir.iterdir():
        try:
            age = now - p.stat().st_mtime
        except FileNotFoundError:
            continue
        if age > older_than_s:
            p.unlink(missing_ok=True)


def refresh_views(con: duckdb.DuckDBPyConnection, warehouse: Path, made: dict[str, str] | None = None) -> None:
    """(Re)create the DuckDB views over the warehouse: one per registry table
    and ``<table>_published`` (DESIGN §1 "one copy of the outputs", §3). A
    DuckDB file from an earlier fairmon version, which mirrored the outputs
    into tables, has those tables dropped: the Parquet files are the outputs.

    A view's SQL names only the registry and the warehouse
    (:func:`fairmon.pipelines.storage.ddl.table_view_sql`), so it reads every
    partition present when it is queried and needs no refresh when a
    partition comes or goes. ``made`` ({view: SQL}) holds the views this run
    has already created in this DuckDB file
    (:attr:`fairmon.pipelines.executor.publishing.WarehouseViews.views`; empty
    at the run's first call, which checks every view against the marks the
    DuckDB file holds, :func:`_refresh_views`): a view whose SQL is
    unchanged is left as it is, since creating it again costs a read of every
    partition's footer. ``made`` is updated; None: nothing is recorded. A
    refresh that raises empties ``made``: the next one starts afresh. Raises
    what DuckDB raises."""
    try:
        _refresh_views(con, warehouse, made)
    except BaseException:
        if made is not None:
            made.clear()
        raise


def _refresh_views(con: duckdb.DuckDBPyConnection, warehouse: Path, made: dict[str, str] | None) -> None:
    """:func:`refresh_views`' work, which leaves ``made`` half-filled if it raises.

    At a run's first refresh, a view the DuckDB file already holds with the
    mark of the same SQL (:func:`fairmon.pipelines.storage.ddl.view_mark`,
    left by the run that created it) is kept: a daily run is a new process,
    and creating every view again read every partition's footer, a cost that
    grew with the warehouse's history. A view changed or created otherwise
    (no mark, another SQL) is created again and marked."""
    first = not made
    marks: dict[str, str | None] = {}
    if first:
        db.execute(con, "runs_create")
        db.execute(con, "runs_migrate")
        kinds = dict(db.query(con, "catalog_objects").iter_rows())
        for name in TABLES:
            if kinds.get(name) == "BASE TABLE":
                con.execute(f"DROP TABLE {ddl.ident(name)}")
        marks = dict(db.rows(con, "view_marks"))
    changed = set()
    for name in TABLES:
        sql = ddl.table_view_sql(name, warehouse)
        if made is None or made.get(name) != sql:
            if marks.get(name) != ddl.view_mark(sql):
                _create_view(con, name, sql)
                changed.add(name)
            if made is not None:
                made[name] = sql
    if first:
        db.execute(con, "published_runs_view")
    for name in GATED_TABLES:
        view, sql = f"{name}_published", ddl.published_view_sql(name)
        if name in changed or (first and marks.get(view) != ddl.view_mark(sql)):
            _create_view(con, view, sql)


def _create_view(con: duckdb.DuckDBPyConnection, view: str, sql: str) -> None:
    """Run ``sql`` (``CREATE OR REPLACE VIEW view``) and mark the view with it."""
    con.execute(sql)
    con.execute(ddl.view_comment_sql(view, sql))


def remove_partitions(warehouse: Path, ds: dt.date, keep: set[str]) -> list[str]:
    """Remove day ``ds``'s partitions of every registry table a day's run
    writes that is not in ``keep`` (tables the day's latest run no longer
    produces, e.g. ``reo_ab`` after ``[ab]`` was removed); tables computed
    over the history (stage ``alerts``) are not a day's to remove. Returns
    the tables whose partition was removed."""
    return [
        name for name in TABLES if name not in keep and not across_days(name) and remove_partition(warehouse, name, ds)
    ]


def remove_partition(warehouse: Path, name: str, ds: dt.date) -> bool:
    """Remove day ``ds``'s partition of table ``name``, if any (fsynced).
    Returns whether there was one."""
    part = partition_path(warehouse, name, ds)
    if not part.exists():
        return False
    part.unlink()
    fsync_dir(part.parent)
    part.parent.rmdir()
    return True


def read_table(warehouse: Path, table: str) -> pl.DataFrame:
    """All published partitions of ``table`` as one frame (ds from the path)."""
    root = warehouse / table
    if not any(root.glob(f"ds=*/{PART_FILE}")):
        return pl.DataFrame()
    return (
        pl.scan_parquet(ddl.parquet_glob(warehouse, table), hive_partitioning=True, try_parse_hive_dates=True)
        .collect()
        .select("ds", pl.exclude("ds"))
        .sort("ds")
    )


def latest_runs(duckdb_path: Path, inputs: bool = False) -> pl.DataFrame:
    """Each day's latest run (ds, run_id, status, detail; with ``inputs`` also the inputs and params it
    recorded, JSON) from the ``runs`` table; an empty frame when the DuckDB file or the table does not exist."""
    schema = {"ds": pl.Date, "run_id": pl.String, "status": pl.String, "detail": pl.String}
    if inputs:
        schema |= {"inputs": pl.String, "params": pl.String}
    if not duckdb_path.exists():
        return pl.DataFrame(schema=schema)
    with db.connect(duckdb_path) as con:
        db.execute(con, "runs_create")
        db.execute(con, "runs_migrate")
        return db.query(con, "runs_latest").select(list(schema)).cast(schema)


def run_times(duckdb_path: Path) -> tuple[dict[dt.date, dt.datetime], dict[dt.date, dt.datetime]]:
    """({day: when its latest run started} for the days whose latest run published, {day: when its latest
    quarantined or failed run started}) from ``sql/alerts_run_times.sql``: what decides whether a quarantined or
    failed alert's run of days is over, for the report's top and ``fairmon alerts`` alike. Empty when the DuckDB
    file does not exist. Raises what DuckDB raises (a run holds the file)."""
    if not duckdb_path.exists():
        return {}, {}
    with db.connect(duckdb_path) as con:
        db.ensure(con, ("runs_create", "runs_migrate"))
        times = db.query(con, "alerts_run_times")
    published = times.filter(pl.col("published_at").is_not_null())
    bad = times.filter(pl.col("bad_at").is_not_null())
    return dict(zip(published["ds"], published["published_at"], strict=True)), dict(
        zip(bad["ds"], bad["bad_at"], strict=True)
    )


def query_warehouse(duckdb_path: Path, warehouse: Path, query: str) -> tuple[pl.DataFrame, str | None]:
    """Run a read-only SQL ``query`` over the published outputs without
    holding the project's DuckDB file (``fairmon sql``): an in-memory DuckDB
    gets the same views as the file (:func:`refresh_views`: one per registry
    table over its Parquet partitions, and ``<table>_published``). The run
    history (``runs``, which the ``_published`` views need) is copied from
    the DuckDB file opened read-only when no run holds it; otherwise the
    views over the Parquet files still answer and the returned note says
    that ``runs`` is empty. Once the views are defined the connection reads
    only the warehouse (:func:`lock_down`): ``read_csv('/etc/passwd')`` is
    refused, and no extension is installed or loaded. Returns (result, note or None). Raises
    :class:`duckdb.Error` for an invalid query (its message names the
    problem) and ValueError for a statement that is not a query."""
    con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    try:
        note = None
        if duckdb_path.exists():
            try:
                con.execute(f"ATTACH {ddl.sql_string(str(duckdb_path))} AS project (READ_ONLY)")
                try:
                    con.execute("CREATE TABLE runs AS SELECT * FROM project.runs")
                finally:
                    con.execute("DETACH project")
            except duckdb.Error as e:
                note = f"run history not read ({str(e).splitlines()[0]}): runs and the _published views are empty"
        else:
            note = f"{duckdb_path} does not exist yet: runs and the _published views are empty"
        statements = con.extract_statements(query)
        if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
            raise ValueError("not a query: fairmon sql runs one SELECT statement over the warehouse (read-only)")
        refresh_views(con, warehouse)
        lock_down(con, warehouse)
        return con.sql(query).pl(), note
    finally:
        con.close()


def lock_down(con: duckdb.DuckDBPyConnection, warehouse: Path) -> None:
    """Let ``con`` read files only in the tables' folders of ``warehouse``
    from now on (not a run's half-written files in its ``.tmp``): DuckDB's
    ``allowed_directories`` (each folder as written and glob-escaped, the form
    the views' patterns use), ``enable_external_access = false`` (no other
    file, URL or ATTACH), no extension installed or loaded on demand, and
    ``lock_configuration`` so a query cannot SET any of it back (DuckDB
    "Securing DuckDB")."""
    root = warehouse.resolve()
    folders = [str(root / ddl.table(name).name) for name in TABLES]
    dirs = ", ".join(ddl.sql_string(d + "/") for f in folders for d in dict.fromkeys((f, glob.escape(f))))
    con.execute(f"SET allowed_directories = [{dirs}]")
    for setting in ("enable_external_access", "autoinstall_known_extensions", "autoload_known_extensions"):
        con.execute(f"SET {setting} = false")
    con.execute("SET lock_configuration = true")
