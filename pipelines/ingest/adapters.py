"""Input adapters: which files make up a day, and reading them into raw frames.

An *ingest unit* is one file (or the Coat directory) that is staged as a whole
and replaced as a whole on re-ingest. The parsing rules live in
:mod:`fairmon.transforms.contract` and :mod:`fairmon.transforms.datasets.coat`; this module does the I/O.
"""

from __future__ import annotations

import atexit
import datetime as dt
import glob
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import duckdb
import numpy as np
import polars as pl

from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.core.run import active_run
from fairmon.pipelines.ingest.engines import (
    DuckEngine,
    SparkEngine,
    spark_rows,
    spark_table_rows,
    table_fingerprints,
)
from fairmon.pipelines.storage import db
from fairmon.transforms.contract import (
    ATTR_PREFIX,
    CLUSTER_BUCKET,
    PROFILE_N,
    PROFILE_ROW,
    InputContractError,
    adapt_impressions,
    add_intersections,
    normalize_impressions,
    normalize_labels,
    normalize_scores,
    profile_part,
)
from fairmon.transforms.datasets.coat import coat_impressions
from fairmon.transforms.datasets.compas import compas_scores


@dataclass(frozen=True)
class IngestUnit:
    """One file to stage: rows for ds_start..ds_end; ``scope`` = traffic it owns."""

    file: Path
    ds_start: dt.date
    ds_end: dt.date
    scope: str  # 'all' | 'random' | 'nonrandom'
    traffic: str | None = None  # fills the traffic column when the file has none


def unit_key(cfg: FairmonConfig, path: Path) -> str:
    """A staged file's identity (DESIGN §2 "Input identity"): its path relative
    to the config's folder (POSIX form), or its absolute path when it lies
    outside; so moving the whole project folder changes no identity. A
    catalog table's partition (``[impressions] table``) is
    ``spark-table:<table>/ds=<day>``."""
    if table_partition(path) is not None:
        return str(path)
    base = cfg.base_dir.resolve()
    try:
        return Path(path).resolve().relative_to(base).as_posix()
    except ValueError:
        return Path(path).resolve().as_posix()


def current_inputs(cfg: FairmonConfig, ds: dt.date) -> list[dict]:
    """Every input file day ``ds`` needs under ``cfg`` *now*: {file (its
    :func:`unit_key`), source, size, mtime_ns}, sorted by file; what a run of
    the day records and late-data detection compares. Files that vanish
    between the listing and the stat are left out; a format that cannot serve
    the day (Coat on another day) contributes nothing."""
    out = []
    for source in ("impressions", "scores", "labels"):
        if getattr(cfg, source) is None:
            continue
        try:
            units = units_for_day(cfg, ds) if source == "impressions" else log_units_for_day(cfg, source, ds)
        except InputContractError:
            continue
        for u in units:
            try:
                size, mtime = file_fingerprint(u.file, cfg)
            except OSError:
                continue
            out.append({"file": unit_key(cfg, u.file), "source": source, "size": size, "mtime_ns": mtime})
    if cfg.reach is not None:  # the day's model snapshot: its four files (DESIGN §2 model snapshots)
        folder = cfg.resolve(cfg.reach.path.replace("{ds}", ds.isoformat()))
        for name in ("users", "items", "ratings", "global"):
            for ext in (".parquet", ".csv"):
                try:
                    size, mtime = file_fingerprint(folder / f"{name}{ext}")
                except OSError:
                    continue
                out.append(
                    {"file": unit_key(cfg, folder / f"{name}{ext}"), "source": "reach", "size": size, "mtime_ns": mtime}
                )
    return sorted(out, key=lambda r: (r["source"], r["file"]))


def window_start(ds: dt.date, days: int) -> dt.date:
    """First day of the trailing random-traffic window of ``days`` days ending at ds."""
    return ds - dt.timedelta(days=days - 1)


def pool_admitted(start: dt.date, end: dt.date, ds: dt.date, window_days: int, policy: str) -> bool:
    """Whether a pooled random-traffic file declared for ``start``..``end`` (no
    per-row dates) serves day ``ds`` with a trailing window of ``window_days``
    (DESIGN §2 "Random-traffic windows"): ``contained`` when the range lies
    inside ds - window_days + 1 .. ds, ``overlap`` when it meets that window."""
    w0 = window_start(ds, window_days)
    if policy == "contained":
        return w0 <= start and end <= ds
    if policy == "overlap":
        return start <= ds and end >= w0
    raise ValueError(f"unknown pool_policy {policy!r}; expected 'contained' or 'overlap'")


