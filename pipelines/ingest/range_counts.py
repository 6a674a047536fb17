"""Counts of staged impressions rows, per day, from each day's current files
only (DESIGN §2 "Input identity"): group counts, traffic totals and rows per
cluster bucket of a batch of days, counted once for the batch
(:func:`count_batch`) after its files are staged; each day carries its own
counts on from there.
"""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

import duckdb
import polars as pl

from fairmon.pipelines.core import timing
from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.core.config_sections import CLUSTER_EXACT
from fairmon.pipelines.ingest import staging_tables
from fairmon.pipelines.ingest.sources import day_files
from fairmon.pipelines.storage import db
from fairmon.transforms.contract import ATTR_PREFIX
from fairmon.transforms.registry import polars_schema


def _empty_day(ds: dt.date) -> tuple[pl.DataFrame, pl.DataFrame, HeldKeys]:
    """A day's (counts, totals, held keys) with no row: nothing was ever staged."""
    totals = pl.DataFrame(schema={"traffic": pl.String, "arm": pl.String, "n": pl.Int64})
    return pl.DataFrame(schema=polars_schema("group_counts")), totals, HeldKeys(ds, pl.DataFrame(schema=BUCKET_SCHEMA))


def _traffic_totals(con: duckdb.DuckDBPyConnection, cfg: FairmonConfig) -> pl.DataFrame:
    """sql/traffic_totals.sql over the registered ``day_files``, timed as a check (it exists to check the counts)."""
    with timing.within("checks"):
        imp = cfg.impressions
        return db.query(con, "traffic_totals", window_days=imp.random_window_days, pool_policy=imp.pool_policy)


