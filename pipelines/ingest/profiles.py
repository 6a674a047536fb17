"""Impressions profiles: a file's rows summed to one row per distinct
combination of the contract columns (a few thousand rows however many rows
the file has), with the duplicate-id check, the envy flags and the rows per
cluster bucket, computed by the same statements on DuckDB or Spark
(:mod:`fairmon.pipelines.ingest.engines`, sql/impressions_profile*.sql).
Reading a file and deciding which engine scans it is
:mod:`fairmon.pipelines.ingest.adapters`' part.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

import duckdb
import polars as pl

from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.core.config_sections import CLUSTER_EXACT
from fairmon.pipelines.ingest.engines import DuckEngine, SparkEngine
from fairmon.pipelines.ingest.identity import first_line
from fairmon.pipelines.storage import db
from fairmon.transforms.contract import BUCKET_LABEL, CLUSTER_BUCKET, PROFILE_ROW, InputContractError
from fairmon.transforms.reo.cluster_keys import cluster_key_params

ID_KEY = ("ds", "traffic", "request_id", "item_id")
_local = threading.local()  # per thread by nature: an in-memory DuckDB scratch connection, no run state


def scratch() -> duckdb.DuckDBPyConnection:
    """This thread's in-memory DuckDB connection for scanning input files
    (opening one costs about 13 ms; a backfill reuses it for every file).
    The main thread's is closed at exit, so that what DuckDB spilled to disk
    is removed even when the ``fairmon`` script skips the interpreter's
    teardown; a worker thread's goes with its thread."""
    if getattr(_local, "con", None) is None:
        _local.con = duckdb.connect()
        if threading.current_thread() is threading.main_thread():
            atexit.register(_local.con.close)
        db.execute(_local.con, "settings_quiet")
        db.execute(_local.con, "settings_memory")
    return _local.con


def engine_of(con) -> DuckEngine | SparkEngine:
    """``con`` as an engine: a DuckDB connection becomes a :class:`DuckEngine`; an engine stays itself."""
    return DuckEngine(con) if isinstance(con, duckdb.DuckDBPyConnection) else con


def duplicate_ids(con, parts: Iterable, keys: list[str]) -> int:
    """Find the duplicated id keys of impressions rows given as ``parts``
    (relations or frames, e.g. one per file, all with the ``keys`` columns)
    into the temporary table ``copies`` (``con``: a DuckDB connection or an
    engine, :meth:`DuckEngine.collect_copies`); timed as a check. Returns
    the number of duplicated keys."""
    return engine_of(con).collect_copies(parts, keys)


def cluster_column(cfg: FairmonConfig) -> tuple[str, bool] | None:
    """The id whose rows form one cluster for the robust variance (config
    ``[estimation] cluster_by``), and whether a file must have it: ``auto``
    takes request_id where present; ``none`` gives None."""
    by = cfg.estimation.cluster_by
    if by == "none":
        return None
    return ("request_id", False) if by == "auto" else (by, True)


class NullClusterId(InputContractError):
    """A row without a cluster id (null or blank) while rows are clustered
    (``[estimation] cluster_by``): ``column``, 1-based ``row`` and, for a
    scan of several files, the ``file_index`` (``__file``) that the caller
    turns into the file's name."""

    #: The pre-flight check's name for it (:mod:`fairmon.pipelines.ingest.preflight_values`).
    check = "cluster_id_not_empty"
    WHY = (
        "the cluster id is empty; rows are clustered by it ([estimation] cluster_by), so every row needs one: "
        'fill it, or set cluster_by = "none"'
    )

    def __init__(self, column: str, row: int, file_index: int | None = None, file: str | None = None):
        self.file_index = file_index
        self.message_at = f"column {column!r}, row {row}: {self.WHY}"
        super().__init__(self.WHY, file=file, column=column, row=row)

    def __reduce__(self):
        return type(self), (self.column, self.row, self.file_index, self.file)


