"""A warehouse's owner and a project's config history (issue 40 items 3 and 4).

A warehouse records the project that owns it and refuses another config
(exit 2, naming the owner) unless that config declares the same project; a
view over a table whose partitions went reads as no rows, not an error; an
attribute, a user attribute or intersections added to an existing project
run on the same DuckDB file; a config change that alters a day's outputs
makes the day stale, and the re-run takes the removed table's partition out
of the published views."""

from __future__ import annotations

import datetime as dt
import json

import duckdb
import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from fairmon.pipelines.core.config import load_config
from fairmon.pipelines.faces.cli import app
from fairmon.pipelines.orchestration.ops import days_to_run, detect_stale
from fairmon.pipelines.orchestration.staleness import config_change
from fairmon.pipelines.simulation.simulated import write_simulation
from fairmon.pipelines.storage import ddl
from fairmon.pipelines.storage.ownership import MARKER, WarehouseOwnedError, claim_warehouse, read_owner
from fairmon.pipelines.storage.warehouse import partition_path, read_table, refresh_views
from fairmon.transforms.registry import table
from fairmon.transforms.simulators.impressions import SimulationSpec

D0 = dt.date(2026, 3, 1)
D1 = dt.date(2026, 3, 2)


def _cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


# --- item 3: ownership -------------------------------------------------------------------


def test_the_first_config_owns_the_warehouse_and_others_must_declare_its_project(tmp_path):
    wh = tmp_path / "proj" / "wh"
    a, b = tmp_path / "proj" / "a.toml", tmp_path / "proj" / "b.toml"
    record = claim_warehouse(wh, "proj", False, a)
    assert record == {"project": "proj", "config": "../a.toml"}
    assert json.loads((wh / MARKER).read_text()) == record  # written at the warehouse's root
    assert not [p for p in wh.iterdir() if p.name != MARKER]  # nothing left aside
    assert claim_warehouse(wh, "renamed", True, a) == record  # the owner's own config, whatever it declares
    with pytest.raises(WarehouseOwnedError) as e:  # same folder, so same default name: not declared, refused
        claim_warehouse(wh, "proj", False, b)
    assert "'proj'" in str(e.value) and "../a.toml" in str(e.value) and 'name = "proj"' in str(e.value)
    with pytest.raises(WarehouseOwnedError, match="belongs to project 'proj'"):
        claim_warehouse(wh, "other", True, b)
    assert claim_warehouse(wh, "proj", True, b) == record  # declares the owner's project: accepted
    assert claim_warehouse(wh, "proj", False, None) == record  # a config built in code, same project name
    with pytest.raises(WarehouseOwnedError):
        claim_warehouse(wh, "other", False, None)


def test_a_warehouse_first_claimed_in_code_takes_the_first_config_file_of_its_project(tmp_path):
    wh = tmp_path / "proj" / "wh"
    assert claim_warehouse(wh, "proj", False, None) == {"project": "proj", "config": None}
    with pytest.raises(WarehouseOwnedError):
        claim_warehouse(wh, "other", False, tmp_path / "proj" / "x.toml")
    assert claim_warehouse(wh, "proj", False, tmp_path / "proj" / "a.toml")["config"] == "../a.toml"
    with pytest.raises(WarehouseOwnedError):  # from then on the owner's config is a.toml
        claim_warehouse(wh, "proj", False, tmp_path / "proj" / "b.toml")


def test_a_moved_project_keeps_its_owner_and_a_foreign_record_is_named(tmp_path):
    claim_warehouse(tmp_path / "p1" / "wh", "p1", False, tmp_path / "p1" / "f.toml")
    (tmp_path / "p1").rename(tmp_path / "p2")  # the folder moved whole: the config is where it was, relatively
    assert claim_warehouse(tmp_path / "p2" / "wh", "p2", False, tmp_path / "p2" / "f.toml")["project"] == "p1"
    (tmp_path / "p2" / "wh" / MARKER).write_text("[1, 2]")
    with pytest.raises(WarehouseOwnedError, match=MARKER):
        read_owner(tmp_path / "p2" / "wh")


def test_project_name_defaults_to_the_config_folder_and_rejects_control_characters(tmp_path):
    sim = write_simulation(SimulationSpec(start=D0, days=1, rows_per_day=10, random_rows_per_day=10), tmp_path / "s")
    cfg = load_config(sim["config"])
    assert (cfg.project_name, cfg.project.name) == ("s", None)
    text = sim["config"].read_text()
    sim["config"].write_text(text + '\n[project]\nname = "a\\nb"\n')
    r = _cli("run", "-c", sim["config"], "--date", D0, "--no-prefect")
    assert r.exit_code == 2 and "project.name" in r.output


