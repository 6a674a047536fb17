"""sql/group_counts.sql against an independent Polars aggregation, and the
window rule for random traffic; then counts -> reo tables."""

import datetime as dt

import numpy as np
import polars as pl
import pytest
from conftest import BUCKET_IDS, reference_bucket, reference_key

from fairmon.pipelines.ingest.range_counts import count_statements, group_totals
from fairmon.pipelines.storage import db
from fairmon.transforms.contract import normalize_impressions
from fairmon.transforms.reo.estimate import estimate_reo
from fairmon.transforms.reo.reo_tables import GROUP_COUNTS_SCHEMA, MISSING_GROUP, reo_tables

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
        if name != "group_counts":
            return db.query(con, name, window_days=window_days, pool_policy=pool_policy)
        by_key, spans = count_statements(con, 128, window_days, pool_policy)
    finally:
        con.unregister("day_files")
    # rows staged without a cluster id: one row per group, key null
    assert by_key.get_column("cbucket").null_count() == by_key.height
    out = group_totals(by_key, spans)
    assert out.height == by_key.height
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
            # a frame of the test's own layout, not the declared one (staging_tables.IMPRESSIONS)
            con.execute("CREATE TABLE IF NOT EXISTS impressions AS SELECT * FROM staged LIMIT 0")
            con.execute("INSERT INTO impressions BY NAME SELECT * FROM staged")
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


@pytest.mark.parametrize("statement", ["impressions_bucket", "impressions_bucket_rows"])
def test_cluster_key_is_the_sha1_prefix_per_cluster_or_modulo_the_buckets(statement):
    """sql/impressions_bucket.sql on DuckDB (and impressions_bucket_rows.sql,
    hashing each row's id) gives each id the key that hashlib gives it (int32): the
    hash bucket when the rows hold more distinct ids than buckets (2008 ids: 7 and 128 buckets, all 7
    filled), else the per-cluster key (65,536 buckets), distinct for every id; per file when the rows
    hold several (__file): the same id is keyed by its own file's id count (issue 38)."""
    import duckdb

    from fairmon.pipelines.storage.portable import render
    from fairmon.transforms.reo.cluster_keys import cluster_key_params

    con = duckdb.connect()
    con.execute("CREATE TABLE raw_in AS SELECT 'r' || i AS request_id FROM range(2000) AS t(i)")
    con.execute("INSERT INTO raw_in SELECT unnest($ids)", {"ids": BUCKET_IDS})
    n_ids = 2008  # r0..r1999 and BUCKET_IDS but its r1, null counted once
    for buckets in (7, 128, 65536):
        got = con.sql(
            render(statement, cluster=["request_id"], scope=[]), params=cluster_key_params(buckets, buckets)
        ).pl()
        want = [reference_key(i, buckets, n_ids, buckets) for i in got.get_column("request_id")]
        assert got.get_column("__cbucket").to_list() == want
        assert got.get_column("__cbucket").dtype == pl.Int32
    assert min(want) < 0 and len(set(want)) == n_ids and reference_key(None, 65536, n_ids, 65536) in want
    got = con.sql(render(statement, cluster=["request_id"], scope=[]), params=cluster_key_params(7, 7)).pl()
    assert set(got.get_column("__cbucket").to_list()) == set(range(7))
    # an integer id is keyed as its text: a Parquet column of numbers and a CSV column of digits agree
    con.execute("CREATE TABLE nums AS SELECT 42 AS i")
    query = render(statement, cluster=["i"], scope=[]).replace("raw_in", "nums")
    assert con.sql(query, params=cluster_key_params(128, 128)).fetchall()[0][1] == reference_key("42", 128, 1, 128)
    # two files scanned together: file a (3 ids) per cluster, file b (20 ids) per bucket, r1 in both
    con.execute(
        "CREATE TABLE files AS SELECT 'a' AS __file, unnest(['r1', 'r2', 'r3']) AS request_id "
        "UNION ALL SELECT 'b', 'r' || i FROM range(1, 21) AS t(i)"
    )
    query = render(statement, cluster=["request_id"], scope=["__file"]).replace("raw_in", "files")
    got = con.sql(query, params=cluster_key_params(16, 16)).pl()
    want = [reference_key(i, 16, 3 if f == "a" else 20, 16) for f, i in got.select("__file", "request_id").iter_rows()]
    assert got.get_column("__cbucket").to_list() == want
    r1 = dict(got.filter(pl.col("request_id") == "r1").select("__file", "__cbucket").iter_rows())
    assert r1["a"] < 0 <= r1["b"] < 16 and (-1 - r1["a"]) % 16 == r1["b"]  # a key maps to its id's bucket