class RaggedRow(InputContractError):
    """A CSV row with more fields than the header (an unquoted delimiter in a
    value) or fewer (a value left out, which Polars reads as null: a phantom
    arm "all", a missing id), raised by
    :func:`fairmon.pipelines.ingest.adapters.read_table`: a defect of the
    file, so the pre-flight value scan refuses its day as it does an
    unreadable header (check :attr:`check`), and a run quarantines it rather
    than failing. ``message_at`` is what it says of the file."""

    #: The pre-flight check's name for it (:mod:`fairmon.pipelines.ingest.preflight_values`).
    check = "readable"

    def __init__(self, why: str, file: str):
        self.message_at = f"cannot read file: {why}"
        super().__init__(self.message_at, file=file)


class ClusterScan(NamedTuple):
    """How :func:`profile_rows` splits rows by cluster: the id ``column``,
    the number of hash ``buckets``, (for the label per bucket,
    sql/impressions_profile_buckets.sql) the ``signals`` and whether the
    label rule is ``all`` of them (else any), and the most ids a file sums
    one by one (``exact``, ``[estimation] cluster_exact_max``)."""

    column: str
    buckets: int
    signals: tuple[str, ...] = ()
    label_all: bool = False
    exact: int = CLUSTER_EXACT


def cluster_scan(cfg: FairmonConfig) -> ClusterScan | None:
    """The :class:`ClusterScan` for :func:`profile_rows`, or None without clustering."""
    cluster = cluster_column(cfg)
    if cluster is None:
        return None
    imp = cfg.impressions
    est = cfg.estimation
    return ClusterScan(
        cluster[0], est.cluster_buckets, tuple(imp.signals), imp.label_rule == "all", est.cluster_exact_max
    )


def _bucketed(engine, raw, cluster: ClusterScan | None, file: str):
    """``raw`` with the __cbucket column of sql/impressions_bucket.sql when it has the cluster column
    (per-cluster keys for a file of at most ``exact`` ids, else hash buckets). Raises
    :class:`NullClusterId` for a row without an id (sql/impressions_null_cluster.sql)."""
    if cluster is None or cluster[0] not in engine.columns(raw):
        return raw
    engine.register("raw_in", raw)
    scope = ["__file"] if "__file" in engine.columns(raw) else []  # a file's id count decides its keys
    null = engine.frame(engine.sql("impressions_null_cluster", cluster=[cluster[0]], scope=scope))
    if null.height:
        index = int(null.item(0, "__scope")) if scope else None  # DuckDB may widen it (HUGEINT: a Decimal)
        raise NullClusterId(cluster[0], int(null.item(0, "__row")) + 1, index, None if scope else file)
    name = "impressions_bucket_rows" if ids_mostly_distinct(engine, cluster[0]) else "impressions_bucket"
    return engine.sql(name, cluster_key_params(cluster.buckets, cluster.exact), cluster=[cluster[0]], scope=scope)


#: Rows of the sample that decides how the cluster keys are computed (:func:`ids_mostly_distinct`).
ID_SAMPLE_ROWS = 100_000


def ids_mostly_distinct(engine, column: str) -> bool:
    """Whether the first :data:`ID_SAMPLE_ROWS` rows registered as ``raw_in``
    have fewer than two rows per id in ``column`` (sql/impressions_bucket_sample.sql),
    on DuckDB: each row's id is then hashed (sql/impressions_bucket_rows.sql)
    rather than each distinct id joined back. Either statement gives every
    row the same key; this decides only what it costs."""
    if engine.name != "duckdb":
        return False
    ids, n = engine.sql("impressions_bucket_sample", {"rows": ID_SAMPLE_ROWS}, cluster=[column]).fetchall()[0]
    return 2 * ids > n


