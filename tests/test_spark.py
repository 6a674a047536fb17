"""The Spark engine (issue 19, DESIGN §1 "Engines"): the count stage on
Apache Spark in local mode gives the same profiles, dq_results, group_counts
and published REO as the embedded DuckDB engine on the same files.

Marked ``spark``; skipped, with the reason, only where PySpark or Java is
missing. One Spark session serves the whole module (it starts in ~5 s).
"""

from __future__ import annotations

import atexit
import datetime as dt
import shutil
import subprocess
import tempfile
from pathlib import Path

import polars as pl
import pytest
from conftest import BUCKET_IDS, reference_key
from typer.testing import CliRunner

from fairmon.pipelines.core.config import ConfigError, load_config
from fairmon.pipelines.faces.cli import app
from fairmon.pipelines.ingest import adapters, sources
from fairmon.pipelines.simulation.simulated import write_simulation
from fairmon.pipelines.storage.portable import render, render_spark
from fairmon.pipelines.storage.warehouse import read_table
from fairmon.transforms.contract import InputContractError, without_buckets
from fairmon.transforms.simulators.impressions import SimulationSpec


def _spark_missing() -> str | None:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "PySpark is not installed (pip install 'fairmon[spark]')"
    if shutil.which("java") is None:
        return "Java is not installed (Spark's local mode needs a JVM)"
    try:
        subprocess.run(["java", "-version"], capture_output=True, check=True, timeout=60)
    except (subprocess.SubprocessError, OSError) as e:
        return f"java does not run: {e}"
    return None


REASON = _spark_missing()
pytestmark = [pytest.mark.spark, pytest.mark.skipif(REASON is not None, reason=str(REASON))]

# two arms, pooled random traffic over 2 days, requests of 4 rows (clustered), 5 days
SPEC = SimulationSpec(
    days=5,
    rows_per_day=3000,
    random_rows_per_day=1200,
    arms={"control": {}, "treatment": {0: 1.25}},
    random_pool_days=2,
    seed=19,
    request_size=4,
    icc=0.2,
)
LAST = SPEC.start + dt.timedelta(days=SPEC.days - 1)
BAD_DAY = SPEC.start + dt.timedelta(days=2)
#: Columns that say which run wrote a row, not what the inputs say.
RUN_COLUMNS = {"run_id"}


#: One Spark session for the module: every config names the same [spark] settings.
SPARK_WAREHOUSE = Path(tempfile.mkdtemp(prefix="fairmon-spark-catalog-"))
atexit.register(shutil.rmtree, SPARK_WAREHOUSE, ignore_errors=True)
SPARK_SECTION = (
    f'\n[spark]\nmaster = "local[2]"\nconf = {{ "spark.sql.warehouse.dir" = "{SPARK_WAREHOUSE.as_posix()}" }}\n'
)


def _configs(folder, cluster_by: str) -> tuple:
    """The simulation's config for each engine: same files, own warehouse and DuckDB file."""
    base = (folder / "fairmon.toml").read_text()
    extra = f'\n[estimation]\ncluster_by = "{cluster_by}"\n' if "[estimation]" not in base else ""
    base = base.replace("[estimation]\n", f'[estimation]\ncluster_by = "{cluster_by}"\n') + extra
    duck, spark = folder / "duck.toml", folder / "spark.toml"
    duck.write_text(
        base.replace('warehouse = "warehouse"', 'warehouse = "wh-duck"').replace("fairmon.duckdb", "d.duckdb")
    )
    spark.write_text(
        'engine = "spark"\n'
        + base.replace('warehouse = "warehouse"', 'warehouse = "wh-spark"').replace("fairmon.duckdb", "s.duckdb")
        + SPARK_SECTION
    )
    return duck, spark