def _clustered_rows(signal_kind: str, n: int = 3000) -> pl.DataFrame:
    """Rows of 8-row requests, two signals with some nulls, two attributes
    with a null value, of one ``signal_kind`` ('bool', 'int' or 'text')."""
    rng = np.random.default_rng(20)
    s1 = rng.random(n) < 0.3
    s2 = rng.random(n) < 0.2
    s1_null, s2_null = rng.random(n) < 0.05, rng.random(n) < 0.05
    frame = pl.DataFrame(
        {
            "ds": ["2026-03-01"] * n,
            "traffic": rng.choice(["default", "random"], n).tolist(),
            "arm": rng.choice(["a", "b"], n).tolist(),
            "request_id": [f"r{i // 8}" for i in range(n)],
            "item_id": [f"i{i}" for i in range(n)],
            "s1": [None if m else bool(v) for v, m in zip(s1, s1_null)],
            "s2": [None if m else bool(v) for v, m in zip(s2, s2_null)],
            "g": rng.choice(["x", "y", "z"], n).tolist(),
            "h": [None if v < 0.1 else ("p" if v < 0.6 else "q") for v in rng.random(n)],
        }
    )
    if signal_kind == "int":
        frame = frame.with_columns(pl.col("s1", "s2").cast(pl.Int8))
    elif signal_kind == "text":
        frame = frame.with_columns(pl.col("s1", "s2").cast(pl.String))
    return frame


@pytest.mark.parametrize("rule", ["any", "all"])
@pytest.mark.parametrize("kind", ["bool", "int", "text"])
def test_rows_per_cluster_bucket_from_the_profile_scan(kind, rule):
    """Issue 20: the clustered profile scan gives the profile exactly as
    without clustering and, per bucket, the rows per combination and label
    (sql/impressions_profile_buckets.sql; text signals: the profile split by
    bucket). Both are checked against the rows themselves: bucket = the
    SHA-1 prefix modulo 16 (reference_bucket), label = any/all of the signals with SQL's null
    logic (null OR false is null, null AND true is null)."""
    import duckdb

    from fairmon.pipelines.ingest.adapters import rows_in
    from fairmon.pipelines.ingest.profiles import ClusterScan, profile_rows
    from fairmon.transforms.contract import BUCKET_LABEL, without_buckets

    rows = _clustered_rows(kind)
    cols = ["ds", "traffic", "arm", "s1", "s2", "g", "h"]
    con = duckdb.connect()
    plain = profile_rows(con, rows.with_row_index("__row"), cols, "f", 0)
    split = profile_rows(
        con,
        rows.with_row_index("__row"),
        cols,
        "f",
        0,
        ClusterScan("request_id", 16, ("s1", "s2"), rule == "all", exact=16),
    )
    assert (BUCKET_LABEL in split.columns) == (kind != "text")
    assert without_buckets(split).equals(plain) and rows_in(split) == rows.height == rows_in(plain)

    staged = normalize_impressions(split, file="f", signals=["s1", "s2"], attributes=["g", "h"], label_rule=rule)
    buckets = [reference_bucket(i, 16) for i in rows.get_column("request_id")]
    con.register("rows", rows.with_columns(pl.Series("__cbucket", buckets)))
    y = "s1 OR s2" if rule == "any" else "s1 AND s2"
    want = con.sql(
        f"""SELECT traffic, arm, ({y}) AS y, g, h, CAST(__cbucket AS INTEGER) AS cbucket,
                   count(*) AS n
            FROM rows GROUP BY ALL"""
    ).pl()
    got = staged.group_by("traffic", "arm", "y", "attr__g", "attr__h", "cbucket").agg(pl.col("n").sum())
    got = got.rename({"attr__g": "g", "attr__h": "h"}).sort(pl.all())
    assert got.equals(want.cast(got.schema).sort(pl.all())) and got.get_column("cbucket").n_unique() == 16
    assert got.get_column("y").null_count() > 0  # the null logic is exercised