def pools_left_out(cfg: FairmonConfig, ds: dt.date) -> list[tuple[Path, dt.date, dt.date]]:
    """The pools (path, start, end) that overlap day ``ds``'s window but that
    ``pool_policy`` does not admit (it admits every overlapping pool under
    ``overlap``); none for formats without pools."""
    imp = cfg.impressions
    if imp is None or imp.format != "tiktok":
        return []
    w = imp.random_window_days
    return [
        (path, a, b)
        for path, a, b in _tiktok_pools(cfg)
        if pool_admitted(a, b, ds, w, "overlap") and not pool_admitted(a, b, ds, w, imp.pool_policy)
    ]


def random_window_note(cfg: FairmonConfig, ds: dt.date) -> str:
    """Why day ``ds`` may have no random traffic, for the day's gate and log:
    its window, the pool policy and the pools that overlap the window but lie
    partly outside it (with what to change)."""
    imp = cfg.impressions
    w0 = window_start(ds, imp.random_window_days)
    where = f"no random traffic in the window {w0}..{ds} (random_window_days = {imp.random_window_days}"
    if imp.format != "tiktok":
        return where + "): no random rows dated in it were staged from the day's files"
    left = pools_left_out(cfg, ds)
    where += f', pool_policy = "{imp.pool_policy}")'
    if not left:
        return where + ": no pooled random file overlaps it"
    names = ", ".join(f"{unit_key(cfg, path)} ({a}..{b})" for path, a, b in left)
    return (
        f"{where}: pool(s) {names} overlap the window but are not contained in it; set [impressions] "
        f'pool_policy = "overlap" (their rows may then come from after {ds}: reo.look_ahead) '
        "or widen random_window_days to cover a whole pool"
    )


def _matches(template: str, cfg: FairmonConfig, **fields: str) -> list[Path]:
    pattern = str(cfg.resolve(template.format(**fields)))
    return sorted(Path(p) for p in glob.glob(pattern))


def _tiktok_pools(cfg: FairmonConfig) -> list[tuple[Path, dt.date, dt.date]]:
    imp = cfg.impressions
    pools = [(cfg.resolve(p.path), p.start, p.end) for p in imp.random_pools]
    if imp.random_path:
        regex = re.escape(str(cfg.resolve(imp.random_path)))
        regex = regex.replace(re.escape("{start}"), r"(\d{4}-\d{2}-\d{2})").replace(
            re.escape("{end}"), r"(\d{4}-\d{2}-\d{2})"
        )
        for p in _matches(imp.random_path, cfg, start="*", end="*"):
            m = re.fullmatch(regex, str(p))
            if m:
                a, b = dt.date.fromisoformat(m.group(1)), dt.date.fromisoformat(m.group(2))
                if b < a:
                    raise InputContractError(f"pool range end {b} is before start {a}", file=str(p))
                pools.append((p, a, b))
    return pools


def days_between(first: dt.date, last: dt.date) -> list[dt.date]:
    """Every day from ``first`` to ``last`` inclusive."""
    return [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]


def file_fingerprint(path: Path, cfg: FairmonConfig | None = None) -> tuple[int, int]:
    """(size, mtime_ns) of a file, or summed size and latest mtime of a folder's
    files (Coat), or of a catalog table partition's data files (``cfg``
    needed: the Spark engine lists them, once per run); what re-ingest and
    late-data detection compare. Raises OSError when the file (or the
    partition) is gone."""
    part = table_partition(path)
    if part is not None:
        if cfg is None:
            raise ValueError(f"{path}: a table partition's fingerprint needs the config (Spark engine)")
        fp = _table_fingerprints(cfg, part[0], [part[1]]).get(part[1])
        if fp is None:
            raise FileNotFoundError(f"{path}: no such partition")
        return fp
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
        return sum(p.stat().st_size for p in files), max((p.stat().st_mtime_ns for p in files), default=0)
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def log_units_for_day(cfg: FairmonConfig, source: str, ds: dt.date) -> list[IngestUnit]:
    """Files of a score or labeling log that day ``ds`` needs: one per day of its
    trailing window (``window_days``), or the single COMPAS file."""
    sc = cfg.scores if source == "scores" else cfg.labels
    if source == "scores" and sc.format == "compas":
        path = cfg.resolve(sc.path)
        if not path.is_file():
            raise InputContractError("COMPAS file not found", file=str(path))
        return [IngestUnit(path, dt.date.min, dt.date.max, "file")]
    first = window_start(ds, sc.window_days)
    return [
        IngestUnit(f, d, d, "file") for d in days_between(first, ds) for f in _matches(sc.path, cfg, ds=d.isoformat())
    ]


