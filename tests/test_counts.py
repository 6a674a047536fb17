"""sql/group_counts.sql against an independent Polars aggregation, and the
window rule for random traffic; then counts -> reo tables."""

import datetime as dt

import numpy as np
import polars as pl
import pytest

from fairmon.pipelines.storage import db
from fairmon.transforms.contract import normalize_impressions
from fairmon.transforms.reo import estimate_reo
from fairmon.transforms.reo_tables import GROUP_COUNTS_SCHEMA, MISSING_GROUP, reo_tables

D = dt.date(2026, 3, 10)
W0 = D - dt.timedelta(days=6)


def _frame(rng, n, traffic, arms, ds, ds_start=None):
    f = pl.DataFrame(
        {
            "traffic": [traffic] * n,
            "arm": rng.choice(arms, n),
            "s1": rng.integers(0, 2, n),
            "s2": (rng.random(n) < 0.1).astype(int),
            "g": [x or None for x in rng.choice(["a", "b", "c", ""], n, p=[0.3, 0.3, 0.35, 0.05]).tolist()],
            "h": rng.choice(["x", "y"], n),
        }
    )
    return normalize_impressions(
        f, file=f"{traffic}-{ds}", signals=["s1", "s2"], attributes=["g", "h"], ds=ds, ds_start=ds_start
    )


def _query(con, name, days, window_days, pool_policy="overlap"):
    """sql/<name>.sql for ``days``, every staged file current for every day
    (day_files). These tests check the ``overlap`` policy, under which the
    pool D-8..D-2 meets the window D-6..D; ``contained`` is in test_windows.py."""
    files = con.sql("SELECT DISTINCT src_file FROM impressions").pl().get_column("src_file").to_list()
    con.register("day_files", pl.DataFrame({"day": [d for d in days for _ in files], "file": files * len(days)}))
    try:
        out = db.query(con, name, window_days=window_days, pool_policy=pool_policy)
    finally:
        con.unregister("day_files")
    if "cbucket" in out.columns:  # rows staged without a cluster id: one row per group, bucket null
        assert out.get_column("cbucket").null_count() == out.height
        out = out.drop("cbucket")
    return out


@pytest.fixture()
def staged(tmp_path):
    rng = np.random.default_rng(3)
    frames = {
        "day": _frame(rng, 3000, "default", ["ctl", "trt"], D),
        "prev_day_default": _frame(rng, 500, "default", ["ctl"], D - dt.timedelta(days=1)),
        "rand_in_window": _frame(rng, 800, "random", ["all"], D - dt.timedelta(days=2)),
        "pool_overlapping": _frame(rng, 900, "random", ["all"], D - dt.timedelta(days=2), D - dt.timedelta(days=8)),
        "pool_too_old": _frame(rng, 700, "random", ["all"], D - dt.timedelta(days=8), D - dt.timedelta(days=10)),
        "rand_future": _frame(rng, 600, "random", ["all"], D + dt.timedelta(days=1)),
    }
    with db.connect(tmp_path / "t.duckdb") as con:
        for f in frames.values():
            con.register("staged", f)
            db.execute(con, "impressions_create")
            db.execute(con, "impressions_insert")
            con.unregister("staged")
        counts = _query(con, "group_counts", [D], (D - W0).days + 1)
    return frames, counts


def _expected(frame, traffic, arm_col):
    long = pl.concat(
        [
            frame.select(
                pl.lit(traffic).alias("traffic"),
                arm_col.alias("arm"),
                pl.lit(a).alias("attribute"),
                pl.col(f"attr__{a}").fill_null(MISSING_GROUP).alias("group"),
                "y",
                "n",
            )
            for a in ("g", "h")
        ]
    )
    return (
        long.group_by("traffic", "arm", "attribute", "group")
        .agg(
            pl.col("n").sum().cast(pl.Int64).alias("n"),
            pl.col("n").filter(pl.col("y")).sum().cast(pl.Int64).alias("n_pos"),
        )
        .sort("traffic", "arm", "attribute", "group")
    )


def test_counts_match_independent_aggregation(staged):
    frames, counts = staged
    rec = _expected(frames["day"], "default", pl.col("arm"))
    rand = _expected(pl.concat([frames["rand_in_window"], frames["pool_overlapping"]]), "random", pl.lit("all"))
    expected = pl.concat([rec, rand]).sort("traffic", "arm", "attribute", "group")
    got = counts.select("traffic", "arm", "attribute", "group", "n", "n_pos").sort(
        "traffic", "arm", "attribute", "group"
    )
    assert got.equals(expected)
    # every attribute's groups add up to the traffic total
    totals = counts.group_by("traffic", "arm", "attribute").agg(pl.col("n").sum())
    for traffic, arm, _a, n in totals.iter_rows():
        src = frames["day"].filter(pl.col("arm") == arm).get_column("n").sum() if traffic == "default" else 800 + 900
        assert n == src


