"""Input adapters: reading an ingest unit into a raw frame (a profile of
its rows, :mod:`fairmon.pipelines.ingest.profiles`) and parsing it into
staging rows, on DuckDB or Spark.

An *ingest unit* is one file (or the Coat directory) that is staged as a whole
and replaced as a whole on re-ingest; which units a day needs is answered by
:mod:`fairmon.pipelines.ingest.sources`, their identity by
:mod:`fairmon.pipelines.ingest.identity`, the random-traffic windows by
:mod:`fairmon.pipelines.ingest.windows`. The parsing rules live in
:mod:`fairmon.transforms.contract` and :mod:`fairmon.transforms.datasets.coat`;
this module does the I/O. Each name is imported from the module that
defines it, not from here.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.ingest.engines import DuckEngine, SparkEngine, spark_rows, spark_table_rows
from fairmon.pipelines.ingest.headers import REPEATED_COLUMN, ragged_row, repeated_column, trailing_blank_lines
from fairmon.pipelines.ingest.identity import IngestUnit, first_line, table_partition, unit_key
from fairmon.pipelines.ingest.profiles import (
    NullClusterId,
    RaggedRow,
    cluster_column,
    cluster_scan,
    parquet_rows,
    profile_columns,
    profile_parquet,
    profile_rows,
    scratch,
)
from fairmon.transforms.contract import (
    ATTR_PREFIX,
    CLUSTER_BUCKET,
    PROFILE_N,
    PROFILE_ROW,
    InputContractError,
    adapt_impressions,
    normalize_impressions,
    normalize_labels,
    normalize_scores,
    profile_part,
)
from fairmon.transforms.datasets.coat import coat_impressions
from fairmon.transforms.datasets.compas import compas_scores
from fairmon.transforms.intersections import add_intersections


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
    """Parse a raw score or labeling frame into staging rows (transforms.contract), with a
    score log's intersectional groupings (``[scores] intersections``, seed 002 eq. 5's cells)."""
    if source == "scores":
        staged = normalize_scores(raw, file=str(unit.file), attributes=cfg.scores.attributes)
        return add_intersections(staged, cfg.scores.intersections)
    return normalize_labels(raw, file=str(unit.file), attributes=cfg.labels.attributes)


def read_table(path: Path) -> pl.DataFrame:
    """Read a CSV (all columns as text, parsed later by the contract) or Parquet file.

    Raises :class:`InputContractError` naming the file when it is empty or
    unreadable (Polars' panics included: not an ``Exception``, they would
    end the whole run instead of the day), and naming the column when a CSV
    header repeats a name; :class:`RaggedRow` for a CSV row with more or
    fewer fields than the header (Polars would pad the fewer with nulls).
    Blank lines at the end of a CSV are no rows (Polars reads each as nulls).
    """
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            return pl.read_parquet(path, glob=False)  # a folder like proj[x] is a name, not a pattern
        frame = pl.read_csv(path, infer_schema=False, glob=False)
    except pl.exceptions.NoDataError:  # a 0-byte file: the gate's has_rows/column_exists report it
        return pl.DataFrame()
    except pl.exceptions.ComputeError as e:  # e.g. a row with more fields than the header: say which
        why = ragged_row(path) if "more fields" in str(e) else None
        if why is not None:
            raise RaggedRow(why, file=str(path)) from None
        raise InputContractError(f"cannot read file: {first_line(e)}", file=str(path)) from None
    except OSError as e:
        raise InputContractError(f"cannot read file: {e}", file=str(path)) from None
    except pl.exceptions.PanicException as e:  # a BaseException: e.g. a Parquet time zone written "Z"
        raise InputContractError(f"Polars cannot read it: {str(e).splitlines()[0][:300]}", file=str(path)) from None
    twice = repeated_column(frame.columns)
    if twice is not None:
        raise InputContractError(REPEATED_COLUMN, file=str(path), column=twice)
    blank = trailing_blank_lines(path) if frame.height and all(v is None for v in frame.row(-1)) else 0
    while blank and frame.height and all(v is None for v in frame.row(-1)):  # blank lines at the end: no rows
        frame, blank = frame.head(-1), blank - 1
    if frame.width > 1 and frame.get_column(frame.columns[-1]).null_count():  # a row short of fields, maybe
        why = ragged_row(path, fewer=True)
        if why is not None:
            raise RaggedRow(why, file=str(path))
    return frame


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


def _is_parquet(cfg: FairmonConfig, path: Path) -> bool:
    return cfg.impressions.format != "coat" and path.suffix.lower() in (".parquet", ".pq")


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
        except NullClusterId as e:
            raise NullClusterId(e.column, e.row, file=names.get(e.file_index, where)) from None
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
    cluster = cluster_scan(cfg)
    prof = _spark_scan(
        cfg, kind, files, lambda engine, rows, where: profile_rows(engine, rows, columns, where, None, cluster)
    )
    return {f: prof.filter(pl.col("__file") == f).drop("__file") for f in files}


def profile_files(cfg: FairmonConfig, files: list[Path]) -> dict[str, pl.DataFrame]:
    """Profile many impressions files at once (a batch's new or changed
    files): Parquet files are grouped by schema and each group is scanned
    once, with all cores, instead of one query per file: by DuckDB, or with
    ``engine = "spark"`` by Spark (which also takes CSV files and a table's
    partitions, each kind in one scan). Returns {file (as ``str``): its
    profile} for :func:`read_unit`. Files that cannot be read (and, on
    DuckDB, files that are not Parquet) are left out: :func:`read_unit`
    reads them alone and reports them. Raises nothing of its own."""
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
    out: dict[str, pl.DataFrame] = {}
    for key, group in groups.items():
        try:
            if cfg.engine == "spark":
                out |= profile_spark(cfg, key[0], group)
            else:
                out |= profile_parquet(scratch(), group, profile_columns(cfg), cluster_scan(cfg))
        except (InputContractError, OSError):
            continue
    return out


#: Profiles :func:`read_unit` gave the pre-flight check, each kept for the
#: staging of the same process (:func:`keep_read`), so a file is read once a run.
_KEPT: dict[tuple, pl.DataFrame] = {}


def _kept_key(cfg: FairmonConfig, unit: IngestUnit) -> tuple | None:
    """A kept profile's key: the unit, its file's size, modification and status-change times (no copy or restore
    sets the latter back), the staging fingerprint; None off disk."""
    try:
        st = unit.file.stat()
    except OSError:
        return None
    return (unit, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, cfg.fingerprint())


def keep_read(cfg: FairmonConfig, unit: IngestUnit, profile: pl.DataFrame | None = None) -> pl.DataFrame:
    """:func:`read_unit` of ``unit`` (``profile``: the batch's, :func:`profile_files`),
    kept until :func:`read_unit` is next asked for it with the file unchanged
    (then handed over and forgotten). Raises as :func:`read_unit`."""
    frame = read_unit(cfg, unit, profile)
    key = _kept_key(cfg, unit)
    if key is not None:
        _KEPT[key] = frame
    return frame


def forget_kept() -> None:
    """Drop every profile :func:`keep_read` kept (a new pre-flight starts afresh)."""
    _KEPT.clear()


def is_kept(cfg: FairmonConfig, unit: IngestUnit) -> bool:
    """Whether :func:`keep_read` holds ``unit``'s profile for its file as it is now."""
    return _kept_key(cfg, unit) in _KEPT


def read_unit(cfg: FairmonConfig, unit: IngestUnit, profile: pl.DataFrame | None = None) -> pl.DataFrame:
    """The profile of one ingest unit (:func:`profile_rows`) with the
    contract columns a format leaves implicit (ds, traffic, arm) filled in;
    values are not parsed yet. Parquet files are scanned by DuckDB without
    loading them (or ``profile`` is the batch's, :func:`profile_files`); CSV files and the
    Coat matrices are read first (all columns as text). With ``engine =
    "spark"`` Spark scans Parquet and CSV files and table partitions
    (:func:`profile_spark`). A 0-byte file gives
    an empty frame (no columns).

    Raises :class:`InputContractError` naming the file when it cannot be read.
    """
    if profile is None and _KEPT:
        kept = _KEPT.pop(_kept_key(cfg, unit), None)
        if kept is not None:
            return kept
    imp = cfg.impressions
    columns = profile_columns(cfg)
    path, file = unit.file, str(unit.file)
    kind = _spark_kind(cfg, path)
    if kind is not None or _is_parquet(cfg, path):
        if profile is None and kind == "csv" and path.stat().st_size == 0:
            return pl.DataFrame()  # as read_table: the gate reports the empty file
        if profile is None and kind is not None:
            profile = profile_spark(cfg, kind, [file])[file]
        elif profile is None:
            profile = profile_parquet(scratch(), [file], columns, cluster_scan(cfg))[file]
    else:
        rows = read_coat(path, imp.min_rating) if imp.format == "coat" else read_table(path)
        if rows.width == 0:
            return rows
        profile = profile_rows(scratch(), rows.with_row_index("__row"), columns, file, cluster=cluster_scan(cfg))
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

    Scans the file's default-, swap- and random-traffic rows in DuckDB
    (sql/impressions_envy_profile.sql), parses them with the impressions'
    own parser (:func:`normalize_impressions`: dates, traffic, signals,
    label Y; the ids ride along as extra groupings) and sums them to
    one row per (ds, user_id, donor_user_id, donor_group, attributes) with
    ``n`` rows and ``n_pos`` positives. Own-policy rows (default traffic)
    have null donors; a swap row's donor is its ``policy_user_id`` and/or
    ``policy_group``. A random-traffic row counts nothing (``n`` = 0): it
    only tells a user's groups, where a swap row whose donor is that user
    looks them up (sql/envy_resolved_rows.sql). ``src_file`` is the file's
    identity (:func:`unit_key`).

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
        con = scratch()
        try:
            raw = parquet_rows(con, [file]) if _is_parquet(cfg, path) else read_table(path).with_row_index("__row")
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

    counted = pl.col("traffic").is_in(["default", "swap"])  # random rows: the user's groups, no count
    # a random row without a user tells nothing
    staged = staged.filter(counted | pl.col(ATTR_PREFIX + "user_id").is_not_null())
    frame = staged.select(
        "ds",
        *attrs,
        pl.when(counted).then(pl.col("n")).otherwise(0).alias("n"),
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


def envy_user_attributes(cfg: FairmonConfig) -> pl.DataFrame:
    """The user attribute table of ``[envy] user_table`` in long form, one
    row per (user_id, attribute) of the configured envy attributes the file
    has, with ``grp`` its value (null or empty: ``(missing)``): where a swap
    row's donor group is looked up first (DESIGN §4.7;
    sql/envy_group_counts.sql). Empty (same columns) without a table.

    Raises :class:`InputContractError` naming the file when it cannot be read,
    has no ``user_id`` column, none of the attributes, a row without a
    user_id, or a user_id on two rows (the first repeated row).
    """
    schema = {"user_id": pl.String, "attribute": pl.String, "grp": pl.String}
    if cfg.envy is None or cfg.envy.user_table is None:
        return pl.DataFrame(schema=schema)
    path = cfg.resolve(cfg.envy.user_table)
    file = str(path)
    if not path.is_file():
        raise InputContractError("no such file (config envy.user_table)", file=file)
    raw = read_table(path)
    attrs = [a for a in cfg.envy_attributes if a in raw.columns]
    if "user_id" not in raw.columns or not attrs:
        need = "user_id" if "user_id" not in raw.columns else f"any of the attributes {cfg.envy_attributes}"
        raise InputContractError(f"no column {need} (columns: {raw.columns})", file=file)
    frame = raw.select(pl.col(c).cast(pl.String).str.strip_chars() for c in ["user_id", *attrs])
    bad = frame.get_column("user_id").fill_null("") == ""
    if bad.any():
        raise InputContractError("user_id is empty", file=file, column="user_id", row=int(bad.arg_true()[0]) + 1)
    dup = ~frame.get_column("user_id").is_first_distinct()
    if dup.any():
        row = int(dup.arg_true()[0]) + 1
        raise InputContractError("user_id repeated: one row per user", file=file, column="user_id", row=row)
    return (
        frame.unpivot(index="user_id", on=attrs, variable_name="attribute", value_name="grp")
        .with_columns(grp=pl.when(pl.col("grp").fill_null("") == "").then(pl.lit("(missing)")).otherwise("grp"))
        .select(list(schema))
        .cast(schema)
    )


def rsp_pool_counts(cfg: FairmonConfig, ds) -> pl.DataFrame | None:
    """The pool table of ``[estimation] rsp_pool`` for day ``ds`` (its
    ``{ds}`` filled in, YYYY-MM-DD) as item counts per attribute and group
    (:func:`fairmon.transforms.reo.rsp_pool.pool_item_counts`: seed 001 App. H.1's
    N_k), over the item attributes (``[impressions] attributes`` but
    ``[estimation] user_attributes``) and their intersections. None when the
    config names no pool table or writes no rsp table.

    Raises :class:`InputContractError` naming the file (and the config key)
    when it does not exist or cannot be read, and the file, column and row
    of a bad value (:func:`pool_item_counts`).
    """
    from fairmon.pipelines.ingest.sources import side_tables
    from fairmon.transforms.reo.rsp_pool import pool_item_counts

    est = cfg.estimation
    path = side_tables(cfg, ds).get("estimation.rsp_pool")
    if path is None:
        return None
    if not path.is_file():
        raise InputContractError("no such file (config estimation.rsp_pool)", file=str(path))
    items = [a for a in cfg.impressions.attributes if a not in est.user_attributes]
    return pool_item_counts(
        read_table(path), file=str(path), attributes=items, intersections=cfg.impressions.intersections
    )
