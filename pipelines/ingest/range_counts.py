"""Counts of staged impressions rows, per day, from each day's current files
only (DESIGN §2 "Input identity"): group counts, traffic totals and rows per
cluster bucket of a batch of days in one statement each. A backfill counts
its whole range ahead (:func:`count_range`); the counts wait in the current
run (:class:`fairmon.pipelines.core.run.Run`) until a day takes them, valid
while nothing has been staged since (``Run.generation``).
"""

from __future__ import annotations

import datetime as dt
import io

import duckdb
import polars as pl

from fairmon.pipelines.core import timing
from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.core.run import active_run
from fairmon.pipelines.ingest import staging_tables
from fairmon.pipelines.ingest.sources import day_files
from fairmon.pipelines.storage import db
from fairmon.transforms.registry import polars_schema


def count_days(cfg: FairmonConfig, days: list[dt.date]) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Group counts (sql/group_counts.sql, summed by :func:`group_totals`)
    and, counted independently, staged rows per traffic and arm
    (sql/traffic_totals.sql) of every day of ``days``, from the rows of each
    day's current files only. Returns (counts with a ds column, totals with a
    ds column, per-bucket counts): the third frame holds, when rows carry a
    cluster bucket, the rows and positives per (ds, traffic, arm, attribute,
    group, cbucket) that the cluster-robust variance needs
    (transforms/reo/cluster.py), in no particular order (the estimators index
    them by bucket); it is empty without clustering. The counts are sorted by
    ds, traffic, arm, attribute and group. Empty frames when nothing was ever
    staged. Raises what DuckDB raises."""
    with db.connect(cfg.duckdb_path) as con:
        if not staging_tables.exists(con, staging_tables.IMPRESSIONS):
            empty = pl.DataFrame(schema=polars_schema("group_counts"))
            totals = pl.DataFrame(schema={"ds": pl.Date, "traffic": pl.String, "arm": pl.String, "n": pl.Int64})
            return empty, totals, pl.DataFrame(schema=BUCKET_SCHEMA)
        con.register("day_files", day_files(cfg, days))
        try:
            days_back, policy = cfg.impressions.random_window_days, cfg.impressions.pool_policy
            by_bucket, spans = count_statements(con, cfg.estimation.cluster_buckets, days_back, policy)
            with timing.within("checks"):  # the totals exist to check the counts
                totals = db.query(con, "traffic_totals", window_days=days_back, pool_policy=policy)
        finally:
            con.unregister("day_files")
    counts = group_totals(by_bucket, spans)
    buckets = by_bucket.filter(pl.col("cbucket").is_not_null()).select(list(BUCKET_SCHEMA)).cast(BUCKET_SCHEMA)
    return counts, totals, buckets


def count_statements(
    con: duckdb.DuckDBPyConnection, buckets: int, window_days: int, pool_policy: str
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The per-key counts (sql/group_counts.sql: ds, traffic, arm, attribute,
    group, cbucket, n, n_pos; unsorted) and the spans of the counted rows
    (sql/count_spans.sql: ds, traffic, arm, window_start, window_end) of the
    days of the frame registered as ``day_files`` on ``con``. ``buckets``:
    ``[estimation] cluster_buckets``; ``window_days``/``pool_policy``: the
    random window (``[impressions]``). Raises what DuckDB raises."""
    window = {"window_days": window_days, "pool_policy": pool_policy}
    return db.query(con, "group_counts", buckets=buckets, **window), db.query(con, "count_spans", **window)


def group_totals(by_bucket: pl.DataFrame, spans: pl.DataFrame) -> pl.DataFrame:
    """group_counts rows (DESIGN §3; :func:`polars_schema` ``group_counts``,
    sorted by ds, traffic, arm, attribute, group) from the per-key rows and
    spans of :func:`count_statements`: n and n_pos summed over cbucket (exact
    integer sums), source 'impressions', the span of the (ds, traffic, arm).
    Summed one day at a time: grouping 3.4 M key rows of 7 days at K = 4,096
    at once cost 0.5 CPU-s, day by day in one lazy plan 0.2 (smaller hash
    tables; bench/README issue 37 item 3). Raises polars' errors on frames of other columns."""
    keys = ["traffic", "arm", "attribute", "group"]
    days = by_bucket.get_column("ds").unique().sort().to_list()
    rows = by_bucket.lazy()  # one plan: the days are summed together
    summed = [
        rows.filter(pl.col("ds") == ds)
        .group_by(keys)
        .agg(pl.col("n").sum(), pl.col("n_pos").sum())
        .with_columns(pl.lit(ds, pl.Date).alias("ds"))
        for ds in days
    ]
    frame = pl.concat(summed) if summed else rows.select("ds", *keys, "n", "n_pos")
    return (
        frame.join(spans.lazy(), on=["ds", "traffic", "arm"], how="left")
        .with_columns(pl.lit("impressions").alias("source"))
        .select(list(polars_schema("group_counts")))
        .sort(["ds", *keys])  # the published order; the statement leaves its rows unsorted
        .collect()
    )


