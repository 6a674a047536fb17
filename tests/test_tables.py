"""The output-table registry (DESIGN §1 "Tables are declared once"): the DuckDB
schemas, the estimators' frames, the gate suites and docs/tables.md all agree
with it."""

import datetime as dt
from pathlib import Path

import duckdb
import polars as pl
import pytest
from conftest import declared_examples

from fairmon.pipelines.checks.suites import load_spec
from fairmon.pipelines.executor.day_checks import output_check_frames
from fairmon.pipelines.storage import ddl
from fairmon.pipelines.storage.warehouse import clean_tmp, refresh_views, remove_partitions, write_partitions
from fairmon.transforms.registry import GATED_TABLES, TABLES, Column, Table

D = dt.date(2026, 2, 3)
REPO = Path(__file__).resolve().parent.parent


def _frames() -> dict[str, pl.DataFrame]:
    return declared_examples(D)


def test_examples_are_made_for_every_declared_table_with_its_schema():
    frames = _frames()
    assert list(frames) == list(TABLES)
    for name, frame in frames.items():
        assert frame.height > 0 and dict(frame.schema) == TABLES[name].schema, name
        if frame.height > 1:
            assert not frame.select(TABLES[name].key).is_duplicated().any(), name


def _record(con, run_id, ds, status, minute):
    from fairmon.pipelines.storage import db

    db.execute(con, "runs_create")
    con.execute(
        "INSERT INTO runs (run_id, ds, started_at, status) VALUES (?, ?, ?, ?)",
        [run_id, ds, dt.datetime(2026, 1, 1, 0, minute), status],
    )


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_duckdb_views_have_the_registry_schema_and_read_the_files(tmp_path):
    wh = tmp_path / "wh"
    con = duckdb.connect(str(tmp_path / "t.duckdb"))
    refresh_views(con, wh)  # no partition yet: empty, typed views
    for name, t in TABLES.items():
        described = con.sql(f'DESCRIBE "{name}"').pl()
        assert described.get_column("column_name").to_list() == [c.name for c in t.stored_columns], name
        assert described.get_column("column_type").to_list() == [ddl.duckdb_type(c.dtype) for c in t.stored_columns]
    frames = {k: v.with_columns(pl.lit("r1").alias("run_id")) for k, v in _frames().items()}
    write_partitions(wh, D, frames)
    refresh_views(con, wh)
    for name, t in TABLES.items():
        described = con.sql(f'DESCRIBE "{name}"').pl()
        assert described.get_column("column_name").to_list() == [c.name for c in t.stored_columns], name
        assert described.get_column("column_type").to_list() == [ddl.duckdb_type(c.dtype) for c in t.stored_columns]
        rows = con.sql(f'SELECT * FROM "{name}"').pl()
        assert rows.drop("run_id").equals(frames[name].drop("run_id")), name
    # the view reads the files: a re-written partition shows at once, never appended
    write_partitions(wh, D, {"reo": frames["reo"].with_columns(pl.lit("r2").alias("run_id"))})
    assert con.sql('SELECT DISTINCT run_id FROM "reo"').fetchall() == [("r2",)]
    con.close()


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_views_never_lag_their_partitions(tmp_path):
    """The views are created once, before any partition; then partitions
    come and go with no refresh at all (a run killed between its publish and
    its refresh): a new reader of the DuckDB file sees every day, an older
    file's missing registry column as NULL beside a newer file's values, and
    a removed partition gone. A second refresh within the run (``made``)
    creates nothing again."""
    wh, path = tmp_path / "wh", tmp_path / "t.duckdb"
    made: dict[str, str] = {}
    with duckdb.connect(str(path)) as con:
        refresh_views(con, wh, made)
        assert set(made) == set(TABLES) and all(made[n] == ddl.table_view_sql(n, wh) for n in TABLES)
        executed: list[str] = []
        refresh_views(_Recording(con, executed), wh, made)
        assert executed == []
    frames = {k: v.with_columns(pl.lit("r1").alias("run_id")) for k, v in _frames().items()}
    old = {**frames, "reo": frames["reo"].drop("design_effect")}  # written before the column existed
    d2, d3 = D + dt.timedelta(days=1), D + dt.timedelta(days=2)
    write_partitions(wh, D, old, checked=False)
    write_partitions(wh, d2, {k: v.with_columns(pl.lit(d2).alias("ds")) for k, v in old.items()}, checked=False)
    newer = frames["reo"].with_columns(pl.lit(d3).alias("ds"), pl.lit(1.5).alias("design_effect"))
    write_partitions(wh, d3, {"reo": newer})
    with duckdb.connect(str(path), read_only=True) as reader:
        got = reader.sql('SELECT ds, design_effect FROM "reo" ORDER BY ds').fetchall()
        assert [r[1] for r in got] == [None] * (2 * frames["reo"].height) + [1.5] * frames["reo"].height
        for name in TABLES:
            assert reader.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0] == sum(
                f.height for f in ([old[name]] * 2 + ([newer] if name == "reo" else []))
            ), name
    assert remove_partitions(wh, d3, set()) == ["reo"]
    with duckdb.connect(str(path), read_only=True) as reader:
        assert reader.sql('SELECT count(DISTINCT ds), count(design_effect) FROM "reo"').fetchall() == [(2, 0)]


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_a_publish_that_fails_partway_leaves_the_next_refresh_checking_every_view(tmp_path, monkeypatch):
    """A publish whose removal of an old partition fails after the file is gone
    (a stray file in the day's folder) forgets the run's views; the next
    day's publish checks them all again, and reo_ab, whose partition is gone,
    reads as no rows; a publish after the views exist does not open the
    DuckDB file for them; a refresh that raises leaves nothing half-known."""
    from types import SimpleNamespace

    from fairmon.pipelines.core.run import Run, run_scope
    from fairmon.pipelines.executor import publishing
    from fairmon.pipelines.executor.publishing import WarehouseViews, publish

    wh = tmp_path / "wh"
    cfg = SimpleNamespace(warehouse_path=wh, duckdb_path=tmp_path / "t.duckdb")
    frames = {k: v.with_columns(pl.lit("r1").alias("run_id")) for k, v in _frames().items()}
    d2, d3 = D + dt.timedelta(days=1), D + dt.timedelta(days=2)
    run = WarehouseViews()  # what the run knows of its DuckDB file, passed to each publish
    with run_scope(Run(cfg)):
        publish(cfg, D, frames, True, run)
        assert set(run.views) == set(TABLES)
        (wh / "reo_ab" / f"ds={D.isoformat()}" / ".DS_Store").write_text("")  # rmdir will fail after the unlink
        without_ab = {k: v for k, v in frames.items() if k != "reo_ab"}
        with pytest.raises(OSError):
            publish(cfg, D, without_ab, True, run)
        assert not run.views  # forgotten: the next refresh checks every view
        publish(cfg, d2, {k: v.with_columns(pl.lit(d2).alias("ds")) for k, v in without_ab.items()}, True, run)
        assert not list((wh / "reo_ab").glob("ds=*/*.parquet")) and set(run.views) == set(TABLES)
        with duckdb.connect(str(cfg.duckdb_path)) as con:
            assert con.sql('SELECT count(*) FROM "reo_ab_published"').fetchall() == [(0,)]
        monkeypatch.setattr(publishing.db, "connect", lambda *a, **k: (_ for _ in ()).throw(AssertionError("opened")))
        publish(cfg, d3, {"reo": frames["reo"].with_columns(pl.lit(d3).alias("ds"))}, False, run)
        monkeypatch.undo()
        broken = {"reo": "x"}
        monkeypatch.setattr(ddl, "table_view_sql", lambda *a: (_ for _ in ()).throw(OSError("unreadable")))
        with pytest.raises(OSError):
            refresh_views(duckdb.connect(), wh, broken)
        assert broken == {}


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_a_new_run_keeps_the_views_its_duckdb_file_holds_with_the_same_sql(tmp_path):
    """A daily run is a new process: its first refresh creates only the views
    the DuckDB file does not hold marked with the same SQL (creating one reads
    every partition's footer). A view replaced by hand loses its mark and is
    created again, with its published view; another warehouse path creates
    every view again. Kept views still read the partitions."""
    import re

    wh, path = tmp_path / "wh", tmp_path / "t.duckdb"
    frames = {k: v.with_columns(pl.lit("r1").alias("run_id")) for k, v in _frames().items()}
    write_partitions(wh, D, frames)
    expected = {name: f.height for name, f in frames.items()}

    def created(con, warehouse) -> set[str]:
        executed: list[str] = []
        refresh_views(_Recording(con, executed), warehouse, {})
        made = (re.match(r'CREATE OR REPLACE VIEW "?(\w+)"?', s) for s in executed)
        return {m.group(1) for m in made if m} - {"published_runs"}

    with duckdb.connect(str(path)) as con:  # the first run creates every view
        assert created(con, wh) == set(TABLES) | {f"{n}_published" for n in GATED_TABLES}
    with duckdb.connect(str(path)) as con:  # the next run, a new process
        assert created(con, wh) == set()
        for name in TABLES:
            assert con.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0] == expected[name], name
        con.execute('CREATE OR REPLACE VIEW "reo" AS SELECT 1 AS x')
        assert created(con, wh) == {"reo", "reo_published"}
        columns = con.sql('DESCRIBE "reo"').pl().get_column("column_name").to_list()
        assert columns == [c.name for c in TABLES["reo"].stored_columns]
        moved = tmp_path / "moved"
        (wh).rename(moved)
        assert created(con, moved) == set(TABLES) | {f"{n}_published" for n in GATED_TABLES}
        assert con.execute('SELECT count(*) FROM "reo_published"').fetchone()[0] == 0  # no run recorded
        assert con.execute('SELECT count(*) FROM "reo"').fetchone()[0] == expected["reo"]