def _table(folder, wh: str, name: str) -> pl.DataFrame:
    frame = read_table(folder / wh, name)
    keep = [c for c in frame.columns if c not in RUN_COLUMNS]
    return frame.select(keep).sort(keep, nulls_last=True)


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """Simulated Parquet logs with one quarantined day (a signal value that is not boolean in row 3)."""
    folder = tmp_path_factory.mktemp("spark-sim")
    write_simulation(SPEC, folder, "parquet")
    f = folder / "default" / f"{BAD_DAY}.parquet"
    good = pl.read_parquet(f)
    good.with_columns(
        pl.when(pl.int_range(pl.len()) == 2)
        .then(pl.lit("often"))
        .otherwise(pl.col("follow").cast(pl.String))
        .alias("follow")
    ).write_parquet(f)
    return folder


def _backfill(cfg, end: dt.date = LAST) -> tuple[int, str]:
    res = CliRunner().invoke(app, ["backfill", "-c", str(cfg), "--start", str(SPEC.start), "--end", str(end)])
    return res.exit_code, res.output


def test_sql_is_written_once_and_translated():
    """The Spark text is sqlglot's translation of the very statement DuckDB runs."""
    holes = {"columns": ["__file", "ds", "like_video"], "keys": ["__file", "request_id"]}
    duck = render("impressions_profile_ids", **holes)
    assert '"like_video"' in duck and 'USING ("__file", "request_id")' in duck
    spark = render_spark("impressions_profile_ids", **holes)
    assert "`like_video`" in spark and "USING (`__file`, `request_id`)" in spark
    bucket = render_spark("impressions_bucket", cluster=["request_id"], scope=["__file"])
    assert bucket.count(":buckets") == 1 and bucket.count(":span") == 1 and bucket.count(":exact") == 1  # bound
    assert "COUNT(*) AS __n_ids FROM __distinct_ids GROUP BY __scope" in bucket  # ids per file: an aggregate
    assert "`__file` = __ids.__scope" in bucket  # the scope key as it is, not cast per row
    assert "CONV(SUBSTRING(SHA(d.__cid), 1, 8), 16, 10)" in bucket  # DuckDB's '0x' || …, once per distinct id
    assert "SELECT DISTINCT `__file` AS __scope, CAST(`request_id` AS STRING) AS __cid" in bucket
    with pytest.raises(ValueError, match="not an identifier"):
        render("impressions_profile", columns=['ds" FROM x; --'])


def test_profiles_identical(sim, tmp_path):
    """Per file (default days, pools), Spark's profile equals DuckDB's: every
    column, dtype, count and first file row; with clustering the staged rows
    per bucket sum to the same counts (the same bucket on every engine)."""
    duck, spark = _configs(sim, "none")
    cd, cs = load_config(duck), load_config(spark)
    units = sources.units_for_day(cd, LAST) + sources.units_for_day(cd, BAD_DAY)
    assert {u.scope for u in units} == {"nonrandom", "random"}
    for u in units:
        a, b = adapters.read_unit(cd, u), adapters.read_unit(cs, u)
        assert a.schema == b.schema, u.file
        assert a.equals(b), u.file
    bad = adapters.read_unit(cs, next(u for u in units if u.ds_end == BAD_DAY and u.scope == "nonrandom"))
    assert bad.filter(pl.col("follow") == "often").get_column("__first_row").to_list() == [3]
    # clustered: each id gets the same key on both engines (sql/impressions_bucket.sql, formula 5)
    duck, spark = _configs(sim, "request_id")
    cd, cs = load_config(duck), load_config(spark)
    u = units[0]
    a, b = adapters.read_unit(cd, u), adapters.read_unit(cs, u)
    # DuckDB's scan gives the profile and the rows per bucket and label as two grouping sets, Spark's the
    # profile split by bucket: the same profile proper, and the same staged rows summed over buckets
    assert without_buckets(a).equals(without_buckets(b).select(without_buckets(a).columns))
    sa, sb = adapters.normalize_unit(cd, u, a), adapters.normalize_unit(cs, u, b)
    keys = [c for c in sa.columns if c not in ("n", "src_row")]
    assert (
        sa.group_by(keys).agg(pl.col("n").sum()).sort(keys).equals(sb.group_by(keys).agg(pl.col("n").sum()).sort(keys))
    )
    assert sa.get_column("cbucket").n_unique() > 100 and sb.get_column("cbucket").n_unique() > 100
    assert set(sa.get_column("cbucket")) == set(sb.get_column("cbucket"))  # per-cluster keys or buckets alike