#: Per-bucket counts of :func:`count_days` (cluster-robust variance, transforms/reo/cluster.py).
BUCKET_SCHEMA = {
    "ds": pl.Date,
    "traffic": pl.String,
    "arm": pl.String,
    "attribute": pl.String,
    "group": pl.String,
    "cbucket": pl.Int32,
    "n": pl.Int64,
    "n_pos": pl.Int64,
}


def count_range(cfg: FairmonConfig, days: list[dt.date]) -> None:
    """Count every day of ``days`` at once (:func:`count_days`) and keep the
    counts in the current run for :func:`take_range_counts`, valid until the
    next staging write. Outside a run there is nowhere to keep them, and
    nothing is counted."""
    run = active_run()
    if run is None:
        return
    step = days_per_statement(cfg, len(days))
    for i in range(0, len(days), step):
        chunk = days[i : i + step]
        counts, totals, buckets = count_days(cfg, chunk)
        with run.lock:
            for ds in chunk:
                run.range_counts[ds] = (
                    run.generation,
                    counts.filter(pl.col("ds") == ds),
                    totals.filter(pl.col("ds") == ds).drop("ds"),
                    pack_frame(buckets.filter(pl.col("ds") == ds)),  # 7 filters: 0.03 CPU-s, below partition_by's 0.08
                )


#: Staged rows one statement of sql/group_counts.sql may join (a pooled random
#: row joins once per day of its window). Its hash tables took ~0.8 GB per
#: million (7 days at K = 4,096 clustered: 1.7 GB, bench/README issue 37);
#: at TikTok size with few groups a 92-day chunk stays far below, in one statement.
COUNT_ROWS_BUDGET = 1_000_000


def days_per_statement(cfg: FairmonConfig, n_days: int) -> int:
    """How many days :func:`count_range` counts in one statement: all of them
    unless the staged rows a day joins (its own and its random window's,
    estimated from the staging table's rows per day) would pass
    :data:`COUNT_ROWS_BUDGET`. Each day's counts are the same either way
    (sql/group_counts.sql counts every day from its own files only).
    ``n_days``: the range's length; returns 1..n_days (n_days when nothing is
    staged yet). Raises only what DuckDB raises opening the project's file."""
    with db.connect(cfg.duckdb_path) as con:
        if not staging_tables.exists(con, staging_tables.IMPRESSIONS):
            return max(1, n_days)
        ((n_rows, n_staged_days),) = db.rows(con, "impressions_staged_size")
    per_day = n_rows / max(1, n_staged_days) * (1 + cfg.impressions.random_window_days)
    return max(1, min(n_days, int(COUNT_ROWS_BUDGET // max(per_day, 1.0))))


def take_range_counts(ds: dt.date) -> tuple[pl.DataFrame, pl.DataFrame, bytes] | None:
    """Day ``ds``'s (group counts, traffic totals, per-bucket counts packed by
    :func:`pack_frame`, as they are held) counted ahead by
    :func:`count_range` in the current run, if nothing was staged since;
    else None. A day takes its counts once."""
    run = active_run()
    if run is None:
        return None
    with run.lock:
        hit = run.range_counts.pop(ds, None)
    if not hit or hit[0] != run.generation:
        return None
    return hit[1], hit[2], hit[3]


def pack_frame(frame: pl.DataFrame) -> bytes:
    """``frame`` as LZ4-compressed Arrow IPC bytes, for holding a day's
    per-bucket counts (~490,000 rows a day at K = 4,096) from the range's
    count until the day estimates: the frames themselves, held for 7 days,
    kept 50–70 MB a day resident (allocator memory around them; with them
    dropped, a 7-day K = 4,096 count stayed at 1.37 GB instead of 1.95 GB,
    bench/README issue 37 item 3). :func:`unpack_frame` gives it back, the same
    values and types."""
    buf = io.BytesIO()
    frame.write_ipc(buf, compression="lz4")
    return buf.getvalue()


def unpack_frame(data: bytes) -> pl.DataFrame:
    """The frame :func:`pack_frame` packed."""
    return pl.read_ipc(io.BytesIO(data))
