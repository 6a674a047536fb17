"""The machinery that makes platform-scale days cheap: file profiles computed in
DuckDB (one scan for a backfill's files), stage timings, one DuckDB connection
per run, Data Docs built once per backfill, GX suites stored once."""

import datetime as dt
import os
import time

import numpy as np
import polars as pl
import pytest

from fairmon.pipelines.checks.gate import QualityGate, build_docs, gate_for
from fairmon.pipelines.core import timing
from fairmon.pipelines.core.config import load_config
from fairmon.pipelines.core.run import Run, run_scope
from fairmon.pipelines.ingest.adapters import profile_files, read_unit
from fairmon.pipelines.ingest.sources import units_for_day
from fairmon.pipelines.orchestration.runner import docs_deferred
from fairmon.pipelines.storage import db
from fairmon.transforms.contract import without_buckets
from fairmon.transforms.gate_frames import raw_check_frame

D0 = dt.date(2026, 8, 3)
CFG = (
    'warehouse = "warehouse"\nduckdb = "f.duckdb"\n[impressions]\nformat = "contract"\n'
    'path = "in/{ds}.parquet"\nsignals = ["s1", "s2"]\nattributes = ["g"]\nrandom_window_days = 1\n'
)


def _day(root, ds, n, rng, dup_rows=0):
    ids = [f"r{i}" for i in range(n)]
    for i in range(dup_rows):  # rows 10+i repeat the id (and traffic) of row i
        ids[10 + i] = ids[i]
    f = pl.DataFrame(
        {
            "ds": [ds] * n,
            "traffic": ["random" if i % 5 == 4 else "default" for i in range(n)],
            "arm": "all",
            "request_id": ids,
            "item_id": ["v"] * n,
            "s1": rng.random(n) < 0.3,
            "s2": rng.random(n) < 0.1,
            "g": rng.choice(["a", "b", "c"], n),
        }
    )
    f.write_parquet(root / "in" / f"{ds}.parquet")
    return f


@pytest.fixture()
def three_days(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "f.toml").write_text(CFG)
    rng = np.random.default_rng(4)
    days = [D0 + dt.timedelta(days=i) for i in range(3)]
    frames = {d: _day(tmp_path, d, 5000, rng, dup_rows=3 if i == 1 else 0) for i, d in enumerate(days)}
    return load_config(tmp_path / "f.toml"), days, frames


def _expected_profile(frame):
    cols = ["ds", "traffic", "arm", "s1", "s2", "g"]
    return (
        frame.with_row_index("r")
        .group_by(cols)
        .agg(pl.len().alias("__n"), (pl.col("r").min() + 1).alias("first"))
        .sort("first")
    )


def test_batch_profiles_equal_per_file_profiles_and_the_rows(three_days):
    """profile_files (one scan for a batch's files) gives each file the profile read_unit reads alone."""
    cfg, days, frames = three_days
    units = [u for d in days for u in units_for_day(cfg, d)]
    per_file = [read_unit(cfg, u) for u in units]
    profiles = profile_files(cfg, [u.file for u in units])
    assert sorted(profiles) == sorted(str(u.file) for u in units)
    for u, alone in zip(units, per_file):
        got = read_unit(cfg, u, profiles[str(u.file)])  # the batch's profile
        assert got.sort(pl.all()).equals(alone.sort(pl.all()))  # bucket rows come in the scan's order
        exp = _expected_profile(frames[u.ds_end])
        merged = (
            without_buckets(got)  # the profile proper, without the rows per cluster bucket
            .group_by("ds", "traffic", "arm", "s1", "s2", "g")  # rows with duplicated ids are apart
            .agg(pl.col("__n").sum(), pl.col("__first_row").min())
            .sort("__first_row")
        )
        assert merged.get_column("__n").to_list() == exp.get_column("__n").to_list()
        assert merged.get_column("__first_row").to_list() == exp.get_column("first").to_list()
    # only the second day has duplicated ids: 3 keys, 6 rows, each profile row says how many copies
    profiles = [without_buckets(p) for p in per_file]
    dup = profiles[1].filter(pl.col("id_copies") > 1)
    assert dup.get_column("__n").sum() == 6 and set(dup.get_column("id_copies")) == {2}
    assert profiles[0].get_column("id_copies").max() == 1 and profiles[2].get_column("id_copies").max() == 1