def read_log_unit(cfg: FairmonConfig, source: str, unit: IngestUnit) -> pl.DataFrame:
    """Read a score or labeling file as a raw frame in the DESIGN §2 layout."""
    raw = read_table(unit.file)
    if source == "scores" and cfg.scores.format == "compas":
        try:
            return compas_scores(raw, propublica_filter=cfg.scores.propublica_filter)
        except ValueError as e:
            raise InputContractError(str(e), file=str(unit.file)) from None
    return raw


def normalize_log_unit(cfg: FairmonConfig, source: str, unit: IngestUnit, raw: pl.DataFrame) -> pl.DataFrame:
    """Parse a raw score or labeling frame into staging rows (transforms.contract)."""
    if source == "scores":
        return normalize_scores(raw, file=str(unit.file), attributes=cfg.scores.attributes)
    return normalize_labels(raw, file=str(unit.file), attributes=cfg.labels.attributes)


def units_for_day(cfg: FairmonConfig, ds: dt.date) -> list[IngestUnit]:
    """The ingest units that day ``ds`` needs: its default traffic and the
    random traffic of its trailing window (DESIGN §2 "Random-traffic
    windows"): for ``contract`` the files of the window's days (their rows
    carry their own ds); for ``tiktok`` the pools ``pool_policy`` admits
    (:func:`pool_admitted`). What a run records as its inputs, what late-data
    detection compares and the only files whose rows the day counts.

    Raises :class:`InputContractError` for a Coat config asked for another day.
    """
    imp = cfg.impressions
    w0 = window_start(ds, imp.random_window_days)
    if imp.format == "coat":
        if ds != imp.ds:
            raise InputContractError(
                f"the Coat data set is configured as the single day {imp.ds}, not {ds}", file=str(cfg.resolve(imp.path))
            )
        return [IngestUnit(cfg.resolve(imp.path), ds, ds, "all")]

    if imp.table is not None:  # a catalog table (Spark engine): one unit per ds partition of the window
        have = _table_fingerprints(cfg, imp.table, days_between(w0, ds))
        return [
            IngestUnit(table_unit_path(imp.table, d), d, d, "all")
            for d in [ds, *days_between(w0, ds)[:-1]]
            if d in have
        ]
    # No file for the day -> no unit: the day gate's default_traffic_present reports it.
    day_files = _matches(imp.path, cfg, ds=ds.isoformat())
    if imp.format == "contract":
        units = [IngestUnit(f, ds, ds, "all") for f in day_files]
        for d in days_between(w0, ds)[:-1]:  # earlier days of the window contribute their random rows
            units += [IngestUnit(f, d, d, "all") for f in _matches(imp.path, cfg, ds=d.isoformat())]
        return units
    # tiktok
    units = [IngestUnit(f, ds, ds, "nonrandom", traffic="default") for f in day_files]
    for stage, template in imp.stage_paths.items():  # e.g. post_recall (seed 001 App. I.4)
        units += [IngestUnit(f, ds, ds, "nonrandom", traffic=stage) for f in _matches(template, cfg, ds=ds.isoformat())]
    for path, a, b in _tiktok_pools(cfg):
        if pool_admitted(a, b, ds, imp.random_window_days, imp.pool_policy):
            units.append(IngestUnit(path, a, b, "random", traffic="random"))
    return units


#: How a catalog table's ds partition is named where a file's path would be (messages, ingest log).
TABLE_PREFIX = "spark-table:"