def test_random_window_span_and_columns(staged):
    _, counts = staged
    assert counts.columns == list(GROUP_COUNTS_SCHEMA)
    rand = counts.filter(pl.col("traffic") == "random")
    assert set(rand.get_column("window_start")) == {D - dt.timedelta(days=8)}  # the overlapping pool's start
    assert set(rand.get_column("window_end")) == {D - dt.timedelta(days=2)}
    assert set(counts.filter(pl.col("traffic") == "default").get_column("window_start")) == {D}


def test_reo_tables_from_counts(staged):
    frames, counts = staged
    group, overall = reo_tables(counts.cast(GROUP_COUNTS_SCHEMA), D)
    assert overall.height == 4  # 2 arms x 2 attributes
    row = overall.filter((pl.col("arm") == "trt") & (pl.col("attribute") == "g")).row(0, named=True)
    day = frames["day"].filter(pl.col("arm") == "trt")
    rand = pl.concat([frames["rand_in_window"], frames["pool_overlapping"]])
    groups = ["a", "b", "c"]  # the missing group counts in the totals only

    def pos(f, g):  # staged rows carry n, the logged pairs they stand for
        return f.filter((pl.col("attr__g") == g) & pl.col("y")).get_column("n").sum()

    a, b = [pos(day, g) for g in groups], [pos(rand, g) for g in groups]
    n_day, n_rand = day.get_column("n").sum(), rand.get_column("n").sum()
    assert n_day == 3000 - frames["day"].filter(pl.col("arm") == "ctl").get_column("n").sum()
    e = estimate_reo(groups, np.array(a), n_day, np.array(b), n_rand)
    assert row["K"] == 3
    assert row["reo"] == pytest.approx(e.reo, rel=1e-12) and row["se"] == pytest.approx(e.se, rel=1e-12)
    assert row["n_rec"] == n_day and row["n_rand"] == n_rand == 800 + 900
    assert row["rand_window_start"] == D - dt.timedelta(days=8)
    g = group.filter((pl.col("arm") == "trt") & (pl.col("attribute") == "g")).sort("group")
    assert g.get_column("group").to_list() == groups
    assert g.get_column("Q").to_list() == pytest.approx([x / n_day for x in a])
    assert g.get_column("se_delta_U").to_list() == pytest.approx(list(e.se_delta_U))


def test_a_range_counts_each_day_as_the_day_alone(staged, tmp_path):
    days = [D - dt.timedelta(days=1), D, D + dt.timedelta(days=1)]
    with db.connect(tmp_path / "t.duckdb") as con:
        rng = _query(con, "group_counts", days, 7)
        totals = _query(con, "traffic_totals", days, 7)
        for d in days:
            alone = _query(con, "group_counts", [d], 7)
            assert rng.filter(pl.col("ds") == d).equals(alone)
            assert totals.filter(pl.col("ds") == d).equals(_query(con, "traffic_totals", [d], 7))
    assert set(rng.get_column("ds")) == set(days)


def test_cluster_bucket_is_the_shifted_hash_modulo_the_buckets():
    """sql/impressions_bucket.sql: the bucket is DuckDB's hash shifted right by one
    bit, as BIGINT, modulo the buckets. Taken modulo directly, the UBIGINT hash and
    the bound INTEGER are computed in HUGEINT, which made the clustered profile scan
    3x slower (bench/README.md, issue 20)."""
    import duckdb

    from fairmon.pipelines.storage.portable import render

    con = duckdb.connect()
    con.execute("CREATE TABLE raw_in AS SELECT 'r' || i AS request_id FROM range(2000) AS t(i)")
    got = con.sql(render("impressions_bucket", cluster=["request_id"]), params={"buckets": 7}).pl()
    want = con.sql("SELECT request_id, (hash(request_id) >> 1) % 7 AS b FROM raw_in").pl()
    got, want = got.sort("request_id"), want.sort("request_id")
    assert got.get_column("__cbucket").to_list() == want.get_column("b").to_list()
    assert got.get_column("__cbucket").dtype == pl.Int32
    assert set(got.get_column("__cbucket").to_list()) == set(range(7))
