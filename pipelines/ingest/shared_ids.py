"""Id keys repeated across two of a day's impressions files.

DESIGN §2 makes (ds, traffic, request_id, item_id) unique over the whole
impressions log, not only within a file. Within a file the count stage's
duplicate-id scan checks it (``ids_unique``, sql/impressions_duplicate_ids.sql);
across files only a file copied whole was caught (``rows_unique_across_files``).
Here a day's files are compared pair by pair, but only the pairs whose staged
rows could share a key at all (same traffic, overlapping dates,
sql/impressions_overlapping_files.sql, read from the staged profiles; a
pool's rows have no date of their own, so two pools of one traffic always
pair): a day's file holds its own day, random traffic comes from one pool
or from pools of other rows, other traffic from another file, so clean
inputs give no pair and no input row is read again.
A pair that overlaps (a day split over two files, two pools over one day,
rows pasted into another day's file) has its key columns read again and
joined (sql/impressions_shared_ids.sql), on the engine that profiles the
files: DuckDB (spills to disk when large) or Spark.
"""

from __future__ import annotations

import polars as pl

from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.ingest.engines import DuckEngine, SparkEngine, spark_rows
from fairmon.pipelines.ingest.file_summaries import FileSummaries, file_summaries
from fairmon.pipelines.ingest.identity import IngestUnit, first_line, table_partition
from fairmon.pipelines.ingest.profiles import parquet_rows, scratch
from fairmon.pipelines.storage import db
from fairmon.transforms.contract import InputContractError

#: The id key (DESIGN §2), compared as text.
KEY_COLUMNS = ("ds", "traffic", "request_id", "item_id")
#: The repeated keys a failure lists (the count is always exact).
SAMPLE_KEYS = 5


def overlapping_pairs(
    cfg: FairmonConfig, files: list[str], pools: list[str], known: FileSummaries | None = None
) -> list[tuple[str, str]]:
    """Pairs (first, second) of the staged file identities ``files`` whose
    staged rows share a traffic and overlapping dates, or a traffic alone when
    either is one of the ``pools`` (identities of date-less pooled files)
    (sql/impressions_overlapping_files.sql over each file's staged traffic
    and dates, read once a batch: ``known``, file_summaries; on the project's DuckDB file).
    Raises what DuckDB raises."""
    with db.connect(cfg.duckdb_path) as con:
        con.register("file_spans", file_summaries(con, "spans", sorted(files), pools, known))
        try:
            rows = db.rows(con, "impressions_overlapping_files")
        finally:
            con.unregister("file_spans")
    return [(a, b) for a, b in rows]


def _keyed(engine, rows, unit: IngestUnit):
    """``rows`` of ``unit`` with ds (its day as text: the unit's day for a
    one-day file without ds, NULL for a pool) and traffic columns (the unit's traffic), or None
    when the file has no request_id and item_id (nothing to compare)."""
    cols = set(engine.columns(rows))
    if not {"request_id", "item_id"} <= cols or ("traffic" not in cols and unit.traffic is None):
        return None
    if "ds" not in cols:
        one_day = unit.ds_start == unit.ds_end and unit.scope != "random"
        rows = engine.with_text(rows, "ds", unit.ds_end.isoformat() if one_day else None)
    else:  # a DATE, a timestamp (zoned or not) or text: the day the contract reads, as text
        rows = engine.day_text(rows, "ds")
    if "traffic" not in cols:
        rows = engine.with_text(rows, "traffic", unit.traffic)
    return rows


def _shared_on(engine, pair: list) -> pl.DataFrame:
    """The shared keys of the two (engine, rows, unit) read in ``pair``."""
    names = ("ids_a", "ids_b")
    for name, (rows, unit) in zip(names, pair):
        keyed = _keyed(engine, rows, unit)
        if keyed is None:
            return pl.DataFrame()
        engine.register(name, keyed)
    try:
        return engine.frame(engine.sql("impressions_shared_ids", {"limit": SAMPLE_KEYS}))
    finally:
        for name in names:
            engine.unregister(name)


def shared_ids(cfg: FairmonConfig, first: IngestUnit, second: IngestUnit) -> pl.DataFrame:
    """The id keys both ``first`` and ``second`` hold: up to
    :data:`SAMPLE_KEYS` rows (ds, traffic, request_id, item_id as text,
    ordered) with ``n_shared``, the exact number of shared keys; no rows when
    none is shared or a file has no id columns. Read by Spark with ``engine =
    "spark"`` (catalog partitions hold one day each and never overlap), else
    by DuckDB (Parquet scanned, CSV read as text).

    Raises :class:`InputContractError` naming the pair when a file cannot be read.
    """
    units = [first, second]
    where = f"{first.file} or {second.file}"
    if any(table_partition(u.file) is not None for u in units) or cfg.impressions.format == "coat":
        return pl.DataFrame()
    if cfg.engine == "spark":
        from fairmon.pipelines.storage.spark import session_lock, spark_session

        with session_lock():
            engine = SparkEngine(spark_session(cfg.spark))
            try:
                kinds = ["parquet" if _parquet(u) else "csv" for u in units]
                pair = [(spark_rows(engine.spark, [str(u.file)], k), u) for u, k in zip(units, kinds)]
                return _shared_on(engine, pair)
            except engine.errors as e:
                raise InputContractError(f"cannot read file: {first_line(e)}", file=where) from None
    engine = DuckEngine(scratch())
    try:
        pair = [(_duck_rows(engine, u), u) for u in units]
        return _shared_on(engine, pair)
    except engine.errors as e:
        raise InputContractError(f"cannot read file: {first_line(e)}", file=where) from None


def _parquet(unit: IngestUnit) -> bool:
    return unit.file.suffix.lower() in (".parquet", ".pq")


def _duck_rows(engine: DuckEngine, unit: IngestUnit):
    """The rows of ``unit``'s file for DuckDB: a lazy Parquet scan, or the CSV's key columns read as text."""
    if _parquet(unit):
        return parquet_rows(engine.con, [str(unit.file)])
    try:
        header = pl.read_csv(unit.file, infer_schema=False, glob=False, n_rows=0).columns
        keys = [c for c in header if c in KEY_COLUMNS] or header[:1]  # only the key columns are held
        return pl.read_csv(unit.file, infer_schema=False, glob=False, columns=keys)
    except pl.exceptions.NoDataError:
        return pl.DataFrame()
    except (pl.exceptions.ComputeError, OSError) as e:
        raise InputContractError(f"cannot read file: {e}", file=str(unit.file)) from None