class _Recording:
    """A DuckDB connection that records the statements given to execute()."""

    def __init__(self, con, log: list[str]):
        self._con, self._log = con, log

    def execute(self, sql, *args, **kwargs):
        self._log.append(sql)
        return self._con.execute(sql, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._con, name)


def test_published_views_show_only_the_latest_published_run_of_each_day(tmp_path):
    wh = tmp_path / "wh"
    con = duckdb.connect(str(tmp_path / "t.duckdb"))
    days = [D + dt.timedelta(days=i) for i in range(4)]
    reo = _frames()["reo"]
    for i, day in enumerate(days):
        write_partitions(wh, day, {"reo": reo.with_columns(pl.lit(day).alias("ds"), pl.lit(f"r{i}").alias("run_id"))})
    _record(con, "r0", days[0], "published", 1)  # published
    _record(con, "r1", days[1], "published", 1)  # published, then a later run failed
    _record(con, "x1", days[1], "failed", 2)
    _record(con, "r2", days[2], "quarantined", 1)
    _record(con, "old", days[3], "published", 1)  # the latest published run is not the one whose rows are there
    _record(con, "r3", days[3], "running", 2)  # ... and a killed run is the latest anyway
    refresh_views(con, wh)
    assert con.sql("SELECT DISTINCT ds FROM reo_published").pl().get_column("ds").to_list() == [days[0]]
    assert set(GATED_TABLES) == {n for n, t in TABLES.items() if t.published_view}
    assert "dq_results" not in GATED_TABLES
    con.close()


