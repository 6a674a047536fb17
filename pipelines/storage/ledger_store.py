"""The privacy ledger's copy of record, in the warehouse beside the releases (DESIGN §4.6).

A release's ε is spent for good: deleting or replacing the DuckDB file, a new
``duckdb`` path or a changed config must spend nothing and reset nothing. So
every release part is written to ``<warehouse>/_ledger/releases/`` (one
Parquet file per release, written aside, fsynced and renamed into place)
before the DuckDB tables record it, and each population's individuals to
``<warehouse>/_ledger/members/`` with its first release. The DuckDB tables
``privacy_ledger`` and ``privacy_ledger_members`` are rebuilt from these files
before every charge (:func:`sync_into`); a DuckDB ledger that holds a
population release the files lack disagrees, and the charge is refused.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path

import duckdb
import polars as pl

from fairmon.pipelines.storage import db
from fairmon.pipelines.storage.warehouse import fsync_dir

LEDGER_DIR = "_ledger"
RELEASE_SCHEMA = {
    "dataset": pl.String,
    "release_id": pl.String,
    "epsilon": pl.Float64,
    "released_at": pl.Datetime("us"),
    "description": pl.String,
}


class LedgerDisagrees(RuntimeError):
    """The DuckDB ledger records population releases the warehouse's ledger files lack."""


def _write(frame: pl.DataFrame, final: Path) -> None:
    """``frame`` to ``final`` atomically: written aside, fsynced, renamed, its folder fsynced."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex}.tmp")
    frame.write_parquet(tmp)
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, final)
    fsync_dir(final.parent)


def members_file(warehouse: Path, population: str) -> Path:
    """The file of ``population``'s individuals (named by a hash of the population key)."""
    return warehouse / LEDGER_DIR / "members" / f"{hashlib.sha256(population.encode()).hexdigest()[:32]}.parquet"


def record_release(warehouse: Path, parts: pl.DataFrame, population: str, members: pl.DataFrame) -> None:
    """Write one release's ledger rows ``parts`` (:data:`RELEASE_SCHEMA`; its
    first ``release_id`` names the file) and, when the population has none
    yet, its individuals (``members``: column item_id). Raises OSError."""
    mfile = members_file(warehouse, population)
    if not mfile.exists():
        ids = members.select(pl.col("item_id").cast(pl.String)).unique().sort("item_id")
        _write(ids.with_columns(pl.lit(population).alias("population")).select("population", "item_id"), mfile)
    name = parts.get_column("release_id")[0].split(":", 1)[0]
    _write(parts.cast(RELEASE_SCHEMA), warehouse / LEDGER_DIR / "releases" / f"{name}.parquet")


def read_releases(warehouse: Path) -> pl.DataFrame:
    """Every release row of the warehouse's ledger files (:data:`RELEASE_SCHEMA`; empty when none)."""
    files = sorted((warehouse / LEDGER_DIR / "releases").glob("*.parquet"))
    if not files:
        return pl.DataFrame(schema=RELEASE_SCHEMA)
    return pl.concat([pl.read_parquet(f, glob=False).cast(RELEASE_SCHEMA) for f in files])


def sync_into(con: duckdb.DuckDBPyConnection, warehouse: Path) -> int:
    """Make the DuckDB ledger tables hold every release and member list of the
    warehouse's files (inside the caller's transaction). A DuckDB ledger with
    population releases and no ledger files at all (a project from before the
    files) is written out to them once instead. Returns the release rows
    added to DuckDB. Raises :class:`LedgerDisagrees` when DuckDB holds a
    population release the files lack, OSError for unreadable files."""
    files = read_releases(warehouse)
    have = db.query(con, "ledger_rows").cast(RELEASE_SCHEMA)
    ours = have.filter(pl.col("dataset").str.starts_with("population:"))
    if files.is_empty() and ours.height:
        _export(con, warehouse, ours)
        return 0
    missing = ours.join(files, on="release_id", how="anti")
    if missing.height:
        raise LedgerDisagrees(
            f"the DuckDB ledger records {missing.height} release part(s) ({', '.join(missing['release_id'][:3])}) "
            f"that {warehouse / LEDGER_DIR} lacks: the warehouse's ledger files are the record of what was "
            "spent; restore them (or this DuckDB file's project) before releasing again"
        )
    new = files.join(have, on="release_id", how="anti")
    if new.height:
        con.register("ledger_new", new)
        try:
            db.execute(con, "ledger_sync_insert")
        finally:
            con.unregister("ledger_new")
    for f in sorted((warehouse / LEDGER_DIR / "members").glob("*.parquet")):
        listed = pl.read_parquet(f, glob=False)
        con.register("ledger_members_new", listed)
        try:
            db.execute(con, "ledger_members_sync")
        finally:
            con.unregister("ledger_members_new")
    return new.height


def _export(con: duckdb.DuckDBPyConnection, warehouse: Path, ours: pl.DataFrame) -> None:
    """Write a DuckDB-only ledger (``ours``: its population rows) and its member lists to the files."""
    for (release,), parts in ours.group_by(pl.col("release_id").str.split(":").list.first()):
        _write(parts, warehouse / LEDGER_DIR / "releases" / f"{release}.parquet")
    for (population,) in ours.select("dataset").unique().iter_rows():
        ids = db.query(con, "ledger_members_of", population=population)
        if ids.height and not members_file(warehouse, population).exists():
            _write(ids, members_file(warehouse, population))