def first_line(error: BaseException) -> str:
    """An engine error's first line (Spark's go on with hints and a JVM stack trace)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def table_unit_path(table: str, ds: dt.date) -> Path:
    """The name of the ``ds`` partition of catalog table ``table`` as an
    ingest unit's path: ``spark-table:<table>/ds=<day>``."""
    return Path(f"{TABLE_PREFIX}{table}/ds={ds.isoformat()}")


def table_partition(path: Path | str) -> tuple[str, dt.date] | None:
    """(table, ds) of a :func:`table_unit_path`, or None for a file."""
    text = str(path)
    if not text.startswith(TABLE_PREFIX):
        return None
    table, _, day = text[len(TABLE_PREFIX) :].rpartition("/ds=")
    return table, dt.date.fromisoformat(day)


def _table_fingerprints(cfg: FairmonConfig, table: str, days: list[dt.date]) -> dict[dt.date, tuple[int, int]]:
    """The ds partitions among ``days`` of ``table`` that exist, with their
    (bytes, mtime_ns) (:func:`table_fingerprints`). Within a run each day is
    listed once (:class:`fairmon.pipelines.core.run.Run`; a backfill lists its
    whole range in one query, :func:`prime_table_fingerprints`); outside a
    run, at each call. Raises :class:`InputContractError` naming the table
    when Spark cannot list it."""
    from fairmon.pipelines.storage.spark import session_lock, spark_error_types, spark_session

    run = active_run()
    known: dict[dt.date, tuple[int, int] | None] = {}
    if run is not None:
        with run.lock:
            known = run.table_fingerprints.setdefault(table, {})
    todo = [d for d in days if d not in known]
    if todo:
        with session_lock():
            spark = spark_session(cfg.spark)
            try:
                found = table_fingerprints(spark, table, todo)
            except spark_error_types() as e:
                where = f"{TABLE_PREFIX}{table}"
                raise InputContractError(f"cannot list the table's partitions: {first_line(e)}", file=where) from None
        new = {d: found.get(d) for d in todo}  # None: no such partition (as of this run)
        if run is None:
            known = new
        else:
            with run.lock:
                known.update(new)
    return {d: known[d] for d in days if known.get(d) is not None}


def prime_table_fingerprints(cfg: FairmonConfig, days: list[dt.date]) -> None:
    """With ``[impressions] table``: list the partitions every day of
    ``days`` needs (its random-traffic window too) in one query, ahead of a
    backfill's days. Does nothing for file inputs or outside a run."""
    imp = cfg.impressions
    if imp is None or imp.table is None or active_run() is None or not days:
        return
    _table_fingerprints(cfg, imp.table, days_between(window_start(min(days), imp.random_window_days), max(days)))


def read_table(path: Path) -> pl.DataFrame:
    """Read a CSV (all columns as text, parsed later by the contract) or Parquet file.

    Raises :class:`InputContractError` naming the file when it is empty or unreadable.
    """
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            return pl.read_parquet(path)
        return pl.read_csv(path, infer_schema=False)
    except pl.exceptions.NoDataError:  # a 0-byte file: the gate's has_rows/column_exists report it
        return pl.DataFrame()
    except (pl.exceptions.ComputeError, OSError) as e:
        raise InputContractError(f"cannot read file: {e}", file=str(path)) from None


def _read_matrix(path: Path) -> np.ndarray:
    try:
        return np.loadtxt(path, dtype=np.int64, ndmin=2)
    except (OSError, ValueError) as e:
        raise InputContractError(f"cannot read Coat matrix: {e}", file=str(path)) from None


def _read_names(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip()]


def read_coat(folder: Path, min_rating: int) -> pl.DataFrame:
    """Read the Coat files (train/test ratings and feature maps) into a raw impressions frame.

    Accepts the original layout (features in ``user_item_features/``) or a flat folder.
    """
    feat = folder / "user_item_features" if (folder / "user_item_features").is_dir() else folder
    return coat_impressions(
        _read_matrix(folder / "train.ascii"),
        _read_matrix(folder / "test.ascii"),
        _read_matrix(feat / "item_features.ascii"),
        _read_names(feat / "item_features_map.txt"),
        _read_matrix(feat / "user_features.ascii"),
        _read_names(feat / "user_features_map.txt"),
        min_rating=min_rating,
    )


ID_KEY = ("ds", "traffic", "request_id", "item_id")
_local = threading.local()  # per thread by nature: an in-memory DuckDB scratch connection, no run state