def test_duplicate_ids_found_alike(sim, tmp_path):
    """A copied row (same request and item) is reported by both engines on the same rows."""
    folder = tmp_path / "dup"
    shutil.copytree(sim, folder, ignore=shutil.ignore_patterns("wh-*", "*.duckdb*", "gx"))
    f = folder / "default" / f"{LAST}.parquet"
    rows = pl.read_parquet(f)
    pl.concat([rows, rows.slice(10, 2)]).write_parquet(f)
    duck, spark = _configs(folder, "none")
    cd, cs = load_config(duck), load_config(spark)
    u = next(u for u in sources.units_for_day(cd, LAST) if u.file == f)
    a, b = adapters.read_unit(cd, u), adapters.read_unit(cs, u)
    assert a.equals(b)
    assert a.filter(pl.col("id_copies") > 1).get_column("__n").sum() == 4


def test_shared_ids_across_files_found_alike(sim, tmp_path):
    """Two pools sharing 3 id keys (not copies of each other, one without
    dates of its own): both engines find the same 3 keys
    (sql/impressions_shared_ids.sql), and none between a day's file and a pool."""
    from fairmon.pipelines.ingest.identity import IngestUnit
    from fairmon.pipelines.ingest.shared_ids import shared_ids

    duck, spark = _configs(sim, "none")
    cd, cs = load_config(duck), load_config(spark)
    (pool, *_) = sorted((sim / "random").glob("random_*.parquet"))
    other = tmp_path / "other.parquet"
    rows = pl.read_parquet(pool).head(8)
    rows.with_columns(
        pl.when(pl.int_range(8) >= 3).then(pl.col("request_id") + "-new").otherwise("request_id")
    ).write_parquet(other)
    units = [IngestUnit(pool, SPEC.start, LAST, "random", "random"), IngestUnit(other, LAST, LAST, "all", "random")]
    a, b = shared_ids(cd, *units), shared_ids(cs, *units)
    assert a.get_column("n_shared").to_list() == [3, 3, 3]
    assert a.select("ds", "traffic", "request_id", "item_id").rows() == b.select(a.columns[:4]).rows()
    assert a.get_column("request_id").to_list() == sorted(rows.head(3).get_column("request_id").to_list())
    day = IngestUnit(sim / "default" / f"{LAST}.parquet", LAST, LAST, "nonrandom", "default")
    assert shared_ids(cd, units[0], day).height == shared_ids(cs, units[0], day).height == 0


@pytest.mark.usefixtures("prefect_harness")
def test_backfill_tables_identical(sim):
    """`fairmon backfill` over 5 days (one quarantined) on each engine:
    dq_results, group_counts, reo and reo_ab are identical row for row
    (cluster_by = none: the intervals too)."""
    duck, spark = _configs(sim, "none")
    out = {}
    for cfg in (duck, spark):
        code, output = _backfill(cfg)
        assert code == 1, output  # the quarantined day
        out[cfg.stem] = output
    assert "signal_is_boolean[follow]" in out["spark"] and "quarantined" in out["spark"]
    for name in ("dq_results", "group_counts", "reo", "reo_ab"):
        a, b = _table(sim, "wh-duck", name), _table(sim, "wh-spark", name)
        assert a.height > 0, name
        assert a.equals(b), name
    dq = _table(sim, "wh-spark", "dq_results").filter(pl.col("ds") == BAD_DAY)
    assert dq.height > 0
    assert _table(sim, "wh-spark", "reo").get_column("ds").unique().len() == SPEC.days - 1