def test_a_duckdb_file_that_mirrored_the_outputs_is_migrated_to_views(tmp_path):
    con = duckdb.connect(str(tmp_path / "t.duckdb"))
    con.execute("CREATE TABLE reo (ds DATE, reo DOUBLE)")  # what fairmon 0.1 kept
    con.execute("INSERT INTO reo VALUES (DATE '2020-01-01', 0.5)")
    refresh_views(con, tmp_path / "wh")
    kinds = dict(con.sql("SELECT table_name, table_type FROM information_schema.tables").fetchall())
    assert kinds["reo"] == "VIEW" and con.sql('SELECT count(*) FROM "reo"').fetchall() == [(0,)]
    con.close()


def test_suites_name_only_declared_columns_and_the_declared_key():
    frames = _frames()
    totals = frames["group_counts"].group_by("traffic", "arm").agg(pl.col("n").sum())  # one attribute
    checked = output_check_frames(frames, totals)  # the frames the gate validates, as the flow derives them
    for name, t in TABLES.items():
        spec = load_spec(name)
        named: set[str] = set()
        for e in spec["expectations"]:
            kw = e["kwargs"]
            named |= {kw[k] for k in ("column", "column_A", "column_B") if k in kw}
            named |= set(kw.get("column_list", []))
            if e["type"] == "ExpectCompoundColumnsToBeUnique":
                assert tuple(kw["column_list"]) == t.key, name
        assert named <= set(checked[name].columns), (name, named - set(checked[name].columns))


def test_identifiers_outside_the_pattern_are_refused():
    with pytest.raises(ValueError, match="identifier"):
        ddl.ident('reo"; DROP TABLE runs; --')
    with pytest.raises(ValueError, match="identifier"):
        Table("bad table", "", "", ("ds",), (Column("ds", pl.Date, "", ""),), "x")
    with pytest.raises(ValueError, match="first column"):
        Table("t", "", "", ("n",), (Column("n", pl.Int64, "", ""),), "x")
    assert ddl.ident("group") == '"group"'


def test_docs_tables_md_is_generated_from_the_registry():
    text = (REPO / "docs" / "tables.md").read_text()
    assert text == ddl.tables_markdown(), "docs/tables.md is stale: run `make docs`"
    for t in TABLES.values():
        for c in t.stored_columns:
            assert f"| `{c.name}` |" in text
            assert c.unit and c.meaning, (t.name, c.name)


def test_clean_tmp_skips_a_file_a_concurrent_writer_renames_away(tmp_path, monkeypatch):
    """Days published at once (``--concurrency``): one day's clean_tmp lists
    _tmp while another day renames its file from there into its partition. The
    vanished file is skipped (it failed the day with FileNotFoundError); old
    leftovers are still removed and a fresh file is kept."""
    import os
    import time

    tmp = tmp_path / "_tmp"
    tmp.mkdir()
    old, fresh, gone = tmp / "old.parquet", tmp / "fresh.parquet", tmp / "gone.parquet"
    for f in (old, fresh):
        f.write_bytes(b"x")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    listed = [gone, old, fresh]  # gone: listed, then renamed into place by another day
    monkeypatch.setattr(Path, "iterdir", lambda self: iter(listed) if self == tmp else iter(()))
    clean_tmp(tmp_path)
    assert not old.exists() and fresh.exists()
