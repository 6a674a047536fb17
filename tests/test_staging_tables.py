"""Staging tables declared once, their SQL generated (pipelines/ingest/staging_tables.py):
the generated DDL gives the schema earlier versions made from their first staged
frame, so a DuckDB file staged by an earlier version needs no re-staging."""

import datetime as dt

import duckdb
import polars as pl
import pytest

from fairmon.pipelines.ingest import staging_tables as st
from fairmon.pipelines.storage import db
from fairmon.transforms.contract import normalize_impressions, normalize_labels, normalize_scores
from fairmon.transforms.intersections import add_intersections

D = dt.date(2026, 3, 1)


def _schema(con, table: str) -> list[tuple[str, str]]:
    return con.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position",
        [table],
    ).fetchall()


def _old_create(con, table: str, frame: pl.DataFrame) -> None:
    """What sql/<table>_create.sql did before the declarations: the schema of the first frame."""
    con.register("first", frame)
    con.execute(f'CREATE TABLE "{table}" AS SELECT * FROM first LIMIT 0')
    con.unregister("first")


def _impressions() -> pl.DataFrame:
    raw = pl.DataFrame(
        {
            "ds": [str(D)] * 3,
            "traffic": ["default", "random", "default"],
            "arm": ["all"] * 3,
            "like": ["1", "0", "1"],
            "young_adult": ["true", "false", None],
            "region": ["north", "south", "north"],
        }
    )
    staged = normalize_impressions(raw, file="f.csv", signals=["like"], attributes=["young_adult", "region"])
    return add_intersections(staged, [["young_adult", "region"]])


def test_generated_ddl_gives_the_schema_the_old_frame_copy_gave():
    frames = {
        "impressions": (_impressions(), ["young_adult", "region"], [["young_adult", "region"]]),
        "scores": (
            normalize_scores(
                pl.DataFrame(
                    {"ds": [str(D)], "model": ["m"], "item_id": ["i"], "score": ["0.5"], "outcome": ["1"]}
                ).with_columns(pl.lit("x").alias("race")),
                file="s.csv",
                attributes=["race"],
            ),
            ["race"],
            [],
        ),
        "labels": (
            normalize_labels(
                pl.DataFrame(
                    {
                        "ds": [str(D)],
                        "item_id": ["i"],
                        "labeler_id": ["l"],
                        "label": ["1"],
                        "gold_label": ["0"],
                        "g": ["a"],
                    }
                ),
                file="l.csv",
                attributes=["g"],
            ),
            ["g"],
            [],
        ),
    }
    for name, (frame, attrs, crossed) in frames.items():
        old, new = duckdb.connect(), duckdb.connect()
        _old_create(old, name, frame)
        table = st.staging_table(name)
        st.create(new, table, table.columns(attrs, crossed))
        assert _schema(new, name) == _schema(old, name), name
        assert st.table_columns(new, table) == frame.columns
    new = duckdb.connect()
    st.create(new, st.IMPRESSIONS, st.IMPRESSIONS.columns(["young_adult"], [["young_adult", "region"]]))
    assert _schema(new, "impressions")[-1] == ("attr__young_adult×region", "VARCHAR")


def test_create_leaves_an_older_table_as_it_is_and_units_are_replaced_by_identity():
    con = duckdb.connect()
    assert not st.exists(con, st.IMPRESSIONS)
    frame = _impressions().drop("attr__young_adult×region", "cbucket")  # an earlier version's layout
    _old_create(con, "impressions", frame)
    st.create(con, st.IMPRESSIONS, st.IMPRESSIONS.columns(["young_adult", "region"], [["young_adult", "region"]]))
    assert st.exists(con, st.IMPRESSIONS)
    assert st.table_columns(con, st.IMPRESSIONS) == frame.columns  # IF NOT EXISTS: nothing changed
    st.add_column(con, st.IMPRESSIONS, "cbucket", "INTEGER")
    assert ("cbucket", "INTEGER") in _schema(con, "impressions")
    for file in ("a.csv", "b.csv"):
        con.register("staged", _impressions().drop("attr__young_adult×region").with_columns(src_file=pl.lit(file)))
        st.insert(con, st.IMPRESSIONS)
        con.unregister("staged")
    st.delete_unit(con, st.IMPRESSIONS, "a.csv")
    assert con.execute("SELECT src_file, count(*) FROM impressions GROUP BY ALL").fetchall() == [("b.csv", 3)]
    # a value that looks like SQL is only a value
    st.delete_unit(con, st.IMPRESSIONS, "b.csv' OR 1=1 --")
    assert con.execute("SELECT count(*) FROM impressions").fetchall() == [(3,)]