def test_a_view_whose_partitions_went_reads_as_no_rows_of_the_declared_columns(tmp_path):
    wh = tmp_path / "wh"
    t = table("reo_ab")
    part = partition_path(wh, "reo_ab", D0)
    part.parent.mkdir(parents=True)
    pl.DataFrame({"attribute": ["g"], "run_id": ["r1"]}).write_parquet(part)  # a partial file: two columns
    con = duckdb.connect(str(tmp_path / "f.duckdb"))
    try:
        refresh_views(con, wh)
        assert con.sql("SELECT attribute, run_id, ds FROM reo_ab").fetchall() == [("g", "r1", D0)]
        part.unlink()  # e.g. another config of the project no longer writes reo_ab
        got = con.sql("SELECT * FROM reo_ab")
        assert got.fetchall() == [] and got.columns == [c.name for c in t.stored_columns]
        assert con.execute("SELECT count(*) FROM reo_ab_published").fetchone() == (0,)
    finally:
        con.close()


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_a_second_config_on_the_warehouse_is_refused_with_exit_2_unless_it_declares_the_project(tmp_path):
    spec = SimulationSpec(start=D0, days=1, rows_per_day=2000, random_rows_per_day=1500, seed=3)
    cfg = write_simulation(spec, tmp_path / "sim", "csv")["config"]
    assert _cli("run", "-c", cfg, "--date", D0, "--no-prefect").exit_code == 0
    other = cfg.with_name("other.toml")
    other.write_text(cfg.read_text().replace('duckdb = "fairmon.duckdb"', 'duckdb = "other.duckdb"'))
    r = _cli("run", "-c", other, "--date", D0, "--no-prefect")
    assert r.exit_code == 2, r.output
    assert "belongs to project 'sim'" in r.output and "../fairmon.toml" in r.output
    assert not (tmp_path / "sim" / "other.duckdb").exists() or _runs(tmp_path / "sim" / "other.duckdb") == 0
    other.write_text(other.read_text() + '\n[project]\nname = "sim"\n')
    assert _cli("run", "-c", other, "--date", D0, "--no-prefect").exit_code == 0


@pytest.mark.slow  # runs a day in process twice
def test_a_second_project_on_the_duckdb_file_is_refused_with_exit_2(tmp_path):
    """Two configs sharing one DuckDB file with their own warehouses: the second run is refused (exit 2) naming
    the owner, and the first project's published day stays published (its runs are read from that file)."""
    spec = SimulationSpec(start=D0, days=1, rows_per_day=2000, random_rows_per_day=1500, seed=3)
    cfg = write_simulation(spec, tmp_path / "sim", "csv")["config"]
    assert _cli("run", "-c", cfg, "--date", D0, "--no-prefect").exit_code == 0
    other = cfg.with_name("other.toml")
    other.write_text(cfg.read_text().replace('warehouse = "warehouse"', 'warehouse = "other-warehouse"'))
    r = _cli("run", "-c", other, "--date", D0, "--no-prefect")
    assert r.exit_code == 2 and "serves the warehouse warehouse" in r.output and "project 'sim'" in r.output, r.output
    assert not (tmp_path / "sim" / "other-warehouse" / "reo").exists()
    from fairmon.api.published import read_table

    assert read_table(str(cfg), "reo").height == 1


def _runs(path) -> int:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return (
            con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'runs'").fetchone()[0]
            and (con.execute("SELECT count(*) FROM runs").fetchone()[0])
        )
    finally:
        con.close()


# --- item 4: config history ---------------------------------------------------------------


def test_output_fingerprints_change_with_the_sections_that_shape_outputs_only(tmp_path):
    sim = write_simulation(SimulationSpec(start=D0, days=1, rows_per_day=10, random_rows_per_day=10), tmp_path / "s")
    base = load_config(sim["config"])
    fp = base.output_fingerprints()
    assert base.model_copy(update={"warehouse": tmp_path / "elsewhere"}).output_fingerprints() == fp
    sched = base.schedule.model_copy(update={"cron": "0 7 * * *"})
    assert base.model_copy(update={"schedule": sched}).output_fingerprints() == fp
    est = base.estimation.model_copy(update={"confidence_level": 0.9})
    changed = base.model_copy(update={"estimation": est}).output_fingerprints()
    assert {k for k in fp if fp[k] != changed[k]} == {"estimation"}