def test_cluster_bucket_identical_on_both_engines(sim):
    """sql/impressions_bucket.sql gives each id (ASCII, non-ASCII, empty, long, digits, null) the same
    key on DuckDB and on Spark, equal to the SHA-1 prefix computed by hashlib (conftest.reference_key)."""
    import duckdb

    from fairmon.pipelines.ingest.engines import DuckEngine, SparkEngine
    from fairmon.pipelines.storage.spark import spark_session
    from fairmon.transforms.reo.cluster_keys import cluster_key_params

    _, spark_cfg = _configs(sim, "request_id")
    spark = spark_session(load_config(spark_cfg).spark)
    ids = pl.DataFrame(
        {"i": range(len(BUCKET_IDS)), "request_id": BUCKET_IDS}, schema={"i": pl.Int64, "request_id": pl.String}
    )
    for buckets in (4, 16, 128, 65536):  # 9 ids: hash buckets, then per-cluster keys
        want = [reference_key(x, buckets, len(BUCKET_IDS), buckets) for x in BUCKET_IDS]
        params = cluster_key_params(buckets, buckets)
        duck = DuckEngine(duckdb.connect())
        duck.register("raw_in", ids)
        got_duck = duck.frame(duck.sql("impressions_bucket", params, cluster=["request_id"], scope=[]))
        engine = SparkEngine(spark)
        engine.register("raw_in", spark.createDataFrame(ids.to_arrow()))
        got_spark = engine.frame(engine.sql("impressions_bucket", params, cluster=["request_id"], scope=[]))
        assert got_duck.sort("i").get_column("__cbucket").to_list() == want
        assert got_spark.sort("i").get_column("__cbucket").to_list() == want


@pytest.mark.usefixtures("prefect_harness")
def test_backfill_clustered_tables_identical(sim, tmp_path):
    """cluster_by = request_id: both engines put each request in the same bucket, so
    dq_results, group_counts, reo and reo_ab are identical row for row, every
    published column (se, ci_*, reo_bc, the parity test, design_effect) exactly equal."""
    folder = tmp_path / "clustered"
    shutil.copytree(sim, folder, ignore=shutil.ignore_patterns("wh-*", "*.duckdb*", "gx", "*.toml"))
    shutil.copy(sim / "fairmon.toml", folder / "fairmon.toml")
    duck, spark = _configs(folder, "request_id")
    for cfg in (duck, spark):  # the two days before the quarantined one
        code, output = _backfill(cfg, BAD_DAY - dt.timedelta(days=1))
        assert code == 0, output
    for name in ("dq_results", "group_counts", "reo", "reo_ab"):
        a, b = _table(folder, "wh-duck", name), _table(folder, "wh-spark", name)
        assert a.height > 0, name
        assert a.equals(b), name
    reo = _table(folder, "wh-spark", "reo")
    assert set(reo.get_column("cluster_by")) == {"request_id"} and (reo.get_column("design_effect") != 1).all()


def test_config_rules(tmp_path):
    """engine = 'spark' with [spark]; a table needs the Spark engine and no file templates."""
    base = 'warehouse = "w"\nduckdb = "d.duckdb"\n'
    imp = '[impressions]\nformat = "contract"\nsignals = ["s"]\nattributes = ["a"]\n'
    cases = {
        "table without spark": (base + imp + 'table = "logs.impressions"\n', "set engine = 'spark'"),
        "both master and remote": (
            'engine = "spark"\n'
            + base
            + imp
            + 'path = "x/{ds}.parquet"\n[spark]\nmaster = "local"\nremote = "sc://h:1"\n',
            "not both",
        ),
        "path and table": (
            'engine = "spark"\n' + base + imp + 'path = "x/{ds}.parquet"\ntable = "t"\n',
            "exactly one of path",
        ),
        "bad table name": ('engine = "spark"\n' + base + imp + 'table = "logs.imp; drop"\n', "letters, digits"),
        "[spark] but engine duckdb": (
            base + imp + 'path = "x/{ds}.parquet"\n[spark]\nmaster = "local[2]"\n',
            "add engine",
        ),
        "engine inside [spark]": (base + imp + 'path = "x/{ds}.parquet"\n[spark]\nengine = "spark"\n', "at the top"),
    }
    for what, (text, msg) in cases.items():
        p = tmp_path / "c.toml"
        p.write_text(text)
        with pytest.raises(ConfigError, match=msg):
            load_config(p)
        assert what
    p = tmp_path / "ok.toml"
    p.write_text('engine = "spark"\n' + base + imp + 'table = "logs.impressions"\n[spark]\nremote = "sc://h:15002"\n')
    cfg = load_config(p)
    assert cfg.spark.remote == "sc://h:15002" and cfg.impressions.table == "logs.impressions"