@pytest.mark.parametrize("collide", [False, True])
def test_duplicate_ids_by_hash_first_equal_the_exact_aggregation(tmp_path, monkeypatch, collide):
    """The duplicate-id check hashes each file's id keys first and runs the
    exact aggregation only on a file with a repeated hash: ``copies`` is the
    exact aggregation's over all files, with duplicates in one file of three.
    With every key forced onto one hash (``collide``: distinct keys sharing a
    hash), every file goes to the exact aggregation, which still finds only
    the true duplicates."""
    import duckdb

    from fairmon.pipelines.ingest import engines
    from fairmon.pipelines.ingest.profiles import ID_KEY, duplicate_ids

    rng = np.random.default_rng(5)
    (tmp_path / "in").mkdir()
    files = []
    for i, dups in enumerate([0, 4, 0]):
        f = tmp_path / f"d{i}.parquet"
        _day(tmp_path, D0, 200, rng, dup_rows=dups).write_parquet(f)
        files.append(f)
    if collide:
        real = engines.render
        monkeypatch.setattr(
            engines,
            "render",
            lambda name, **cols: (
                "SELECT 0::UBIGINT AS __id_hash FROM raw_part"
                if name == "impressions_id_hashes"
                else real(name, **cols)
            ),
        )
    keys = ["__file", *ID_KEY]
    with duckdb.connect() as con:
        parts = [con.sql(f"SELECT {i} AS __file, * FROM read_parquet('{f}')") for i, f in enumerate(files)]
        n = duplicate_ids(con, iter(parts), keys)
        got = con.sql("SELECT * FROM copies ORDER BY ALL").pl()
        con.register("allrows", pl.concat([p.pl() for p in parts]))
        keysql = ", ".join(keys)
        want = con.sql(
            f"SELECT {keysql}, count(*) AS id_copies FROM allrows GROUP BY {keysql} HAVING count(*) > 1 ORDER BY ALL"
        ).pl()
    assert n == 4 and got.height == 4 and set(got.get_column("__file")) == {1}
    assert got.cast(want.schema).equals(want)


def test_gx_sees_the_profile_and_names_file_rows(three_days, tmp_path):
    cfg, days, _ = three_days
    prof = read_unit(cfg, units_for_day(cfg, days[1])[0])
    gate = QualityGate(tmp_path / "gx")
    params = {
        "required_columns": ["ds", "traffic", "arm", "s1", "s2", "g"],
        "signals": ["s1", "s2"],
        "attributes": ["g"],
        "traffic_values": ["default", "random"],
    }
    r = gate.validate(
        "impressions_raw", raw_check_frame(without_buckets(prof), ["ds", "traffic", "s1", "s2"]), params, "f", "t"
    )
    (f,) = r.failures
    assert f["name"] == "ids_unique" and f["unexpected_count"] == 6 and f["rows"][0] == 1


def test_nested_clocks_count_each_second_once(tmp_path):
    with run_scope(Run(None)):  # books live in the run
        timing.start(D0)
        with timing.clock(D0, "ingest"):
            time.sleep(0.05)
            with timing.within("checks"):
                time.sleep(0.1)
        book = timing.take(D0)
    assert 0.1 <= book["checks"] < 0.2 and 0.05 <= book["ingest"] < 0.1
    assert book["counts"] == book["estimators"] == book["writes"] == 0.0
    with timing.within("checks"):  # outside any run: nothing to record, no error
        pass
    with pytest.raises(ValueError, match="unknown stage"), timing.clock(D0, "parsing"):
        pass


