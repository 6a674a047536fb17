"""Input sources (pipelines/ingest/sources.py): one answer per input kind to
"which units make up day ds", with each unit's identity (path relative to the
config's folder) and fingerprint; what a run records, counts and stages all
come from it (DESIGN §2 "Input identity")."""

import datetime as dt
import hashlib
import shutil

import pytest

from fairmon.pipelines.core.config import load_config
from fairmon.pipelines.ingest import sources
from fairmon.pipelines.ingest.sources import current_files, day_files
from fairmon.pipelines.ingest.staging import units_for
from fairmon.transforms.contract import InputContractError

D = dt.date(2026, 3, 5)


def _project(root):
    """Impressions (tiktok: a default file a day, two random pools), a scores
    log over a 2-day window, and a model snapshot folder for day D."""
    for sub in ("default", "random", "scores", f"snap/{D}"):
        (root / sub).mkdir(parents=True)
    for i in range(3):
        d = D - dt.timedelta(days=i)
        (root / "default" / f"{d}.csv").write_text("arm,s1,grp\nall,1,a\n" * (i + 1))
        (root / "scores" / f"{d}.csv").write_text("ds,model,item_id,score,outcome,g\n")
    (root / "random" / f"random_{D - dt.timedelta(days=1)}_{D}.csv").write_text("s1,grp\n1,a\n")
    (root / "random" / f"random_{D - dt.timedelta(days=9)}_{D}.csv").write_text("s1,grp\n0,b\n")
    for name in ("users", "items", "ratings", "global"):
        (root / "snap" / str(D) / f"{name}.parquet").write_bytes(b"x" * 7)
    (root / "snap" / str(D) / "users.csv").write_text("user_id\n")  # beside users.parquet: also an input
    (root / "f.toml").write_text(
        'warehouse = "wh"\nduckdb = "f.duckdb"\n'
        '[impressions]\nformat = "tiktok"\npath = "default/{ds}.csv"\n'
        'random_path = "random/random_{start}_{end}.csv"\nsignals = ["s1"]\nattributes = ["grp"]\n'
        "random_window_days = 3\n"
        '[scores]\npath = "scores/{ds}.csv"\nattributes = ["g"]\nwindow_days = 2\n'
        'thresholds = [{model = "m", t = 0.5, d = 0.1}]\n'
        '[reach]\npath = "snap/{ds}"\nrating_min = 1\nrating_max = 5\n'
    )
    return load_config(root / "f.toml")


def test_each_input_kind_answers_which_units_make_up_a_day(tmp_path):
    cfg = _project(tmp_path)
    kinds = {k.source: k for k in sources.configured_inputs(cfg)}
    assert list(kinds) == ["impressions", "scores", "reach"]

    imp = kinds["impressions"].inputs(D)
    pool = f"random/random_{D - dt.timedelta(days=1)}_{D}.csv"  # contained in the 3-day window; the 10-day one is not
    assert [i.key for i in imp] == [f"default/{D}.csv", pool]
    assert [(i.unit.scope, i.unit.traffic) for i in imp] == [("nonrandom", "default"), ("random", "random")]
    day = (tmp_path / "default" / f"{D}.csv").read_bytes()
    sha1 = int.from_bytes(hashlib.sha1(day).digest()[:8], "big", signed=True)  # the first 8 bytes, a BIGINT
    assert (imp[0].size, imp[0].digest) == (len(day), sha1) and len(day) == 19  # header + one row

    prev = D - dt.timedelta(days=1)
    assert kinds["scores"].keys(D) == [f"scores/{prev}.csv", f"scores/{D}.csv"]
    assert current_files(cfg, "scores", D) == kinds["scores"].keys(D)
    assert [u.file for u in units_for(cfg, "scores", D)] == [u.file for u in kinds["scores"].units(D)]

    snap = [i.key for i in kinds["reach"].inputs(D)]
    assert snap == [f"snap/{D}/{n}" for n in ("users.parquet", "users.csv", "items.parquet")] + [
        f"snap/{D}/ratings.parquet",
        f"snap/{D}/global.parquet",
    ]
    # what the snapshot reader opens: one file per name, Parquet first
    assert {n: p.name for n, p in sources.snapshot_files(cfg, D).items()} == {
        "users": "users.parquet",
        "items": "items.parquet",
        "ratings": "ratings.parquet",
        "global": "global.parquet",
    }

    # the run record, the day's counted files: the same answer
    rows = sources.current_inputs(cfg, D)
    assert [(r["source"], r["file"]) for r in rows] == sorted(
        (k.source, i.key) for k in kinds.values() for i in k.inputs(D)
    )
    assert {r["file"]: r["size"] for r in rows}[f"snap/{D}/global.parquet"] == 7
    assert day_files(cfg, [D]).get_column("file").to_list() == kinds["impressions"].keys(D)


def test_identities_survive_moving_the_project_and_vanished_files_drop_out(tmp_path):
    cfg = _project(tmp_path / "a")
    before = sources.current_inputs(cfg, D)
    shutil.copytree(tmp_path / "a", tmp_path / "b")  # same content, new times: the same fingerprints
    assert sources.current_inputs(load_config(tmp_path / "b" / "f.toml"), D) == before

    (tmp_path / "a" / "default" / f"{D}.csv").unlink()
    assert f"default/{D}.csv" not in [r["file"] for r in sources.current_inputs(cfg, D)]
    assert len(sources.current_inputs(cfg, D)) == len(before) - 1


def test_an_input_that_cannot_serve_the_day_gives_no_inputs_but_its_units_raise(tmp_path):
    (tmp_path / "coat").mkdir()
    (tmp_path / "c.toml").write_text(
        'warehouse = "wh"\nduckdb = "c.duckdb"\n[impressions]\nformat = "coat"\npath = "coat"\nds = 2016-06-19\n'
        'signals = ["like"]\nattributes = ["gender"]\n'
    )
    cfg = load_config(tmp_path / "c.toml")
    kind = sources.input_of(cfg, "impressions")
    assert [i.key for i in kind.inputs(dt.date(2016, 6, 19))] == ["coat"]
    with pytest.raises(InputContractError, match="single day 2016-06-19"):
        kind.units(D)
    assert kind.inputs(D) == [] and sources.current_inputs(cfg, D) == []
    assert day_files(cfg, [D]).height == 0
    with pytest.raises(ValueError, match="unknown input 'nope'"):
        sources.input_of(cfg, "nope")