def _labels_in_sql(engine, raw, cluster: ClusterScan) -> bool:
    """Whether the label per cluster bucket can be computed in the scan
    (sql/impressions_profile_buckets.sql): on DuckDB, with every signal a
    boolean or numeric column, whose cast to BOOLEAN is the contract's
    parse (transforms/contract_values.parse_bool: 0/1, true/false; any other number
    fails the contract on the profile). Text signals ("t", " yes") keep the
    profile split by bucket, parsed by the contract itself."""
    signals = cluster.signals
    if engine.name != "duckdb" or not signals:
        return False
    if isinstance(raw, pl.DataFrame):
        types = {c: t.is_numeric() or t == pl.Boolean for c, t in raw.schema.items()}
    else:
        types = {c: t.id in _SQL_BOOLEAN_TYPES for c, t in zip(raw.columns, raw.types)}
    return all(types.get(c, False) for c in signals)


#: DuckDB type ids whose cast to BOOLEAN is the contract's parse of a signal.
_SQL_BOOLEAN_TYPES = frozenset(
    {
        "boolean",
        "tinyint",
        "smallint",
        "integer",
        "bigint",
        "hugeint",
        "utinyint",
        "usmallint",
        "uinteger",
        "ubigint",
        "float",
        "double",
        "decimal",
    }
)


#: Profile columns of a file read under [envy] (sql/impressions_donor_flag.sql): false on a
#: default or swap row without a user_id, and on a swap row without a donor.
ENVY_FLAGS = ("has_user_id", "swap_has_donor")
#: The columns that name a swap row's donor (either is enough).
DONOR_COLUMNS = ("policy_user_id", "policy_group")


def profile_columns(cfg: FairmonConfig) -> list[str]:
    """The contract columns an impressions profile groups by: ds, traffic,
    arm, signals and attributes, plus :data:`ENVY_FLAGS` under ``[envy]``."""
    imp = cfg.impressions
    return ["ds", "traffic", "arm", *imp.signals, *imp.attributes, *(ENVY_FLAGS if cfg.envy else [])]


def _with_envy_flags(engine, raw, file: str):
    """``raw`` with the :data:`ENVY_FLAGS` columns (sql/impressions_donor_flag*.sql).
    Raises :class:`InputContractError` when the file has no user_id column."""
    present = engine.columns(raw)
    if "user_id" not in present:
        raise InputContractError(
            "required column is missing ([envy] needs each row's user)", file=file, column="user_id"
        )
    engine.register("raw_flag", raw)
    donors = [c for c in present if c in DONOR_COLUMNS]
    if not donors:
        return engine.sql("impressions_donor_flag_none")
    return engine.sql("impressions_donor_flag", donors=donors)


