"""Publishing a day's output tables: Hive-partitioned Parquet, replaced atomically,
mirrored into the DuckDB file.

Layout: ``<warehouse>/<table>/ds=YYYY-MM-DD/part-0.parquet`` (the ``ds`` column
lives in the path, not in the file). A day is replaced by writing every new
file aside (``<warehouse>/_tmp``), fsyncing it, and only then ``os.replace``-ing
each into place: a reader sees the old file or the new file, never a partial
one, and an error before the swap leaves the previous partitions untouched.
"""

from __future__ import annotations

import datetime as dt
import os
import time
import uuid
from pathlib import Path

import duckdb
import polars as pl

from fairmon.pipelines.faults import fault_point
from fairmon.pipelines.storage import db
from fairmon.pipelines.storage import tables as ddl
from fairmon.transforms.tables import GATED_TABLES

PART_FILE = "part-0.parquet"


def partition_path(warehouse: Path, table: str, ds: dt.date) -> Path:
    """Path of one day's partition file."""
    return warehouse / table / f"ds={ds.isoformat()}" / PART_FILE


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_partitions(warehouse: Path, ds: dt.date, tables: dict[str, pl.DataFrame]) -> dict[str, Path]:
    """Replace day ``ds`` of every table in ``tables`` ({name: frame with a ds column}).

    All files are written and fsynced aside first; then each is atomically
    renamed over its partition (dq_results last: a crash between two renames
    leaves tables whose ``run_id`` differs from the day's dq_results, which
    readers treat as not published). Returns {table: final path}. Raises
    ValueError when a frame holds rows of another day.
    """
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
            _fsync_dir(final.parent)
            out[name] = final
            fault_point("parquet_swap")
        return out
    finally:
        for tmp in staged.values():
            tmp.unlink(missing_ok=True)


def clean_tmp(warehouse: Path, older_than_s: float = 3600.0) -> None:
    """Remove files a killed run left in ``<warehouse>/_tmp`` (older than an hour,
    so a concurrent writer's files are never touched)."""
    tmp_dir = warehouse / "_tmp"
    if not tmp_dir.is_dir():
        return
    now = time.time()
    for p in tmp_dir.iterdir():
        if now - p.stat().st_mtime > older_than_s:
            p.unlink(missing_ok=True)


def sync_duckdb(con: duckdb.DuckDBPyConnection, ds: dt.date, tables: dict[str, pl.DataFrame]) -> None:
    """Replace day ``ds`` of each table in the DuckDB file, all in one transaction.

    Also (re)creates the ``<table>_published`` views, which show only days
    whose data-quality results are all successful. DDL and statements come
    from the table registry (:mod:`fairmon.pipelines.storage.tables`).
    Raises KeyError for a table the registry does not declare.
    """
    con.execute(ddl.create_sql("dq_results"))
    for name in tables:
        con.execute(ddl.create_sql(name))
        if name in GATED_TABLES:
            con.execute(ddl.published_view_sql(name))
    with db.transaction(con):
        for name, frame in tables.items():
            con.register("new_rows", frame)
            try:
                con.execute(ddl.delete_day_sql(name), {"ds": ds})
                fault_point("duckdb_txn")
                con.execute(ddl.insert_sql(name, "new_rows"))
            finally:
                con.unregister("new_rows")


def read_table(warehouse: Path, table: str) -> pl.DataFrame:
    """All published partitions of ``table`` as one frame (ds from the path)."""
    root = warehouse / table
    if not any(root.glob(f"ds=*/{PART_FILE}")):
        return pl.DataFrame()
    return (
        pl.scan_parquet(root / "ds=*" / PART_FILE, hive_partitioning=True, try_parse_hive_dates=True)
        .collect()
        .select("ds", pl.exclude("ds"))
        .sort("ds")
    )