def _scratch() -> duckdb.DuckDBPyConnection:
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


class ClusterScan(NamedTuple):
    """How :func:`profile_rows` splits rows by cluster: the id ``column``,
    the number of hash ``buckets``, and (for the label per bucket,
    sql/impressions_profile_buckets.sql) the ``signals`` and whether the
    label rule is ``all`` of them (else any)."""

    column: str
    buckets: int
    signals: tuple[str, ...] = ()
    label_all: bool = False


def _cluster_arg(cfg: FairmonConfig) -> ClusterScan | None:
    """The :class:`ClusterScan` for :func:`profile_rows`, or None without clustering."""
    cluster = cluster_column(cfg)
    if cluster is None:
        return None
    imp = cfg.impressions
    return ClusterScan(cluster[0], cfg.estimation.cluster_buckets, tuple(imp.signals), imp.label_rule == "all")


def _bucketed(engine, raw, cluster: ClusterScan | None):
    """``raw`` with the __cbucket column of sql/impressions_bucket.sql when it has the cluster column."""
    if cluster is None or cluster[0] not in engine.columns(raw):
        return raw
    engine.register("raw_in", raw)
    return engine.sql("impressions_bucket", {"buckets": cluster[1]}, cluster=[cluster[0]])


def _labels_in_sql(engine, raw, cluster: ClusterScan) -> bool:
    """Whether the label per cluster bucket can be computed in the scan
    (sql/impressions_profile_buckets.sql): on DuckDB, with every signal a
    boolean or numeric column, whose cast to BOOLEAN is the contract's
    parse (transforms/contract.parse_bool: 0/1, true/false; any other number
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


def with_bucket_combinations(scan: pl.DataFrame, combination: list[str]) -> pl.DataFrame | None:
    """The result of sql/impressions_profile_buckets.sql with each row per
    bucket and label given the ``combination`` columns (file, day, traffic,
    arm, attributes) of the profile rows with the same hash ``__h``; the hash
    column dropped. Returns the profile rows, then the bucket rows (the
    signal columns null), or None when two different combinations share a
    hash (the caller then splits the profile by bucket instead)."""
    is_profile = pl.col(CLUSTER_BUCKET).is_null()
    profile = scan.filter(is_profile)
    names = profile.select("__h", *combination).unique()
    if names.get_column("__h").n_unique() != names.height:
        return None
    buckets = scan.filter(~is_profile).drop(combination).join(names, on="__h", how="left")
    return pl.concat([profile, buckets.select(profile.columns)]).drop("__h")


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
    proper); otherwise every combination is split by bucket. Sorted by
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
            raw = _bucketed(engine, raw, cluster)
            registered.append("raw_in")
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
        profile = None
        if split is not None:
            sql = engine.sql(
                "impressions_profile_buckets",
                {"label_all": cluster.label_all},
                columns=grouped,
                bucket_columns=split,
                signals=list(cluster.signals),
            )
            profile = with_bucket_combinations(engine.frame(sql), split)
            if profile is None:  # two combinations share a 64-bit hash: the profile split by bucket instead
                grouped = [c for c in engine.columns(raw) if c in (*cols, CLUSTER_BUCKET)]
            elif ids:  # id_copies on the profile rows only
                copies = pl.col("id_copies") if "id_copies" in profile.columns else pl.lit(1, pl.Int64)
                on_profile_rows = pl.when(pl.col(CLUSTER_BUCKET).is_null())
                profile = profile.with_columns(on_profile_rows.then(copies).alias("id_copies"))
        if profile is None and duplicated and "id_copies" not in grouped:
            profile = engine.frame(engine.sql("impressions_profile_ids", columns=grouped, keys=keys))
        elif profile is None:  # id_copies, if counted, is one of the rows' columns (sql/impressions_with_copies.sql)
            profile = engine.frame(engine.sql("impressions_profile", columns=grouped))
        if ids and "id_copies" not in profile.columns:
            profile = profile.with_columns(pl.lit(1, pl.Int64).alias("id_copies"))
        if "id_copies" in profile.columns:  # last, whichever statement counted it
            profile = profile.select(pl.exclude("id_copies"), "id_copies")
        if CLUSTER_BUCKET not in profile.columns:
            return profile.sort(PROFILE_ROW)
        # a profile row and its first bucket row share a first row: the profile row first, whatever the scan's order
        return profile.sort(PROFILE_ROW, CLUSTER_BUCKET, nulls_last=False, maintain_order=True)
    except engine.errors as e:  # Spark's messages go on with hints and a JVM stack trace
        raise InputContractError(
            f"cannot read file: {first_line(e) if engine.name == 'spark' else e}", file=file
        ) from None
    finally:
        for name in reversed(registered):
            engine.unregister(name)


def _is_parquet(cfg: FairmonConfig, path: Path) -> bool:
    return cfg.impressions.format != "coat" and path.suffix.lower() in (".parquet", ".pq")


def _parquet_rows(con: duckdb.DuckDBPyConnection, files: list[str], first_index: int = 0) -> duckdb.DuckDBPyRelation:
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
            parts = (_parquet_rows(con, batch, first) for first, batch in id_check_batches(files))
            duplicated = duplicate_ids(con, parts, keys)
        prof = profile_rows(con, _parquet_rows(con, files), columns, where, duplicated, cluster)
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


def _spark_kind(cfg: FairmonConfig, path: Path) -> str | None:
    """How the Spark engine reads an impressions unit ('table', 'parquet',
    'csv'), or None when DuckDB does (engine = 'duckdb', or the Coat
    matrices, which are local by nature)."""
    if cfg.engine != "spark" or cfg.impressions.format == "coat":
        return None
    if table_partition(path) is not None:
        return "table"
    return "parquet" if _is_parquet(cfg, path) else "csv"


def _spark_scan(cfg: FairmonConfig, kind: str, files: list[str], scan) -> pl.DataFrame:
    """Run ``scan(engine, rows, where)`` on Spark over the rows of ``files``
    (all of one ``kind``, :func:`_spark_kind`) and return its small result
    with ``__file`` mapped back to the names in ``files``. Raises
    :class:`InputContractError` naming the file(s) when Spark cannot read them."""
    from fairmon.pipelines.storage.spark import session_lock, spark_session

    where = files[0] if len(files) == 1 else f"one of {', '.join(files)}"
    with session_lock():
        engine = SparkEngine(spark_session(cfg.spark))
        try:
            if kind == "table":
                parts = [table_partition(f) for f in files]
                rows = spark_table_rows(engine.spark, parts[0][0], [d for _, d in parts])
                names = {d.isoformat(): f for (_, d), f in zip(parts, files)}
            else:
                rows = spark_rows(engine.spark, files, kind)
                names = dict(enumerate(files))
            out = scan(engine, rows, where)
        except engine.errors as e:
            raise InputContractError(f"cannot read file: {first_line(e)}", file=where) from None
        finally:
            engine.release()
    if "__file" not in out.columns:  # no contract column to group by: one file at a time
        return out.with_columns(pl.lit(files[0]).alias("__file"))
    return out.with_columns(pl.col("__file").replace_strict(names, return_dtype=pl.String))


def profile_spark(cfg: FairmonConfig, kind: str, files: list[str]) -> dict[str, pl.DataFrame]:
    """Profiles (:func:`profile_rows`) of impressions ``files`` (all of one
    ``kind``: 'parquet', 'csv' or 'table' partitions) computed on Spark in
    one scan, with the duplicate-id check over all of them in one
    aggregation; only the profiles (a few thousand rows a file) come back.
    The same portable statements as DuckDB's, so the same profile.
    Returns {file: profile}. Raises :class:`InputContractError` as :func:`_spark_scan`."""
    columns = profile_columns(cfg)
    cluster = _cluster_arg(cfg)
    prof = _spark_scan(
        cfg, kind, files, lambda engine, rows, where: profile_rows(engine, rows, columns, where, None, cluster)
    )
    return {f: prof.filter(pl.col("__file") == f).drop("__file") for f in files}


def prefetch_profiles(cfg: FairmonConfig, files: list[Path]) -> int:
    """Profile many impressions files ahead of their days' runs (a backfill):
    Parquet files are grouped by schema and each group is scanned once, with
    all cores, instead of one query per file: by DuckDB, or with ``engine =
    "spark"`` by Spark (which also takes CSV files and a table's partitions,
    each kind in one scan). The profiles wait in the current run
    (:class:`fairmon.pipelines.core.run.Run`, a few thousand rows each) until
    :func:`read_unit` takes them; a file changed since is read again. Outside
    a run there is nowhere to keep them: nothing is done. Files that cannot
    be read (and, on DuckDB, files that are not Parquet) are left to
    :func:`read_unit`, which reports them. Returns the number of files profiled.
    """
    run = active_run()
    if run is None:
        return 0
    groups: dict[tuple, list[str]] = {}
    for f in files:
        kind = _spark_kind(cfg, f) or ("parquet" if _is_parquet(cfg, f) else None)
        if kind == "parquet":
            try:
                schema = tuple(pl.read_parquet_schema(f).items())
            except (OSError, pl.exceptions.PolarsError):
                continue
            groups.setdefault((kind, schema), []).append(str(f))
        elif kind is not None:
            groups.setdefault((kind,), []).append(str(f))
    done = 0
    for key, group in groups.items():
        try:
            stats = {f: file_fingerprint(Path(f), cfg) for f in group}
            if cfg.engine == "spark":
                profiles = profile_spark(cfg, key[0], group)
            else:
                profiles = profile_parquet(_scratch(), group, profile_columns(cfg), _cluster_arg(cfg))
        except (InputContractError, OSError):
            continue
        with run.lock:
            for f, prof in profiles.items():
                run.prefetched[(f, *stats[f])] = prof
        done += len(group)
    return done


def read_unit(cfg: FairmonConfig, unit: IngestUnit) -> pl.DataFrame:
    """The profile of one ingest unit (:func:`profile_rows`) with the
    contract columns a format leaves implicit (ds, traffic, arm) filled in;
    values are not parsed yet. Parquet files are scanned by DuckDB without
    loading them (or taken from :func:`prefetch_profiles`); CSV files and the
    Coat matrices are read first (all columns as text). With ``engine =
    "spark"`` Spark scans Parquet and CSV files and table partitions
    (:func:`profile_spark`). A 0-byte file gives
    an empty frame (no columns).

    Raises :class:`InputContractError` naming the file when it cannot be read.
    """
    imp = cfg.impressions
    columns = profile_columns(cfg)
    path, file = unit.file, str(unit.file)
    kind = _spark_kind(cfg, path)
    if kind is not None or _is_parquet(cfg, path):
        run = active_run()
        profile = None
        if run is not None:
            with run.lock:
                profile = run.prefetched.pop((file, *file_fingerprint(path, cfg)), None)
        if profile is None and kind == "csv" and path.stat().st_size == 0:
            return pl.DataFrame()  # as read_table: the gate reports the empty file
        if profile is None and kind is not None:
            profile = profile_spark(cfg, kind, [file])[file]
        elif profile is None:
            profile = profile_parquet(_scratch(), [file], columns, _cluster_arg(cfg))[file]
    else:
        rows = read_coat(path, imp.min_rating) if imp.format == "coat" else read_table(path)
        if rows.width == 0:
            return rows
        profile = profile_rows(_scratch(), rows.with_row_index("__row"), columns, file, cluster=_cluster_arg(cfg))
    cluster = cluster_column(cfg)
    if cluster is not None and cluster[1] and CLUSTER_BUCKET not in profile.columns:
        raise InputContractError(
            f"[estimation] cluster_by = {cluster[0]!r}, but the file has no such column "
            "(set cluster_by = 'auto' or 'none' to count its rows as independent)",
            file=file,
            column=cluster[0],
        )
    return adapt_impressions(profile, ds=unit.ds_end, traffic=unit.traffic, default_arm=imp.default_arm)


def rows_in(frame: pl.DataFrame) -> int:
    """Rows a raw frame stands for: the sum of ``__n`` for a profile, else its height."""
    frame = profile_part(frame)
    return int(frame.get_column(PROFILE_N).sum()) if PROFILE_N in frame.columns else frame.height


def normalize_unit(cfg: FairmonConfig, unit: IngestUnit, raw: pl.DataFrame) -> pl.DataFrame:
    """Parse an adapted raw frame into staging rows (see fairmon.transforms.contract).

    Raises :class:`InputContractError` naming file, column and row on bad input.
    """
    imp = cfg.impressions
    staged = normalize_impressions(
        raw,
        file=str(unit.file),
        signals=imp.signals,
        attributes=imp.attributes,
        label_rule=imp.label_rule,
        traffic_stages=[*imp.stages, *(["swap"] if cfg.envy else [])],
        ds=unit.ds_end,
        ds_start=unit.ds_start,
        traffic=unit.traffic,
        default_arm=imp.default_arm,
    )
    return add_intersections(staged, imp.intersections)


def envy_profile(cfg: FairmonConfig, unit: IngestUnit) -> pl.DataFrame:
    """Per-user rows of one impressions file for the envy audit (DESIGN §4.7).

    Scans the file's default- and swap-traffic rows in DuckDB
    (sql/impressions_envy_profile.sql), parses them with the impressions'
    own parser (:func:`normalize_impressions`: dates, traffic, signals,
    label Y; the ids ride along as extra groupings) and sums them to
    one row per (ds, user_id, donor_user_id, donor_group, attributes) with
    ``n`` rows and ``n_pos`` positives. Own-policy rows (default traffic)
    have null donors; a swap row's donor is its ``policy_user_id`` and/or
    ``policy_group``. ``src_file`` is the file's identity (:func:`unit_key`).

    Raises :class:`InputContractError` naming the file (and row) when it
    cannot be read or parsed.
    """
    imp = cfg.impressions
    path, file = unit.file, str(unit.file)
    cols = ["ds", "traffic", "arm", *imp.signals, *imp.attributes, "user_id", "policy_user_id", "policy_group"]

    def scan(engine, raw, where: str) -> pl.DataFrame:
        engine.register("raw", raw)
        try:
            grouped = [c for c in engine.columns(raw) if c in cols or c == "__file"]
            return engine.frame(engine.sql("impressions_envy_profile", columns=grouped))
        finally:
            engine.unregister("raw")

    kind = _spark_kind(cfg, path)
    if kind is not None:
        prof = _spark_scan(cfg, kind, [file], scan).drop("__file")
    else:
        con = _scratch()
        try:
            raw = _parquet_rows(con, [file]) if _is_parquet(cfg, path) else read_table(path).with_row_index("__row")
            prof = scan(DuckEngine(con), raw, file).drop("__file", strict=False)
        except duckdb.Error as e:
            raise InputContractError(f"cannot read file: {e}", file=file) from None
    attrs = [ATTR_PREFIX + a for a in imp.attributes]
    schema = {
        "ds": pl.Date,
        "src_file": pl.String,
        "user_id": pl.String,
        "donor_user_id": pl.String,
        "donor_group": pl.String,
        **dict.fromkeys(attrs, pl.String),
        "n": pl.Int64,
        "n_pos": pl.Int64,
    }
    if prof.height == 0:
        return pl.DataFrame(schema=schema)
    prof = prof.sort(PROFILE_ROW)
    # the user and donor ids ride through the parse as extra groupings (kept as text, like attributes)
    ids = [c for c in ("user_id", "policy_user_id", "policy_group") if c in prof.columns]
    staged = normalize_impressions(
        adapt_impressions(prof, ds=unit.ds_end, default_arm=imp.default_arm),
        file=file,
        signals=imp.signals,
        attributes=[*imp.attributes, *ids],
        label_rule=imp.label_rule,
        traffic_stages=[*imp.stages, "swap"],
        ds=unit.ds_end,
        ds_start=unit.ds_start,
        traffic=unit.traffic,
        default_arm=imp.default_arm,
    )
    swap = pl.col("traffic") == "swap"

    def donor(col: str) -> pl.Expr:  # the column on swap rows, null on own-policy rows
        return pl.when(swap).then(pl.col(ATTR_PREFIX + col)) if col in ids else pl.lit(None, pl.String)

    frame = staged.select(
        "ds",
        *attrs,
        "n",
        "y",
        pl.lit(unit_key(cfg, path)).alias("src_file"),
        pl.col(ATTR_PREFIX + "user_id").alias("user_id"),
        donor("policy_user_id").alias("donor_user_id"),
        donor("policy_group").alias("donor_group"),
    )
    return (
        frame.group_by("ds", "src_file", "user_id", "donor_user_id", "donor_group", *attrs)
        .agg(pl.col("n").sum(), pl.col("n").filter(pl.col("y")).sum().alias("n_pos"))
        .select(list(schema))
        .cast(schema)
    )