@pytest.mark.parametrize("kind,rule,dup", [("bool", "any", False), ("int", "all", False), ("bool", "all", True)])
def test_the_bucket_rows_of_the_grouping_sets_scan_equal_the_profile_split_by_bucket(kind, rule, dup):
    """The grouping-sets scan (sql/impressions_profile_buckets.sql: bucket
    rows grouped by their combination's own columns, label and bucket) and
    the profile split by bucket (no label in SQL) give the same profile
    proper (id copies included) and the same staged rows, every column (day,
    window start, label, bucket, rows, first file row); each bucket row
    carries its combination (file, arm, attributes) and its signals null."""
    import duckdb

    from fairmon.pipelines.ingest import profiles
    from fairmon.transforms.contract import BUCKET_LABEL, CLUSTER_BUCKET, without_buckets

    rows = _clustered_rows(kind)
    if dup:  # rows 8k+1 repeat the item of row 8k in the same request: 375 duplicated id keys
        rows = rows.with_columns(
            pl.when(pl.int_range(pl.len()) % 8 == 1)
            .then(pl.col("item_id").shift(1))
            .otherwise("item_id")
            .alias("item_id")
        )
    rows = rows.with_row_index("__row")
    cols = ["ds", "traffic", "arm", "s1", "s2", "g", "h"]
    kw = dict(file="f", signals=["s1", "s2"], attributes=["g", "h"], label_rule=rule)
    cluster = profiles.ClusterScan("request_id", 16, ("s1", "s2"), rule == "all", exact=16)
    fast = profiles.profile_rows(duckdb.connect(), rows, cols, "f", cluster=cluster)
    split = profiles.profile_rows(
        duckdb.connect(), rows, cols, "f", cluster=profiles.ClusterScan("request_id", 16, exact=16)
    )
    assert BUCKET_LABEL in fast.columns and BUCKET_LABEL not in split.columns and CLUSTER_BUCKET in split.columns
    assert without_buckets(fast).equals(without_buckets(split))
    assert (without_buckets(fast).get_column("id_copies").max() == 2) == dup
    buckets = fast.filter(pl.col(CLUSTER_BUCKET).is_not_null())
    assert buckets.get_column("s1").null_count() == buckets.height and buckets.get_column("g").null_count() == 0
    # a bucket row's first file row holds the bucket row's own combination
    first = rows.select((pl.col("__row") + 1).alias("__first_row"), "arm", "g", "h")
    joined = buckets.select("__first_row", "arm", "g", "h").join(first, on="__first_row", how="left", suffix="_row")
    assert joined.height == buckets.height > 100
    assert all(joined.get_column(c).equals(joined.get_column(c + "_row"), check_names=False) for c in ("arm", "g", "h"))
    key = ["traffic", "arm", "y", "attr__g", "attr__h", "cbucket"]
    a, b = (normalize_impressions(p, **kw).sort(key) for p in (fast, split))
    assert a.equals(b) and a.height > 100


