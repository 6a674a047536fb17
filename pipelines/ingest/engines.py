"""The engines the count stage's scans run on (DESIGN §1 "Engines").

An engine runs the portable statements of ``sql/`` (profiles, duplicate
ids, envy flags, cluster buckets; :mod:`fairmon.pipelines.storage.portable`)
over rows it registers under a name, and hands back small results as
Polars frames. :class:`DuckEngine` is the embedded default (an in-memory
DuckDB connection on this machine); :class:`SparkEngine` runs the same
statements, translated, on Apache Spark, where the logs live. Only reading
rows differs by engine (:func:`spark_rows`): which file and row each row
came from is DuckDB's ``file_row_number`` and Spark's ``_metadata``.

The profile logic itself (:func:`fairmon.pipelines.ingest.profiles.profile_rows`)
is written once against this interface.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable

import duckdb
import polars as pl

from fairmon.pipelines.core import timing
from fairmon.pipelines.storage import db
from fairmon.pipelines.storage.portable import render, render_spark


class DuckEngine:
    """The embedded engine: portable statements on one DuckDB connection.
    ``rows`` may be DuckDB relations or Polars frames."""

    name = "duckdb"
    errors: tuple[type[BaseException], ...] = (duckdb.Error,)

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con

    def register(self, name: str, rows) -> None:
        """Make ``rows`` (relation or frame) queryable as ``name``."""
        self.con.register(name, rows)

    def unregister(self, name: str) -> None:
        """Drop the name :meth:`register` gave."""
        self.con.unregister(name)

    def sql(self, name: str, params: dict | None = None, **columns: list[str]):
        """``sql/<name>.sql`` rendered (:func:`render`) as a lazy relation, ``params`` bound."""
        return self.con.sql(render(name, **columns), params=params or None)

    @staticmethod
    def columns(rows) -> list[str]:
        """Column names of a relation or frame."""
        return list(rows.columns)

    @staticmethod
    def frame(rows) -> pl.DataFrame:
        """A relation's rows as Polars."""
        return rows.pl()

    @staticmethod
    def with_text(rows, name: str, value: str | None):
        """``rows`` (relation or frame) with the text column ``name`` = ``value`` (NULL for None) added."""
        if isinstance(rows, pl.DataFrame):
            return rows.with_columns(pl.lit(value, pl.String).alias(name))
        const = duckdb.ConstantExpression(value).cast("VARCHAR").alias(name)
        return rows.select(duckdb.StarExpression(), const)

    @staticmethod
    def day_text(rows, name: str):
        """``rows`` (relation or frame) with column ``name`` as the day text
        the input contract reads (:func:`fairmon.transforms.contract_values.parse_date`):
        a DATE or a timestamp as 'YYYY-MM-DD' (one with a time zone in UTC,
        whatever the session's zone), text trimmed; so two files' days compare
        equal whatever type each was written with."""
        if isinstance(rows, pl.DataFrame):
            return rows.with_columns(pl.col(name).cast(pl.String).str.strip_chars())
        kind = str(dict(zip(rows.columns, rows.types))[name])
        col = duckdb.ColumnExpression(name)
        if "TIME ZONE" in kind or kind.startswith("TIMESTAMPTZ"):  # µs or ns
            col = duckdb.FunctionExpression("timezone", duckdb.ConstantExpression("UTC"), col)
        if kind == "DATE" or kind.startswith("TIMESTAMP"):
            day = duckdb.FunctionExpression("strftime", col, duckdb.ConstantExpression("%Y-%m-%d"))
        else:
            day = duckdb.FunctionExpression("trim", col.cast("VARCHAR"))
        others = [duckdb.ColumnExpression(c) for c in rows.columns if c != name]
        return rows.select(*others, day.alias(name))

    def collect_copies(self, parts: Iterable, keys: list[str]) -> int:
        """The duplicated id keys (``keys`` columns) of the rows ``parts``
        into the temporary table ``copies``, one part (file) at a time so
        that memory follows the largest file; timed as a check. Returns the
        number of duplicated keys.

        Each part's keys are hashed to 64 bits first
        (sql/impressions_id_hashes.sql) and the hashes counted in Polars: all
        distinct means no key repeats (equal keys hash equal), so the part
        adds nothing; otherwise the exact aggregation over the keys
        themselves (sql/impressions_duplicate_ids.sql) finds what repeats, so
        ``copies`` is exactly that of the aggregation alone. Counting 7 M
        hashes this way takes about a quarter of the aggregation's time
        (bench/README.md)."""
        with timing.within("checks"):
            created = False
            for part in parts:
                self.con.register("raw_part", part)
                try:
                    exact = self.sql("impressions_duplicate_ids", keys=keys)
                    hashes = self.sql("impressions_id_hashes", keys=keys).pl().get_column("__id_hash")
                    if hashes.n_unique() == hashes.len():
                        if created:
                            continue
                        exact = exact.limit(0)  # the table's columns, no scan
                    self.con.register("dup_part", exact)
                    db.execute(self.con, "impressions_copies_insert" if created else "impressions_copies_create")
                    created = True
                finally:
                    self.con.unregister("dup_part")
                    self.con.unregister("raw_part")
            return db.query(self.con, "impressions_duplicate_ids_count").item() if created else 0