def _contract_rows(sim, ds: dt.date) -> pl.DataFrame:
    """Day ``ds`` of the simulation as contract rows (DESIGN §2): its default
    rows and the random rows whose request began that day (request ids
    start with their date)."""
    signals = ["like_video", "share", "follow", "finish", "download", "long_view"]
    default = pl.read_parquet(sim / "default" / f"{ds}.parquet").with_columns(pl.lit("default").alias("traffic"))
    pools = pl.concat([pl.read_parquet(p) for p in sorted((sim / "random").glob("*.parquet"))])
    random = pools.filter(pl.col("request_id").str.starts_with(ds.isoformat())).with_columns(
        pl.lit("random").alias("traffic"), pl.lit("all").alias("arm")
    )
    cols = ["request_id", "item_id", "traffic", "arm", "young_adult", *signals]
    return (
        pl.concat([default.select(cols), random.select(cols)])
        .with_columns(pl.col(s).cast(pl.Boolean) for s in signals)
        .with_columns(pl.col("young_adult").cast(pl.String), pl.lit(ds).alias("ds"))
    )


def _contract_files(tmp_path, days: int, window: int) -> tuple[list[dt.date], dict, str]:
    """A simulation of ``days`` days as daily contract Parquet files under ``tmp_path/contract``: (the
    days, their rows, the ``[impressions]`` section both engines' configs share, with ``window``)."""
    spec = SimulationSpec(
        days=days, rows_per_day=2000, random_rows_per_day=800, arms={"control": {}}, random_pool_days=1, seed=4
    )
    write_simulation(spec, tmp_path / "sim", "parquet")
    dates = [spec.start + dt.timedelta(days=d) for d in range(spec.days)]
    rows = {d: _contract_rows(tmp_path / "sim", d) for d in dates}
    (tmp_path / "contract").mkdir()
    for d, frame in rows.items():
        frame.write_parquet(tmp_path / "contract" / f"{d}.parquet")
    common = (
        '[impressions]\nformat = "contract"\nsignals = ["like_video", "share", "follow", "finish", "download", '
        f'"long_view"]\nattributes = ["young_adult"]\nrandom_window_days = {window}\n'
    )
    return dates, rows, common