def test_bucket_rows_that_disagree_with_the_profile_are_a_defect():
    """contract.bucket_rows: the label the scan gave each profile row must be the contract's (null where
    it is null), and the rows per bucket must add up to the profile's rows per label, else RuntimeError."""
    from fairmon.transforms.contract import bucket_rows

    staged = pl.DataFrame(
        {
            "ds": [1, 1, 1],
            "y": [True, False, None],
            "cbucket": [None, None, None],
            "n": [5, 3, 1],
            "src_file": ["f"] * 3,
            "src_row": [1, 2, 9],
        }
    )
    scanned = pl.Series([True, False, None])
    per_bucket = pl.DataFrame(
        {
            "ds": [1, 1, 1, 1],
            "y": [True, True, False, None],
            "cbucket": [0, 1, 0, 3],
            "n": [2, 3, 3, 1],
            "src_file": ["f"] * 4,
            "src_row": [1, 4, 2, 9],
        }
    )
    assert bucket_rows(staged, scanned, per_bucket) is per_bucket
    with pytest.raises(RuntimeError, match="f: the scan's label disagrees .* on 1 profile row.*file row 9: False"):
        bucket_rows(staged, pl.Series([True, False, False]), per_bucket)
    with pytest.raises(RuntimeError, match="f: the scan's label disagrees .* on 2 profile row"):
        bucket_rows(staged, pl.Series([False, True, None]), per_bucket)
    with pytest.raises(RuntimeError, match="f: the rows per cluster bucket disagree"):
        bucket_rows(staged, scanned, per_bucket.with_columns(pl.col("y").fill_null(True)))  # the null row moved
    with pytest.raises(RuntimeError, match="f: the rows per cluster bucket disagree"):
        bucket_rows(staged, scanned, per_bucket.head(3))  # a bucket row missing


@pytest.mark.parametrize("scan_all", [False, True])
def test_a_scan_whose_label_is_not_the_contracts_stops_the_file(scan_all):
    """The label the profile scan groups the bucket rows by (sql/impressions_profile_buckets.sql) is checked
    row by row against the contract's on the profile proper: a scan taking `all` of the signals where the
    config says `any` (or the reverse) is a defect (RuntimeError), the matching one stages the file."""
    import duckdb

    from fairmon.pipelines.ingest import profiles

    rows = _clustered_rows("bool").with_row_index("__row")
    cols = ["ds", "traffic", "arm", "s1", "s2", "g", "h"]
    scan = profiles.ClusterScan("request_id", 16, ("s1", "s2"), scan_all, exact=16)
    prof = profiles.profile_rows(duckdb.connect(), rows, cols, "f", cluster=scan)
    kw = dict(file="f", signals=["s1", "s2"], attributes=["g", "h"])
    staged = normalize_impressions(prof, label_rule="all" if scan_all else "any", **kw)
    assert staged.get_column("n").sum() == rows.height and staged.get_column("cbucket").null_count() == 0
    with pytest.raises(RuntimeError, match="f: the scan's label disagrees with the contract's"):
        normalize_impressions(prof, label_rule="any" if scan_all else "all", **kw)


def test_a_profile_with_bucket_rows_gives_its_profile_proper_sorted_and_a_split_one_is_sorted():
    """profile_rows with rows per bucket and label: the scan leaves them in
    its order, and profile_part gives the profile proper sorted by first file
    row, one row per first row, with every bucket row's rows (the bucket rows
    of a label sum to its profile rows). ordered_profile sorts a profile split
    by bucket (no label column) by first row, a file row's profile row first."""
    import duckdb

    from fairmon.pipelines.ingest import profiles
    from fairmon.transforms.contract import BUCKET_LABEL, CLUSTER_BUCKET, profile_part

    rows = _clustered_rows("bool").with_row_index("__row")
    cluster = profiles.ClusterScan("request_id", 16, ("s1", "s2"), exact=16)
    got = profiles.profile_rows(duckdb.connect(), rows, ["ds", "traffic", "arm", "s1", "s2", "g", "h"], "f", 0, cluster)
    proper = profile_part(got)
    first = proper.get_column("__first_row").to_list()
    assert first == sorted(first) and len(set(first)) == len(first) and first[0] == 1
    assert BUCKET_LABEL not in proper.columns and CLUSTER_BUCKET not in proper.columns
    buckets = got.filter(pl.col(CLUSTER_BUCKET).is_not_null())
    assert proper.get_column("__n").sum() == buckets.get_column("__n").sum() == rows.height
    label = (pl.col("s1") | pl.col("s2")).fill_null(False).alias(BUCKET_LABEL)
    positives = proper.filter(label).get_column("__n").sum()
    assert buckets.filter(pl.col(BUCKET_LABEL)).get_column("__n").sum() == positives
    frame = pl.DataFrame({"__first_row": [3, 1, 3, 1, 2], CLUSTER_BUCKET: [5, 7, None, None, 2], "v": list("abcde")})
    assert profiles.ordered_profile(frame, False).get_column("v").to_list() == ["d", "b", "e", "c", "a"]
    assert profiles.ordered_profile(frame.sort("v"), False).get_column("v").to_list() == ["d", "b", "e", "c", "a"]