def test_a_session_shares_one_connection_until_the_last_one_ends(tmp_path):
    p = tmp_path / "s.duckdb"
    with db.session(p):
        with db.connect(p) as a:
            a.execute("CREATE TABLE t AS SELECT 1 AS x")
        with db.session(p), db.connect(p) as b:
            assert b is a
        with db.connect(p) as c:
            assert c is a and c.sql("SELECT x FROM t").fetchall() == [(1,)]
    with db.connect(p) as d:
        assert d is not a and d.sql("SELECT x FROM t").fetchall() == [(1,)]


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_data_docs_are_built_once_per_deferred_block(three_days):
    cfg, days, _ = three_days
    gate = gate_for(cfg)
    frame = pl.DataFrame(
        {
            "ds": [D0],
            "table": ["t"],
            "suite": ["s"],
            "subject": ["x"],
            "success": [True],
            "n_expectations": [1],
            "n_failed": [0],
            "n_warnings": [0],
            "failed_critical": [""],
            "failed_warning": [""],
            "details": ["[]"],
        }
    )
    calls = []
    real = gate.ctx.build_data_docs
    gate.ctx.build_data_docs = lambda **kw: calls.append(kw) or real(**kw)
    try:
        with run_scope(Run(cfg)) as run, docs_deferred(run):
            for _ in range(3):
                gate.validate("dq_results", frame, {}, "dq_results", str(D0))
                build_docs(cfg)
            assert calls == [] and len(gate.pending_docs) == 3
        assert len(calls) == 1 and len(calls[0]["resource_identifiers"]) == 3 and gate.pending_docs == []
        assert gate.data_docs_index.is_file()
    finally:
        gate.ctx.build_data_docs = real


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_suites_are_stored_once_per_process_unless_they_change(tmp_path):
    gate = QualityGate(tmp_path / "gx")
    stored = []
    real = gate.ctx.suites.add_or_update
    gate.ctx.suites.add_or_update = lambda suite: stored.append(suite.name) or real(suite=suite)
    frame = pl.DataFrame(
        {
            "ds": [D0],
            "arm": ["c"],
            "attribute": ["g"],
            "K": [2],
            "reo": [0.1],
            "se": [0.01],
            "ci_low": [0.08],
            "ci_high": [0.12],
            "reo_max": [1.0],
            "reo_below_ci_high": [0.1],
        }
    )
    for _ in range(3):
        assert gate.validate("reo", frame, {}, "reo", "t").success
    assert stored == ["reo"]
    gate.validate("reo", frame.drop("ci_high"), {}, "reo", "t")  # other columns: other expectations
    assert stored == ["reo", "reo"]


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_a_batch_ingest_stages_each_file_once_and_stops_only_the_day_of_a_bad_file(three_days):
    """ingest_days: one profile scan, one GX run and one staging transaction
    for the batch; day 2's file (duplicated ids) fails ids_unique and stops
    day 2 alone; unchanged files keep their recorded results, a failed or
    rewritten one is read again; the batch's count sees each day's rows."""
    from fairmon.pipelines.ingest.range_counts import count_batch
    from fairmon.pipelines.ingest.staging import ingest_days

    cfg, days, _ = three_days
    with db.session(cfg.duckdb_path):
        got = ingest_days(cfg, days, "impressions")
        assert (got.files, got.staged) == (3, 2) and got.short() == [days[1]]
        assert [r.success for r in got.days[days[0]]] == [True]
        assert got.days[days[1]][0].failed_critical == ["ids_unique"]
        again = ingest_days(cfg, days, "impressions")
        assert (again.files, again.staged) == (1, 0)  # only the file that failed is read again
        assert again.days[days[0]] == got.days[days[0]]  # the recorded result
        counts = count_batch(cfg, days)
        assert counts[days[0]][0].get_column("n").sum() == 5000  # every row of the day, default and random
        assert counts[days[1]][0].height == 0  # nothing of day 2 was staged
        time.sleep(0.01)
        _day(cfg.resolve("."), days[2], 700, np.random.default_rng(2))  # day 3 rewritten
        assert ingest_days(cfg, days[2:], "impressions").staged == 1
        assert count_batch(cfg, days)[days[2]][0].get_column("n").sum() == 700


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_range_counts_in_day_chunks_equal_one_statement(three_days, monkeypatch):
    """With many staged rows a day (many groups, clustered) count_batch counts
    the batch a few days a statement (COUNT_ROWS_BUDGET): every day's counts,
    totals and key rows are those of one statement over the whole batch."""
    from fairmon.pipelines.ingest import range_counts
    from fairmon.pipelines.ingest.staging import ingest_days

    cfg, days, _ = three_days
    kept = {}
    for budget in (10**12, 1):  # one statement; then one day a statement
        monkeypatch.setattr(range_counts, "COUNT_ROWS_BUDGET", budget)
        with db.session(cfg.duckdb_path):
            chunks = []
            monkeypatch.setattr(range_counts, "statement_chunks", _spy(range_counts.statement_chunks, chunks))
            ingest_days(cfg, days, "impressions", force=True)
            kept[budget] = range_counts.count_batch(cfg, days)
            assert chunks == [[days] if budget > 1 else [[d] for d in days]]
    for ds in days:
        (counts, totals, held), (counts1, totals1, held1) = kept[10**12][ds], kept[1][ds]
        buckets, buckets1 = held.frame(), held1.frame()  # held packed
        assert counts.equals(counts1) and totals.equals(totals1), ds
        assert buckets.sort(buckets.columns).equals(buckets1.sort(buckets1.columns)), ds  # bucket rows: no order
    assert sum(kept[1][ds][0].get_column("n").sum() for ds in days) > 0