@pytest.mark.usefixtures("prefect_harness")
def test_catalog_table_matches_files(tmp_path):
    """[impressions] table = "logs.impressions" (partitioned by ds) on Spark
    gives the group_counts and REO that the same rows give as daily contract
    files on DuckDB; a partition appended to later is detected as changed
    input (late data) and re-read."""
    from fairmon.pipelines.storage.spark import spark_session

    days, rows, common = _contract_files(tmp_path, 3, window=2)
    files_cfg = tmp_path / "files.toml"
    exact = ""  # cluster_by = auto: request ids in the same buckets on both engines
    files_cfg.write_text(
        'warehouse = "wh-files"\nduckdb = "f.duckdb"\n' + common + 'path = "contract/{ds}.parquet"\n' + exact
    )
    table_cfg = tmp_path / "table.toml"
    table_cfg.write_text(
        'engine = "spark"\nwarehouse = "wh-table"\nduckdb = "t.duckdb"\n'
        + common
        + 'table = "logs.impressions"\n'
        + exact
        + SPARK_SECTION
    )
    spark = spark_session(load_config(table_cfg).spark)
    spark.sql("CREATE DATABASE IF NOT EXISTS logs")
    spark.sql("DROP TABLE IF EXISTS logs.impressions")
    whole = pl.concat(rows.values())
    spark.createDataFrame(whole.to_arrow()).write.partitionBy("ds").saveAsTable("logs.impressions")
    first, last = str(days[0]), str(days[-1])
    for cfg in (files_cfg, table_cfg):
        res = CliRunner().invoke(app, ["backfill", "-c", str(cfg), "--start", first, "--end", last])
        assert res.exit_code == 0, res.output
    for name in ("group_counts", "reo"):
        a, b = _table(tmp_path, "wh-files", name), _table(tmp_path, "wh-table", name)
        assert a.height > 0 and a.equals(b), name
    missing = load_config(table_cfg)
    missing = missing.model_copy(update={"impressions": missing.impressions.model_copy(update={"table": "logs.nope"})})
    with pytest.raises(InputContractError, match="TABLE_OR_VIEW_NOT_FOUND") as err:
        sources.units_for_day(missing, days[-1])
    assert "spark-table:logs.nope" in str(err.value) and "DROP VIEW" not in str(err.value)  # Spark's first line only
    dq = _table(tmp_path, "wh-table", "dq_results")
    assert f"spark-table:logs.impressions/ds={last}" in dq.get_column("subject").to_list()
    # late data: more rows land in the last partition; the next run sees the changed input and re-counts
    extra = rows[days[-1]].filter(pl.col("traffic") == "default").head(500)
    extra = extra.with_columns(pl.concat_str(pl.lit("late-"), pl.col("request_id")).alias("request_id"))
    spark.createDataFrame(extra.to_arrow()).write.mode("append").insertInto("logs.impressions")
    res = CliRunner().invoke(app, ["run", "-c", str(table_cfg), "--date", last])
    assert res.exit_code == 0, res.output
    counts = _table(tmp_path, "wh-table", "group_counts").filter(
        (pl.col("ds") == days[-1]) & (pl.col("traffic") == "default")
    )
    before = _table(tmp_path, "wh-files", "group_counts").filter(
        (pl.col("ds") == days[-1]) & (pl.col("traffic") == "default")
    )
    assert counts.get_column("attribute").unique().to_list() == ["young_adult"]
    assert counts.get_column("n").sum() == before.get_column("n").sum() + 500


@pytest.mark.usefixtures("prefect_harness")
def test_a_catalog_table_partitioned_by_a_utc_timestamp_reads_its_days(tmp_path):
    """A catalog table whose ``ds`` partition column is a TIMESTAMP at midnight UTC (as a table written
    from zoned instants has it) gives each day its partition: the same group_counts and REO as the same
    rows in daily contract files on DuckDB. Its partitions were never found (their text is
    'YYYY-MM-DD 00:00:00'), so every day failed as having no input."""
    from fairmon.pipelines.storage.spark import spark_session

    days, rows, common = _contract_files(tmp_path, 2, window=1)
    files_cfg, table_cfg = tmp_path / "files.toml", tmp_path / "table.toml"
    files_cfg.write_text('warehouse = "wh-files"\nduckdb = "f.duckdb"\n' + common + 'path = "contract/{ds}.parquet"\n')
    table_cfg.write_text(
        'engine = "spark"\nwarehouse = "wh-table"\nduckdb = "t.duckdb"\n'
        + common
        + 'table = "logs.impressions_ts"\n'
        + SPARK_SECTION
    )
    spark = spark_session(load_config(table_cfg).spark)
    spark.sql("CREATE DATABASE IF NOT EXISTS logs")
    spark.sql("DROP TABLE IF EXISTS logs.impressions_ts")
    whole = pl.concat(rows.values()).with_columns(pl.col("ds").cast(pl.Datetime("us", "UTC")))
    spark.createDataFrame(whole.to_arrow()).write.partitionBy("ds").saveAsTable("logs.impressions_ts")
    assert dict(spark.table("logs.impressions_ts").dtypes)["ds"] == "timestamp"
    for cfg in (files_cfg, table_cfg):
        res = CliRunner().invoke(app, ["backfill", "-c", str(cfg), "--start", str(days[0]), "--end", str(days[-1])])
        assert res.exit_code == 0, res.output
    for name in ("group_counts", "reo"):
        a, b = _table(tmp_path, "wh-files", name), _table(tmp_path, "wh-table", name)
        assert a.height > 0 and a.equals(b), name