class SparkEngine:
    """Apache Spark: the same portable statements, translated by sqlglot,
    over Spark DataFrames registered as temporary views. Callers hold
    :func:`fairmon.pipelines.storage.spark.session_lock` while they use it
    (view names are per session)."""

    name = "spark"

    def __init__(self, spark):
        from fairmon.pipelines.storage.spark import spark_error_types

        self.spark = spark
        self.errors = spark_error_types()
        self._cached: list = []

    def register(self, name: str, rows) -> None:
        """Make the Spark DataFrame ``rows`` queryable as ``name``."""
        rows.createOrReplaceTempView(name)

    def unregister(self, name: str) -> None:
        """Drop the temporary view ``name``."""
        self.spark.catalog.dropTempView(name)

    def sql(self, name: str, params: dict | None = None, **columns: list[str]):
        """``sql/<name>.sql`` rendered and translated (:func:`render_spark`) as a lazy DataFrame."""
        return self.spark.sql(render_spark(name, **columns), args=params or None)

    @staticmethod
    def columns(rows) -> list[str]:
        """Column names of a DataFrame."""
        return list(rows.columns)

    @staticmethod
    def frame(rows) -> pl.DataFrame:
        """A (small) DataFrame's rows on this machine via Arrow."""
        from fairmon.pipelines.storage.spark import to_polars

        return to_polars(rows)

    @staticmethod
    def with_text(rows, name: str, value: str | None):
        """The DataFrame ``rows`` with the text column ``name`` = ``value`` (NULL for None) added."""
        from pyspark.sql import functions as F

        return rows.withColumn(name, F.lit(value).cast("string"))

    @staticmethod
    def day_text(rows, name: str):
        """:meth:`DuckEngine.day_text` on a Spark DataFrame: a DATE or a
        timestamp as 'yyyy-MM-dd' (fairmon's session runs in UTC), text trimmed."""
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        kind = rows.schema[name].dataType
        if isinstance(kind, (T.DateType, T.TimestampType, T.TimestampNTZType)):
            return rows.withColumn(name, F.date_format(F.col(name), "yyyy-MM-dd"))
        return rows.withColumn(name, F.trim(F.col(name).cast("string")))

    def collect_copies(self, parts: Iterable, keys: list[str]) -> int:
        """The duplicated id keys of all ``parts`` in one aggregation on the
        cluster (sql/impressions_duplicate_ids.sql; Spark spills what does
        not fit), kept as the cached view ``copies``; timed as a check.
        Returns the number of duplicated keys."""
        with timing.within("checks"):
            parts = list(parts)
            rows = parts[0]
            for p in parts[1:]:
                rows = rows.unionByName(p)
            self.register("raw_part", rows)  # kept until release(): Spark Connect resolves views lazily
            dup = self.sql("impressions_duplicate_ids", keys=keys).cache()
            self._cached.append(dup)
            self.register("copies", dup)
            return dup.count()

    def release(self) -> None:
        """Drop what :meth:`collect_copies` cached and registered."""
        for df in self._cached:
            df.unpersist()
        if self._cached:
            self.unregister("copies")
            self.unregister("raw_part")
        self._cached.clear()


def hadoop_literal(path: str) -> str:
    """``path`` with Hadoop's glob characters (``\\ * ? [ ] { }``) escaped by a
    backslash, so that Spark reads the one file named, not a pattern: a project
    folder ``proj[x]`` or a file ``d*1.csv`` is a name (the
    DuckDB engine reads with globbing off). Raises nothing."""
    return re.sub(r"([\\*?\[\]{}])", r"\\\1", path)