def test_config_change_names_the_changed_sections_and_ignores_runs_without_hashes():
    now = {"ab": "1", "estimation": "2", "envy": "3"}
    assert config_change(json.dumps({"outputs_fp": now}), now) is None
    before = {"ab": "0", "estimation": "2"}  # [ab] changed, [envy] is new to the config
    assert config_change(json.dumps({"outputs_fp": before}), now) == "config [ab], [envy]"
    assert config_change(json.dumps({"ds": "2026-03-01"}), now) is None  # an earlier fairmon's run: unknown
    assert config_change(None, now) is None


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_removing_ab_makes_the_days_stale_and_their_rerun_unpublishes_reo_ab(tmp_path):
    arms = {"control": {}, "boost": {0: 1.3}}
    spec = SimulationSpec(start=D0, days=2, rows_per_day=2000, random_rows_per_day=1500, arms=arms, seed=4)
    cfg = write_simulation(spec, tmp_path / "sim", "csv")["config"]
    r = _cli("backfill", "-c", cfg, "--start", D0, "--end", D1, "--no-prefect")
    assert r.exit_code == 0, r.output
    wh = tmp_path / "sim" / "warehouse"
    assert read_table(wh, "reo_ab").height > 0
    assert detect_stale(load_config(cfg)).height == 0  # same config, same files: nothing stale
    text = cfg.read_text()
    cfg.write_text(text[: text.index("[ab]")])  # [ab] removed
    found = detect_stale(load_config(cfg))
    assert sorted(found.get_column("ds").to_list()) == [D0, D1]
    assert set(found.get_column("file")) == {"config [ab]"}
    assert days_to_run(load_config(cfg), D0, D1, only_stale=True) == [D0, D1]
    r = _cli("backfill", "-c", cfg, "--start", D0, "--end", D1, "--only-stale", "--no-prefect")
    assert r.exit_code == 0, r.output
    assert not partition_path(wh, "reo_ab", D0).exists() and not partition_path(wh, "reo_ab", D1).exists()
    con = duckdb.connect(str(tmp_path / "sim" / "fairmon.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM reo_ab_published").fetchone() == (0,)
        assert con.execute("SELECT count(*) FROM reo_published").fetchone()[0] > 0
    finally:
        con.close()
    assert days_to_run(load_config(cfg), D0, D1, only_stale=True) == []  # re-run and published: no longer stale


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_attributes_user_attributes_and_intersections_added_to_a_project_keep_its_duckdb_file(tmp_path):
    root = tmp_path / "p"
    (root / "in").mkdir(parents=True)
    n = 1200
    rng = np.random.default_rng(8)
    pl.DataFrame(
        {
            "ds": [D0] * n,
            "traffic": ["default"] * 800 + ["random"] * 400,
            "arm": "all",
            "user_id": [f"u{i % 300}" for i in range(n)],
            "s1": (rng.random(n) < 0.4).astype(int),
            "grp": rng.choice(["a", "b"], n),
            "region": rng.choice(["n", "s"], n),
        }
    ).write_csv(root / "in" / f"{D0}.csv")
    text = (
        'warehouse = "wh"\nduckdb = "f.duckdb"\n[impressions]\nformat = "contract"\n'
        'path = "in/{ds}.csv"\nsignals = ["s1"]\nattributes = ATTRS\nrandom_window_days = 1\nMORE'
        "[quality]\nsufficiency_epsilon = 0.9\n"
    )
    steps = [
        ('["grp"]', ""),
        ('["grp", "region"]', ""),  # an attribute
        ('["grp", "region"]', 'intersections = [["grp", "region"]]\n'),  # intersections
        ('["grp", "region"]', 'intersections = [["grp", "region"]]\n[estimation]\nuser_attributes = ["region"]\n'),
    ]
    for attrs, more in steps:
        (root / "f.toml").write_text(text.replace("ATTRS", attrs).replace("MORE", more))
        r = _cli("run", "-c", root / "f.toml", "--date", D0, "--no-prefect")
        assert r.exit_code == 0, (attrs, more, r.output)
    gc = read_table(root / "wh", "group_counts").filter(pl.col("traffic") == "default")
    cells = gc.filter(pl.col("attribute") == "grp×region")
    assert sorted(cells.get_column("group").to_list()) == ["a×n", "a×s", "b×n", "b×s"]
    assert cells.get_column("n").sum() == 800  # every default row in exactly one cell
    assert read_table(root / "wh", "user_precision").filter(pl.col("attribute") == "region").height > 0
    con = duckdb.connect(str(root / "f.duckdb"), read_only=True)
    try:  # one DuckDB file all along: the run history holds every step
        assert con.execute("SELECT count(*) FROM runs WHERE status = 'published'").fetchone() == (len(steps),)
    finally:
        con.close()
    # each step changed [impressions] or [estimation]: the day was stale until its re-run published
    assert detect_stale(load_config(root / "f.toml")).height == 0
    assert ddl.ident("grp")  # the attribute names stay plain identifiers