def profile_rows(
    con,
    raw,
    columns: list[str],
    file: str,
    duplicated: int | None = None,
    cluster: ClusterScan | None = None,
) -> pl.DataFrame:
    """Distinct-value profile of impressions rows (sql/impressions_profile*.sql).

    ``con``: a DuckDB connection or an engine (:mod:`fairmon.pipelines.ingest.engines`:
    the same statements on DuckDB or Spark); ``raw``: a DuckDB relation or Polars
    frame (a Spark DataFrame on Spark) of the rows with a 0-based
    ``__row`` column (and ``__file`` when it holds several files: profiles
    and id keys are then per file); ``columns``: the contract columns to
    group by; ``duplicated``: the result of :func:`duplicate_ids` when the
    caller ran it already (else it runs here on ``raw``). Returns one row
    per distinct combination of the present ``columns`` with ``__n`` (rows),
    ``__first_row`` and, when the rows have request_id and item_id,
    ``id_copies`` (rows sharing the row's id key); sorted by ``__first_row``.
    Its size is the number of distinct combinations (a few thousand for six
    signals and two attributes), not the number of rows. With ``cluster``
    (:class:`ClusterScan`) and its id column present, the rows are also
    counted per ``__cbucket``, the hash bucket of the row's cluster id
    (sql/impressions_bucket.sql, transforms/reo/cluster.py): on DuckDB with
    boolean or numeric signals, as rows per combination of the non-signal
    columns, label ``__y`` and bucket below the profile rows (their signals
    null; sql/impressions_profile_buckets.sql,
    :func:`fairmon.transforms.contract.profile_part` gives the profile
    proper, sorted by ``__first_row``; the rows come in the scan's order);
    otherwise every combination is split by bucket, sorted by
    ``__first_row`` (then bucket, a profile row first).
    Raises :class:`InputContractError` (naming ``file``) when the engine cannot read the rows.
    """
    engine = engine_of(con)
    present = set(engine.columns(raw))
    cols = [c for c in ("__file", *columns) if c in present]
    ids = {"request_id", "item_id"} <= present
    keys = [c for c in ("__file", *ID_KEY) if c in present]
    registered = []
    try:
        if ids and duplicated is None:
            duplicated = engine.collect_copies([raw], keys)
        if ENVY_FLAGS[0] in columns and "traffic" in present:
            raw = _with_envy_flags(engine, raw, file)
            registered.append("raw_flag")
            cols += ENVY_FLAGS
        split = None  # the grouping set of the rows per bucket and label (sql/impressions_profile_buckets.sql)
        if cluster is not None and cluster[0] in present:
            labels = _labels_in_sql(engine, raw, cluster)
            registered.append("raw_in")
            raw = _bucketed(engine, raw, cluster, file)
            if labels:
                skip = {*cluster.signals, *ENVY_FLAGS}
                split = [c for c in ("__file", *columns) if c in present and c not in skip] or None
            if split is None:
                cols.append(CLUSTER_BUCKET)
            elif duplicated:  # the profile rows are split by id_copies as sql/impressions_profile_ids.sql splits them
                engine.register("raw_ids", raw)
                registered.append("raw_ids")
                raw = engine.sql("impressions_with_copies", keys=keys)
                cols.append("id_copies")
        grouped = [c for c in engine.columns(raw) if c in cols]  # in the rows' own column order
        engine.register("raw", raw)
        registered.append("raw")
        if not grouped:
            return engine.frame(engine.sql("impressions_row_count"))
        if split is not None:
            profile = _bucket_profile(engine, grouped, split, cluster, ids)
        elif duplicated and "id_copies" not in grouped:
            profile = engine.frame(engine.sql("impressions_profile_ids", columns=grouped, keys=keys))
        else:  # id_copies, if counted, is one of the rows' columns (sql/impressions_with_copies.sql)
            profile = engine.frame(engine.sql("impressions_profile", columns=grouped))
        return ordered_profile(profile, ids)
    except engine.errors as e:  # Spark's messages go on with hints and a JVM stack trace
        raise InputContractError(
            f"cannot read file: {first_line(e) if engine.name == 'spark' else e}", file=file
        ) from None
    finally:
        for name in reversed(registered):
            engine.unregister(name)


def _bucket_profile(engine, grouped: list[str], split: list[str], cluster: ClusterScan, ids: bool) -> pl.DataFrame:
    """For :func:`profile_rows`: the profile proper with the rows per bucket
    and label below it (sql/impressions_profile_buckets.sql over the
    registered ``raw``; ``grouped``: the profile's grouping set, ``split``:
    the bucket rows' columns besides label and bucket), id_copies on the
    profile rows only when the rows have ids."""
    sql = engine.sql(
        "impressions_profile_buckets",
        {"label_all": cluster.label_all},
        columns=grouped,
        bucket_columns=split,
        signals=list(cluster.signals),
    )
    profile = engine.frame(sql)
    if ids:
        copies = pl.col("id_copies") if "id_copies" in profile.columns else pl.lit(1, pl.Int64)
        on_profile_rows = pl.when(pl.col(CLUSTER_BUCKET).is_null())
        profile = profile.with_columns(on_profile_rows.then(copies).alias("id_copies"))
    return profile