def spark_rows(spark, files: list[str], kind: str):
    """The rows of ``files`` (all Parquet, or all CSV read as text) as one
    Spark DataFrame with ``__file`` (the file's position in ``files``) and
    ``__row`` (its 0-based row in the file, header excluded): Parquet's
    ``_metadata.row_index``; for CSV the rows' order within the file, from
    the split each row was read in and its position there (one scan, no
    driver round trip)."""
    from functools import reduce

    from pyspark.sql import Window
    from pyspark.sql import functions as F

    parts = []
    for i, name in enumerate(files):  # one read per file: a small integer names the file, not its URI string
        f = hadoop_literal(name)
        if kind == "parquet":
            df = spark.read.parquet(f)
            df = df.select("*", F.lit(i).alias("__file"), F.col("_metadata.row_index").alias("__row"))
            parts.append(_naive_as_written(df, name))
            continue
        df = spark.read.options(header=True, inferSchema=False, mode="FAILFAST").csv(f)
        df = df.select(
            "*",
            F.lit(i).alias("__file"),
            F.col("_metadata.file_block_start").alias("__block"),
            F.monotonically_increasing_id().alias("__seq"),
        )
        order = Window.partitionBy("__file").orderBy("__block", "__seq")
        parts.append(df.withColumn("__row", F.row_number().over(order) - 1).drop("__block", "__seq"))
    return reduce(lambda a, b: a.unionByName(b), parts)


def _naive_as_written(df, path: str):
    """``df`` (Spark's read of the Parquet file ``path``) with each timestamp
    column that the file's own schema leaves without a time zone (INT96, as
    Spark writes by default, or a timestamp not adjusted to UTC) as Spark's
    TIMESTAMP_NTZ, its UTC wall time (fairmon's session runs in UTC): DuckDB
    and Polars read such a column as a naive timestamp, and Spark otherwise
    hands it on labelled UTC, which the input contract reads as a zoned
    timestamp (a day only at midnight UTC,
    :func:`fairmon.transforms.contract_values.zoned_day_text`). A schema that
    cannot be read here (not a local file) leaves ``df`` as it is."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowException):
        return df
    naive = {f.name for f in schema if pa.types.is_timestamp(f.type) and f.type.tz is None}
    for field in df.schema.fields:
        if field.name in naive and isinstance(field.dataType, T.TimestampType):
            df = df.withColumn(field.name, F.col(field.name).cast("timestamp_ntz"))
    return df


def _ds_day():
    """A ``ds`` partition's day as 'YYYY-MM-DD' text, whether the column is a DATE, a TIMESTAMP (its day
    in the session's time zone, UTC: a zoned instant's day in UTC) or text; a filter on it still prunes
    partitions. A timestamp partition that is not midnight takes its day here and is refused as not a day
    by the contract's ds check on its rows."""
    from pyspark.sql import functions as F

    return F.expr("try_cast(ds AS DATE)").cast("string")  # try_: a text partition that is no date is no day


def _ds_in(days: list[dt.date]):
    """Spark's filter for the ``ds`` partitions ``days`` (:func:`_ds_day`; pruned)."""
    return _ds_day().isin([d.isoformat() for d in days])


def spark_table_rows(spark, table: str, days: list[dt.date]):
    """The rows of the ``ds`` partitions ``days`` of the catalog table
    ``table`` (contract columns), with ``__file`` = the partition's day as
    text and ``__row`` = the row's 0-based position in the partition,
    ordered by data file and row within it (``_metadata``), so a failing
    row is named as row N of partition ds=…."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = spark.table(table).where(_ds_in(days))
    order = Window.partitionBy("ds").orderBy(F.col("_metadata.file_path"), F.col("_metadata.row_index"))
    return df.select("*", _ds_day().alias("__file"), (F.row_number().over(order) - 1).alias("__row"))


def table_fingerprints(spark, table: str, days: list[dt.date]) -> dict[dt.date, tuple[int, int]]:
    """(bytes, latest modification in ns) of the ``ds`` partitions ``days``
    of the catalog table ``table`` that exist, from their data files'
    metadata (``_metadata``: partitions outside ``days`` are pruned and no
    data column is read); what re-ingest and late-data detection compare, as
    a file's (size, mtime) for file inputs. A partition rewritten or
    appended to changes it. Days without a partition are not in the result."""
    from pyspark.sql import functions as F

    files = (
        spark.table(table)
        .where(_ds_in(days))
        .select(
            F.col("ds").cast("date").alias("ds"),
            F.col("_metadata.file_path").alias("f"),
            F.col("_metadata.file_size").alias("size"),
            F.col("_metadata.file_modification_time").alias("mtime"),
        )
        .distinct()
        .groupBy("ds")
        .agg(F.sum("size").alias("size"), F.max(F.unix_micros("mtime")).alias("mtime_us"))
    )
    return {r["ds"]: (int(r["size"]), int(r["mtime_us"]) * 1000) for r in files.collect()}