def keyed_rows(by_key: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``by_key`` (per-key counts with a ds column) that carry a
    cluster key, as :data:`BUCKET_SCHEMA`."""
    return by_key.filter(pl.col("cbucket").is_not_null()).select(list(BUCKET_SCHEMA)).cast(BUCKET_SCHEMA)


def count_statements(
    con: duckdb.DuckDBPyConnection, buckets: int, window_days: int, pool_policy: str, exact: int = CLUSTER_EXACT
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The per-key counts (ds, traffic, arm, attribute, group, cbucket, n,
    n_pos; unsorted) and the spans of the counted rows (ds, traffic, arm,
    window_start, window_end) of all the days of the frame registered as
    ``day_files`` on ``con``, at once. ``buckets``: ``[estimation]
    cluster_buckets``; ``window_days``/``pool_policy``: the random window
    (``[impressions]``); ``exact``: ``[estimation] cluster_exact_max``.
    Random rows that several days count are counted once (:func:`random_shares`,
    :func:`pooled_rows`) and each of those days gets
    their key rows, the rows it would have counted itself (integer sums).
    Raises what DuckDB raises."""
    shares = random_shares(con, exact, window_days, pool_policy)
    spans = count_spans(con, shares)
    own = own_rows(con, shares, buckets)
    pooled = pooled_rows(con, shares.drop_nulls("share"), buckets)
    days = shares.select(pl.col("day").alias("ds"), "share").drop_nulls("share").unique()
    return pl.concat([own, pooled.drop("ds").join(days, on="share").select(own.columns)]).drop("share"), spans


def random_shares(con: duckdb.DuckDBPyConnection, exact: int, window_days: int, pool_policy: str) -> pl.DataFrame:
    """sql/count_random_shares.sql over the registered ``day_files``: per
    (day, random unit it counts) the day's share of random rows, whether it
    rehashes its keys and the staged rows of the day and of the unit.
    Arguments as :func:`count_statements`. Raises what DuckDB raises."""
    return db.query(con, "count_random_shares", exact=exact, window_days=window_days, pool_policy=pool_policy)


def count_spans(con: duckdb.DuckDBPyConnection, shares: pl.DataFrame) -> pl.DataFrame:
    """sql/count_spans.sql: the span of the rows each day of the registered
    ``day_files`` counts, its random rows' from ``shares`` (:func:`random_shares`)."""
    with _registered(con, day_shares=shares):
        return db.query(con, "count_spans")


def own_rows(con: duckdb.DuckDBPyConnection, shares: pl.DataFrame, buckets: int) -> pl.DataFrame:
    """sql/group_counts.sql: per-key counts of the own rows (every traffic
    but random) of the days of ``shares`` (:func:`random_shares`, or some of
    its rows) from the registered ``day_files``; ds set, share null."""
    days = shares.select("day", "rehashed").unique()
    with _registered(con, count_days=days):
        return count_query(con, "group_counts", buckets=buckets)


def pooled_rows(con: duckdb.DuckDBPyConnection, shares: pl.DataFrame, buckets: int) -> pl.DataFrame:
    """sql/group_counts_pooled.sql: per-key counts of the random rows of each
    share of ``shares`` (:func:`random_shares` rows with a share), counted
    once per share; share set, ds null."""
    units = shares.select("share", "rehashed", "src_file", "ds_start", "ds").unique()
    with _registered(con, count_units=units):
        return count_query(con, "group_counts_pooled", buckets=buckets)


def count_query(con: duckdb.DuckDBPyConnection, name: str, **params) -> pl.DataFrame:
    """Run the count statement ``sql/<name>.sql`` (one that includes
    sql/count_keys.sql) with ``params`` bound, for the staging table's attr__
    columns now (:func:`count_sql`). Raises what DuckDB raises, ValueError for
    a column name that is not an identifier."""
    attrs = [c for c in staging_tables.table_columns(con, staging_tables.IMPRESSIONS) if c.startswith(ATTR_PREFIX)]
    return con.sql(count_sql(name, attrs), params=params or None).pl()


def count_sql(name: str, attrs: list[str]) -> str:
    """The text of the count statement ``sql/<name>.sql`` for the attr__
    columns ``attrs`` (at least one): its ``{{attribute_rows}}`` written as
    that column renamed (attribute, grp) when there is one, else their
    UNPIVOT. Column names are quoted (staging_tables.column_ident); the
    attribute name is a text literal of the same validated name. Raises
    ValueError for a column name that is not an identifier."""
    if len(attrs) == 1:
        q = staging_tables.column_ident(attrs[0])
        rows = f"(SELECT * EXCLUDE ({q}), '{attrs[0]}' AS attribute, {q} AS grp FROM counted)"
    else:
        rows = "counted UNPIVOT INCLUDE NULLS (grp FOR attribute IN (COLUMNS('^attr__')))"
    return db.sql_text(name).replace("{{attribute_rows}}", rows)


@contextmanager
def _registered(con: duckdb.DuckDBPyConnection, **frames: pl.DataFrame) -> Iterator[None]:
    for name, frame in frames.items():
        con.register(name, frame)
    try:
        yield
    finally:
        for name in frames:
            con.unregister(name)


def group_totals(by_bucket: pl.DataFrame, spans: pl.DataFrame) -> pl.DataFrame:
    """group_counts rows (DESIGN §3; :func:`polars_schema` ``group_counts``,
    sorted by ds, traffic, arm, attribute, group) from the per-key rows and
    spans of :func:`count_statements`: n and n_pos summed over cbucket (exact
    integer sums), source 'impressions', the span of the (ds, traffic, arm).
    Summed one day at a time, in one lazy plan (smaller hash tables than all
    days at once). Raises polars' errors on frames of other columns."""
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


#: Per-key counts of :func:`count_days` (cluster-robust variance, transforms/reo/cluster.py).
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


class HeldKeys(NamedTuple):
    """A day's per-key counts as held from the range's count until the day
    estimates: its own rows and its random rows, one frame per random unit
    it counts (:func:`unit_ids`; shared by the days that count the unit,
    held once), each a frame or, past the range's budget, packed
    (:class:`Holder`). :meth:`frame` gives the day's frame
    (:data:`BUCKET_SCHEMA`, no particular row order; a key of random traffic
    has a row per unit that holds it: every reader sums the rows of a key,
    integer counts, the same in any order and grouping)."""

    ds: dt.date
    own: pl.DataFrame | bytes
    pooled: tuple[pl.DataFrame | bytes, ...] | None = None

    def frame(self) -> pl.DataFrame:
        """The day's per-key rows: its own and its random units', with ds set."""
        own = held_frame(self.own)
        if not self.pooled:
            return own
        units = [_dated(held_frame(p), self.ds).select(own.columns) for p in self.pooled]
        return pl.concat([own, *units])


class Holder:
    """Holds a range's per-key frames until their days estimate: as frames
    while their estimated size fits ``budget`` bytes (default
    :data:`HELD_FRAMES_BUDGET`), then packed (:func:`pack_frame`). Packing
    costs CPU on both ends (~50 ms a day at K = 4,096 groups) and pays only
    when many days are held at once: a long range at many groups keeps its
    memory near the budget, a short one (or a day alone) packs nothing."""

    def __init__(self, budget: int | None = None) -> None:
        self.left = HELD_FRAMES_BUDGET if budget is None else budget

    def hold(self, frame: pl.DataFrame) -> pl.DataFrame | bytes:
        """``frame`` as held: itself while the budget lasts, else packed."""
        size = frame.estimated_size()
        if size <= self.left:
            self.left -= size
            return frame
        return pack_frame(frame)


#: Bytes of per-key frames (Polars' estimate) a range's count holds unpacked
#: (:class:`Holder`): a week at many groups fits (bench/README.md), so its days
#: pack nothing; longer ranges pack the rest.
HELD_FRAMES_BUDGET = 128 * 2**20


def count_batch(cfg: FairmonConfig, days: list[dt.date]) -> dict[dt.date, tuple[pl.DataFrame, pl.DataFrame, HeldKeys]]:
    """Count every day of ``days`` (a batch) from the staged rows of each
    day's current files only: per day (group counts, sorted; staged rows per
    traffic and arm, sql/traffic_totals.sql; the per-key counts of the
    cluster-robust variance as :class:`HeldKeys`). The days are counted in
    chunks of about :data:`COUNT_ROWS_BUDGET` staged rows
    (:func:`statement_chunks`); random rows that several days count are
    counted once and held once. Every day has an entry: with no row when
    nothing was ever staged. Raises what DuckDB raises."""
    with db.connect(cfg.duckdb_path) as con:
        if not staging_tables.exists(con, staging_tables.IMPRESSIONS):
            return {ds: _empty_day(ds) for ds in days}
        with _registered(con, day_files=day_files(cfg, days)):
            return _count_chunks(con, cfg, days)


def _count_chunks(con: duckdb.DuckDBPyConnection, cfg: FairmonConfig, days: list[dt.date]) -> dict:
    """For :func:`count_batch`: per day (counts, totals, :class:`HeldKeys`),
    over the registered ``day_files``, chunk by chunk; each random unit
    (:func:`unit_ids`) is counted in the first chunk that needs it and kept
    while a later day still uses it."""
    imp, buckets = cfg.impressions, cfg.estimation.cluster_buckets
    shares = random_shares(con, cfg.estimation.cluster_exact_max, imp.random_window_days, imp.pool_policy)
    spans, totals = count_spans(con, shares), _traffic_totals(con, cfg)
    shares = unit_ids(shares)
    used = shares.drop_nulls("unit")
    units_of = dict(used.group_by("day").agg(pl.col("unit").unique().sort()).iter_rows())
    last_day = dict(used.group_by("unit").agg(pl.col("day").max()).iter_rows())
    pooled: dict[int, tuple[pl.DataFrame, pl.DataFrame | bytes]] = {}  # unit -> (its group sums, its key rows held)
    out, holder = {}, Holder()
    for chunk in statement_chunks(shares, days):
        rows = shares.filter(pl.col("day").is_in(chunk))
        new = rows.filter(pl.col("unit").is_not_null() & ~pl.col("unit").is_in(list(pooled)))
        # a unit's rows counted once, under its number (the statement's share column)
        counted = pooled_rows(con, new.with_columns(pl.col("unit").alias("share")), buckets) if new.height else None
        for (unit,), frame in counted.partition_by("share", as_dict=True).items() if counted is not None else ():
            frame = frame.drop("share")
            pooled[unit] = (_group_sums(frame), holder.hold(keyed_rows(frame)))
        own = own_rows(con, rows, buckets).drop("share")
        for ds in chunk:
            day_own, parts = own.filter(pl.col("ds") == ds), [pooled[u] for u in units_of.get(ds, [])]
            day_rows = pl.concat([day_own, *(_dated(p[0], ds) for p in parts)])
            out[ds] = (
                group_totals(day_rows, spans.filter(pl.col("ds") == ds)),
                totals.filter(pl.col("ds") == ds).drop("ds"),
                HeldKeys(ds, holder.hold(keyed_rows(day_own)), tuple(p[1] for p in parts) or None),
            )
        for unit in [u for u in pooled if last_day[u] <= max(chunk)]:
            del pooled[unit]  # no later day counts it
    return out


def unit_ids(shares: pl.DataFrame) -> pl.DataFrame:
    """``shares`` (:func:`random_shares`) with ``unit``: one integer per
    random unit and rehashed flag that a day counts (null for a day without
    random rows). A unit's key rows are the same for every day that counts
    it under the same flag, so :func:`count_batch` counts each unit once
    and gives each day its units' rows: a pooled row is counted once
    however many days' windows hold it (a 7-day window: 7 times fewer
    random rows counted than per share), and the day's sums over its units
    are the integer sums a count per share gives."""
    keys = ["src_file", "ds_start", "ds", "rehashed"]
    units = shares.drop_nulls("share").select(keys).unique().sort(keys).with_row_index("unit")
    units = units.with_columns(pl.col("unit").cast(pl.Int32))
    return shares.join(units, on=keys, how="left", nulls_equal=False)


def _group_sums(rows: pl.DataFrame) -> pl.DataFrame:
    """A share's per-key rows summed over their keys (one row per traffic,
    arm, attribute and group; cbucket null), once for all its days: what
    :func:`group_totals` would sum of them on each day (integer sums)."""
    keys = ["ds", "traffic", "arm", "attribute", "group"]
    summed = rows.group_by(keys).agg(pl.col("n").sum(), pl.col("n_pos").sum())
    return summed.with_columns(pl.lit(None, pl.Int32).alias("cbucket")).select(rows.columns)


def _dated(rows: pl.DataFrame, ds: dt.date) -> pl.DataFrame:
    """A share's rows (ds null) as day ``ds``'s."""
    return rows.with_columns(pl.lit(ds, pl.Date).alias("ds"))


#: Staged rows one statement of sql/group_counts.sql and sql/group_counts_pooled.sql
#: may count together: the aggregation's hash tables grow with the rows at
#: many groups, and this bounds the count's peak memory (figures in
#: bench/README.md); with few groups a long range stays one statement.
COUNT_ROWS_BUDGET = 1_000_000


def statement_chunks(shares: pl.DataFrame, days: list[dt.date]) -> list[list[dt.date]]:
    """``days`` (sorted) cut into runs that :func:`count_batch` counts in one
    statement each: a day adds its own staged rows and the rows of each of
    its random units (:func:`unit_ids`, ``shares`` with ``unit``) that no
    earlier day counted; a run closes before it would pass
    :data:`COUNT_ROWS_BUDGET`. A day alone may pass it. Each day's counts are
    the same however the days are cut. Raises nothing."""
    own = dict(shares.select("day", "own_rows").unique().iter_rows())
    used = shares.drop_nulls("unit")
    unit_rows = dict(used.select("unit", "unit_rows").unique().iter_rows())
    units_of = dict(used.group_by("day").agg(pl.col("unit").unique()).iter_rows())
    chunks: list[list[dt.date]] = []
    size, counted = 0, set()
    for ds in sorted(days):
        mine = units_of.get(ds, [])
        cost = own.get(ds, 0) + sum(unit_rows[u] for u in mine if u not in counted)
        if not chunks or (chunks[-1] and size + cost > COUNT_ROWS_BUDGET):
            chunks.append([])
            size = 0
        chunks[-1].append(ds)
        size += cost
        counted.update(mine)
    return chunks


def pack_frame(frame: pl.DataFrame) -> bytes:
    """``frame`` as LZ4-compressed Arrow IPC bytes, for holding a day's
    per-key counts (hundreds of thousands of rows a day with thousands of
    groups) from the range's count until the day estimates: held as frames
    for a week of days, they and the allocator memory around them stayed
    resident and set the run's peak (bench/README.md).
    :func:`unpack_frame` gives it back, the same values and types."""
    buf = io.BytesIO()
    frame.write_ipc(buf, compression="lz4")
    return buf.getvalue()


def unpack_frame(data: bytes) -> pl.DataFrame:
    """The frame :func:`pack_frame` packed."""
    return pl.read_ipc(io.BytesIO(data))


def held_frame(held: pl.DataFrame | bytes) -> pl.DataFrame:
    """A frame as :class:`Holder` held it: itself, or unpacked."""
    return held if isinstance(held, pl.DataFrame) else unpack_frame(held)