def test_identifiers_come_only_from_checked_names():
    assert st.column_ident("attr__a×b") == '"attr__a×b"'
    for bad in ('x"; DROP TABLE impressions; --', "a b", "1a", "a××b"):
        with pytest.raises(ValueError, match="identifier"):
            st.column_ident(bad)
    with pytest.raises(ValueError, match="unknown staging table 'nope'"):
        st.staging_table("nope")
    assert st.insert_sql(st.ENVY_ROWS) == 'INSERT INTO "envy_rows" BY NAME SELECT * FROM "envy_staged"'
    assert st.delete_unit_sql(st.SCORES) == 'DELETE FROM "scores" WHERE "src_file" = $file'
    assert [c for c, _ in st.ENVY_ROWS.columns(["g"])] == [
        "ds",
        "src_file",
        "user_id",
        "donor_user_id",
        "donor_group",
        "attr__g",
        "n",
        "n_pos",
    ]


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_a_large_insert_runs_on_one_thread_keeps_the_rows_in_order_and_fills_whole_row_groups(tmp_path):
    """staging_tables.insert appends on one DuckDB thread (sql/settings_threads.sql):
    a batch of files' frames (one chunk each, as replace_units concatenates
    them) lands in the frame's row order in full row groups, 5 for 600,000
    rows (ceil(n / 122,880); two threads leave 6, one partly filled per
    chunk, which the checkpoint at close merges again); the database's
    thread count is back afterwards, also after an insert that failed inside
    its transaction (the transaction refuses every statement until it is
    rolled back: the restore comes after the rollback)."""
    part = 200_000
    files = [
        pl.select(
            ds=pl.lit(D),
            ds_start=pl.lit(D),
            traffic=pl.lit("default"),
            arm=pl.when(pl.int_range(part) % 3 == 0).then(pl.lit("a")).otherwise(pl.lit("b")),
            y=pl.int_range(part) % 2 == 0,
            attr__g=(pl.int_range(part) % 4096).cast(pl.String),
            cbucket=(pl.int_range(part) % 128).cast(pl.Int32),
            n=pl.int_range(part) + 1,
            src_file=pl.lit(f"f{k}"),
            src_row=part - pl.int_range(part),
        )
        for k in range(3)
    ]
    frame = pl.concat(files, rechunk=False)
    assert frame.n_chunks() == 3
    table = st.IMPRESSIONS
    path = tmp_path / "s.duckdb"
    con = duckdb.connect(str(path))
    con.execute("SET threads = 2")
    st.create(con, table, table.columns(["g"]))
    con.register(table.frame, frame)
    with st.one_thread(con), db.transaction(con):
        assert con.execute("SELECT current_setting('threads')").fetchone()[0] == 1
        st.insert(con, table)
    assert con.execute("SELECT current_setting('threads')").fetchone()[0] == 2
    groups = "SELECT count(DISTINCT row_group_id) FROM pragma_storage_info('impressions')"
    assert con.execute(groups).fetchone()[0] == 5  # as written, before any checkpoint
    con.execute("SET threads = 2")
    con.register(table.frame, frame.with_columns(pl.lit("x").alias("cbucket")))  # not an integer: the insert fails
    with pytest.raises(duckdb.ConversionException), st.one_thread(con), db.transaction(con):
        st.insert(con, table)
    assert con.execute("SELECT current_setting('threads')").fetchone()[0] == 2
    assert con.execute("SELECT count(*) FROM impressions").fetchone()[0] == 3 * part  # rolled back
    con.close()
    con = duckdb.connect(str(path))
    got = con.sql("SELECT * FROM impressions ORDER BY rowid").pl()
    assert got.equals(frame.select(got.columns)) and got.get_column("src_row").head(2).to_list() == [part, part - 1]
    assert con.execute(groups).fetchone()[0] == 5
    con.close()