def test_envy_scans_identical(tmp_path):
    """With [envy]: the profile (with its envy flags, a swap row without its
    donor caught in the same file row) and the per-user rows of the envy
    audit are the same from both engines."""
    from fairmon.pipelines.simulation.simulated import write_envy_simulation

    paths = write_envy_simulation(
        tmp_path, scenario="envious", days=1, pulls_own=40, pulls_per_donor=20, default_rows=500, random_rows=500
    )
    base = paths["config"].read_text()
    assert base.count("[estimation]\n") == 1
    # unclustered: with buckets DuckDB scans per-bucket rows as a grouping set, Spark splits the profile
    base = base.replace("[estimation]\n", '[estimation]\ncluster_by = "none"\n')
    duck_cfg = tmp_path / "duck.toml"
    duck_cfg.write_text(base)
    spark_cfg = tmp_path / "spark.toml"
    spark_cfg.write_text('engine = "spark"\n' + base + SPARK_SECTION)
    cd, cs = load_config(duck_cfg), load_config(spark_cfg)
    (u,) = sources.units_for_day(cd, dt.date(2026, 1, 1))
    swap = pl.read_parquet(u.file)
    row = swap.with_row_index().filter(pl.col("traffic") == "swap").get_column("index")[3]
    swap.with_columns(
        pl.when(pl.int_range(pl.len()) == row).then(None).otherwise(pl.col(c)).alias(c)
        for c in ("policy_user_id", "policy_group")
        if c in swap.columns
    ).write_parquet(u.file)
    a, b = adapters.read_unit(cd, u), adapters.read_unit(cs, u)
    assert a.equals(b)
    assert a.filter(~pl.col("swap_has_donor")).get_column("__first_row").to_list() == [row + 1]
    ea, eb = adapters.envy_profile(cd, u), adapters.envy_profile(cs, u)
    keys = ["user_id", "donor_user_id", "donor_group"]
    assert ea.height > 100 and ea.sort(keys, nulls_last=True).equals(eb.sort(keys, nulls_last=True))


def test_csv_rows_numbered_across_splits(tmp_path):
    """A CSV file read in many splits (32 kB each here) still names a bad
    row by its line in the file: Spark's profile equals DuckDB's, whose rows
    are numbered as read."""
    from fairmon.pipelines.storage.spark import spark_session

    sim = tmp_path / "sim"
    spec = SimulationSpec(days=1, rows_per_day=6000, random_rows_per_day=500, arms={"control": {}}, seed=5)
    paths = write_simulation(spec, sim, "csv")
    f = sim / "default" / f"{spec.start}.csv"
    rows = pl.read_csv(f, infer_schema=False)
    bad = 4_321
    rows.with_columns(
        pl.when(pl.int_range(pl.len()) == bad).then(pl.lit("often")).otherwise(pl.col("share")).alias("share")
    ).write_csv(f)
    assert f.stat().st_size > 8 * 32 * 1024 and rows.height > bad
    base = paths["config"].read_text().replace("[estimation]\n", '[estimation]\ncluster_by = "none"\n')
    (sim / "duck.toml").write_text(base)
    (sim / "spark.toml").write_text('engine = "spark"\n' + base + SPARK_SECTION)
    cd, cs = load_config(sim / "duck.toml"), load_config(sim / "spark.toml")
    (u,) = [u for u in sources.units_for_day(cd, spec.start) if u.file == f]
    spark = spark_session(cs.spark)
    old = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(32 * 1024))
    try:
        b = adapters.read_unit(cs, u)
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", old)
    a = adapters.read_unit(cd, u)
    assert a.equals(b)
    assert b.filter(pl.col("share") == "often").get_column("__first_row").to_list() == [bad + 1]