@pytest.mark.parametrize("per_request", [1, 8])
def test_either_cluster_key_statement_gives_the_same_profile(monkeypatch, per_request):
    """profiles.ids_mostly_distinct picks sql/impressions_bucket_rows.sql for
    rows with about one row per id and sql/impressions_bucket.sql for ids that
    repeat (8 rows a request); forcing the other statement gives the same
    profile, bucket rows included."""
    import duckdb

    from fairmon.pipelines.ingest import profiles

    rows = _clustered_rows("bool")
    rows = rows.with_columns(
        (pl.lit("r") + (pl.int_range(pl.len()) // per_request).cast(pl.String)).alias("request_id")
    )
    rows = rows.with_row_index("__row")
    con = duckdb.connect()
    con.register("raw_in", rows)
    assert profiles.ids_mostly_distinct(profiles.DuckEngine(con), "request_id") == (per_request == 1)
    cols = ["ds", "traffic", "arm", "s1", "s2", "g", "h"]
    cluster = profiles.ClusterScan("request_id", 16, ("s1", "s2"), exact=16)
    picked = profiles.profile_rows(duckdb.connect(), rows, cols, "f", 0, cluster)
    monkeypatch.setattr(profiles, "ids_mostly_distinct", lambda engine, column: per_request != 1)
    other = profiles.profile_rows(duckdb.connect(), rows, cols, "f", 0, cluster)
    in_order = ["__first_row", "__cbucket"]  # one row per first row and kind (the scan's order is its own)
    assert picked.sort(in_order).equals(other.sort(in_order))
    assert picked.get_column("__cbucket").n_unique() == 17  # 16 buckets and null


@pytest.mark.parametrize("dtype", [pl.Float64, pl.Float32])
def test_a_float_attributes_signed_zeros_are_one_group_with_or_without_clusters(dtype):
    """−0.0 equals 0.0, so the profile scan keeps whichever spelling a group met first: a file's profile
    and its rows per cluster bucket could spell one value two ways (f78e365 stopped such a file with a
    RuntimeError; before, without clusters, its rows split between '0.0' and '-0.0' by row order). The
    attribute's text spells both 0.0: every row in one group, clustered or not."""
    import duckdb

    from fairmon.pipelines.ingest import profiles

    n = 64
    rows = pl.DataFrame(
        {"ds": ["2024-01-02"] * n, "traffic": ["default"] * n, "arm": ["a"] * n,
         "s1": [i % 2 == 0 for i in range(n)], "s2": [False] * n,
         "g": pl.Series([0.0 if i == 0 else -0.0 for i in range(n)], dtype=dtype),
         "request_id": [f"r{i}" for i in range(n)]}
    ).with_row_index("__row")  # fmt: skip
    cols = ["ds", "traffic", "arm", "s1", "s2", "g"]
    kw = dict(file="f", signals=["s1", "s2"], attributes=["g"], ds=dt.date(2024, 1, 2))
    scans = (None, profiles.ClusterScan("request_id", 4, ("s1", "s2"), exact=4))
    for cluster in scans:
        staged = normalize_impressions(profiles.profile_rows(duckdb.connect(), rows, cols, "f", cluster=cluster), **kw)
        assert staged.group_by("attr__g").agg(pl.col("n").sum()).rows() == [("0.0", n)]