def ordered_profile(profile: pl.DataFrame, ids: bool) -> pl.DataFrame:
    """For :func:`profile_rows`: ``profile`` (a frame of its statements, with
    ``__first_row`` and maybe ``__cbucket``) with id_copies last (1 when the
    rows have ids, ``ids``, but none is copied), rows sorted by first row; a
    profile row before the bucket row that shares its first row, whatever
    the scan's order. Each grouping set splits a file's rows, so in one file
    a first row starts at most one profile row and one bucket row: a single
    integer key orders them (cheaper than sorting by two columns, nulls
    first, stably). A profile with rows per bucket and label
    (:data:`fairmon.transforms.contract.BUCKET_LABEL`) is left in the scan's
    order: its profile proper is sorted where it is taken
    (:func:`fairmon.transforms.contract.profile_part`) and its bucket rows
    need none. Raises nothing."""
    if ids and "id_copies" not in profile.columns:
        profile = profile.with_columns(pl.lit(1, pl.Int64).alias("id_copies"))
    if "id_copies" in profile.columns:  # last, whichever statement counted it
        profile = profile.select(pl.exclude("id_copies"), "id_copies")
    if CLUSTER_BUCKET not in profile.columns:
        return profile.sort(PROFILE_ROW)
    if BUCKET_LABEL in profile.columns:
        return profile
    key = profile.select(pl.col(PROFILE_ROW) * 2 + pl.col(CLUSTER_BUCKET).is_not_null().cast(pl.Int64)).to_series()
    return profile.with_columns(key.alias("__key")).sort("__key").drop("__key")


def parquet_rows(con: duckdb.DuckDBPyConnection, files: list[str], first_index: int = 0) -> duckdb.DuckDBPyRelation:
    """The rows of Parquet ``files`` as a lazy relation with ``__row`` and the
    file's index ``__file`` counted from ``first_index``
    (sql/impressions_raw_parquet.sql)."""
    return db.relation(con, "impressions_raw_parquet", files=files, first_index=first_index)


def profile_parquet(
    con: duckdb.DuckDBPyConnection, files: list[str], columns: list[str], cluster: ClusterScan | None = None
) -> dict[str, pl.DataFrame]:
    """Profiles (:func:`profile_rows`) of Parquet files with one schema, from
    one DuckDB scan over all of them (the duplicate-id check scans the id
    columns file by file). Returns {file: profile}.

    Raises :class:`InputContractError` when a file cannot be read.
    """
    where = files[0] if len(files) == 1 else f"one of {', '.join(files)}"
    try:
        schema = con.read_parquet(files[0]).columns
        duplicated = None
        if {"request_id", "item_id"} <= set(schema):
            keys = [c for c in ("__file", *ID_KEY) if c == "__file" or c in schema]
            parts = (parquet_rows(con, batch, first) for first, batch in id_check_batches(files))
            duplicated = duplicate_ids(con, parts, keys)
        prof = profile_rows(con, parquet_rows(con, files), columns, where, duplicated, cluster)
    except NullClusterId as e:
        raise NullClusterId(e.column, e.row, file=where if e.file_index is None else files[e.file_index]) from None
    except duckdb.Error as e:
        raise InputContractError(f"cannot read file: {e}", file=where) from None
    return {f: prof.filter(pl.col("__file") == i).drop("__file") for i, f in enumerate(files)}


#: Parquet bytes the duplicate-id check scans in one query (:func:`id_check_batches`).
ID_CHECK_BYTES = 64 * 2**20


def id_check_batches(files: list[str], budget: int | None = None) -> list[tuple[int, list[str]]]:
    """``files`` cut into runs of consecutive files of at most ``budget``
    bytes together (default :data:`ID_CHECK_BYTES`; a larger file alone), as (index of the run's first file,
    its files), for the duplicate-id check. The id key starts with the file's
    index (``__file``), so checking files together finds exactly what
    checking each alone finds; small files (a day of 300,000 rows is ~3 MB)
    then share one query instead of paying one each, and the 64-bit hashes
    held at once (8 bytes a row) follow the budget, not the range."""
    budget = ID_CHECK_BYTES if budget is None else budget
    out: list[tuple[int, list[str]]] = []
    size = 0
    for i, f in enumerate(files):
        nbytes = Path(f).stat().st_size
        if out and size + nbytes <= budget:
            out[-1][1].append(f)
            size += nbytes
        else:
            out.append((i, [f]))
            size = nbytes
    return out