def test_a_project_folder_with_glob_characters_reads_alike(tmp_path):
    """A project folder named ``proj[x]{a}`` is a name, not a pattern, on
    Spark too (issue 40 item 5): Hadoop's glob would find no file there;
    the escaped path reads the same rows as DuckDB's."""
    from fairmon.pipelines.ingest.engines import hadoop_literal

    assert hadoop_literal("/p/proj[x]{a}/d*1?.csv") == "/p/proj\\[x\\]\\{a\\}/d\\*1\\?.csv"
    assert hadoop_literal("/p/plain/2026-01-01.csv") == "/p/plain/2026-01-01.csv"
    sim = tmp_path / "proj[x]{a}"
    spec = SimulationSpec(days=1, rows_per_day=2000, random_rows_per_day=300, arms={"control": {}}, seed=7)
    paths = write_simulation(spec, sim, "csv")
    base = paths["config"].read_text()
    (sim / "duck.toml").write_text(base)
    (sim / "spark.toml").write_text('engine = "spark"\n' + base + SPARK_SECTION)
    cd, cs = load_config(sim / "duck.toml"), load_config(sim / "spark.toml")
    units = sources.units_for_day(cd, spec.start)
    assert units and all("proj[x]{a}" in str(u.file) for u in units)
    for u in units:
        a, b = adapters.read_unit(cd, u), adapters.read_unit(cs, u)
        assert a.height > 0 and a.equals(b)


def test_an_int96_day_reads_as_duckdb_reads_it(tmp_path):
    """A Parquet ds written as INT96 (Spark's default timestamp) with a time of day: DuckDB and Polars read
    it as a naive timestamp (its day), and so does the Spark engine (Spark alone labelled it UTC, which the
    contract reads as a zoned timestamp, a day only at midnight UTC: the file was refused on Spark alone)."""
    import pyarrow.parquet as pq

    from fairmon.transforms.contract_values import parse_date

    day = dt.date(2026, 4, 1)
    (tmp_path / "in").mkdir()
    for traffic in ("default", "random"):
        rows = pl.DataFrame(
            {
                "ds": [dt.datetime(2026, 4, 1, 12, 30)] * 40,
                "traffic": traffic,
                "request_id": [f"{traffic}{i}" for i in range(40)],
                "item_id": [str(i) for i in range(40)],
                "like": [i % 3 == 0 for i in range(40)],
                "grp": ["a", "b"] * 20,
            }
        )
        pq.write_table(
            rows.to_arrow(), tmp_path / "in" / f"{day}-{traffic}.parquet", use_deprecated_int96_timestamps=True
        )
    base = (
        'warehouse = "wh"\nduckdb = "f.duckdb"\n[impressions]\nformat = "contract"\npath = "in/{ds}-*.parquet"\n'
        'signals = ["like"]\nattributes = ["grp"]\nrandom_window_days = 1\n'
    )
    (tmp_path / "duck.toml").write_text(base)
    (tmp_path / "spark.toml").write_text('engine = "spark"\n' + base + SPARK_SECTION)
    cd, cs = load_config(tmp_path / "duck.toml"), load_config(tmp_path / "spark.toml")
    (u,) = [u for u in sources.units_for_day(cd, day) if u.file.name == f"{day}-default.parquet"]
    a, b = adapters.read_unit(cd, u), adapters.read_unit(cs, u)
    assert a.schema["ds"] == b.schema["ds"] and b.schema["ds"].time_zone is None
    assert a.get_column("ds").unique().to_list() == b.get_column("ds").unique().to_list()  # the same instants
    assert parse_date(b.get_column("ds"), file="f", column="ds").unique().to_list() == [day]