def _spy(fn, calls: list):
    def wrapped(*args):
        calls.append(out := fn(*args))
        return out

    return wrapped


def test_files_checked_together_for_duplicate_ids_find_what_each_alone_finds(tmp_path, monkeypatch):
    """Small files share one duplicate-id query (id_check_batches): the id key
    starts with the file, so two files with the very same keys are not
    duplicates of each other, and a key repeated inside one file is found
    with its copies exactly as when every file is checked alone."""
    import duckdb

    from fairmon.pipelines.ingest import profiles
    from fairmon.pipelines.ingest.profiles import id_check_batches, profile_parquet

    rng = np.random.default_rng(7)
    files = []
    for i in range(3):  # same ds, same keys in every file; file 1 repeats 4 keys
        (tmp_path / f"f{i}" / "in").mkdir(parents=True)
        _day(tmp_path / f"f{i}", D0, 3000, rng, dup_rows=4 if i == 1 else 0)
        files.append(str(tmp_path / f"f{i}" / "in" / f"{D0}.parquet"))
    sizes = [os.path.getsize(f) for f in files]
    assert id_check_batches(files) == [(0, files)]  # a few KB each: one query
    assert id_check_batches(files, budget=sizes[0] + sizes[1]) == [(0, files[:2]), (2, files[2:])]
    assert id_check_batches(files, budget=1) == [(0, files[:1]), (1, files[1:2]), (2, files[2:])]

    cols = ["ds", "traffic", "arm", "s1", "s2", "g"]
    together = profile_parquet(duckdb.connect(), files, cols)
    monkeypatch.setattr(profiles, "ID_CHECK_BYTES", 1)  # every file alone
    alone = profile_parquet(duckdb.connect(), files, cols)
    for f in files:
        assert together[f].equals(alone[f])
    copies = {f: together[f].filter(pl.col("id_copies") > 1).get_column("__n").sum() for f in files}
    assert copies == {files[0]: 0, files[1]: 8, files[2]: 0}  # 4 keys twice, in file 1 only


def test_packed_bucket_rows_come_back_unchanged():
    """A day's per-bucket counts are held as compressed Arrow IPC bytes between the range's count and
    the day's estimates (bench/README issue 37 item 3): the same values, types and row order come back,
    for an empty frame too."""
    from fairmon.pipelines.ingest.range_counts import BUCKET_SCHEMA, pack_frame, unpack_frame

    frame = pl.DataFrame(
        {"ds": [dt.date(2026, 1, 1)] * 3, "traffic": ["default", "random", "default"], "arm": ["a", "all", "b"],
         "attribute": ["g"] * 3, "group": ["x", "(missing)", "é"], "cbucket": [-7, 3, None],
         "n": [2**40, 0, 5], "n_pos": [1, 0, 5]},
        schema=BUCKET_SCHEMA,
    )  # fmt: skip
    for f in (frame, frame.head(0)):
        packed = pack_frame(f)
        assert isinstance(packed, bytes) and unpack_frame(packed).equals(f)
        assert unpack_frame(packed).schema == f.schema


def test_a_range_holds_its_key_rows_as_frames_within_the_budget_and_packs_the_rest():
    """range_counts.Holder: frames are held as they are while their estimated sizes fit the budget, the
    rest packed; either way held_frame gives back the same frame (values, types, row order)."""
    from fairmon.pipelines.ingest.range_counts import BUCKET_SCHEMA, Holder, held_frame

    def frame(n: int) -> pl.DataFrame:
        return pl.DataFrame(
            {"ds": [dt.date(2026, 1, 1)] * n, "traffic": ["default"] * n, "arm": ["a"] * n, "attribute": ["g"] * n,
             "group": [f"k{i}" for i in range(n)], "cbucket": list(range(n)), "n": [3] * n, "n_pos": [1] * n},
            schema=BUCKET_SCHEMA,
        )  # fmt: skip

    frames = [frame(100), frame(300), frame(50), frame(0)]
    size = frames[0].estimated_size()
    holder = Holder(budget=size + frames[2].estimated_size())
    held = [holder.hold(f) for f in frames]
    # the first fits, the second does not (packed), the third fits what is left, an empty frame costs nothing
    assert [isinstance(h, bytes) for h in held] == [False, True, False, False]
    assert held[0] is frames[0] and holder.left == 0
    for h, f in zip(held, frames):
        assert held_frame(h).equals(f) and held_frame(h).schema == f.schema
