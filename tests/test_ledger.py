"""The privacy ledger of `fairmon audit-export` (DESIGN §4.6; seed 000 §5): one budget per
population of individuals, whichever model scored them and wherever the project folder lies."""

import datetime as dt
import shutil

import duckdb
import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from fairmon.pipelines.core.config import load_config
from fairmon.pipelines.faces.cli import app
from fairmon.pipelines.orchestration.flows import daily
from fairmon.pipelines.privacy.audit_release import BudgetExceeded, export_release
from fairmon.transforms.private.release import population_key

pytestmark = pytest.mark.usefixtures("prefect_harness")

DS = dt.date(2026, 1, 5)
CONFIG = """warehouse = "wh"
duckdb = "p.duckdb"
[scores]
path = "scores/{{ds}}.csv"
attributes = ["sex"]
window_days = 1
[[scores.thresholds]]
model = "m1"
t = 5
d = 3
[[scores.thresholds]]
model = "m2"
t = 5
d = 3
[audit]
total_epsilon = 1.0
alpha = 0.3
score_values = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
groups = {{ sex = ["F", "M"] }}
"""


def _project(folder) -> None:
    """Two models scoring the same 400 people on one day (contract scores, DESIGN §2)."""
    rng = np.random.default_rng(0)
    n = 400
    people = pl.DataFrame(
        {
            "item_id": [f"p{i}" for i in range(n)],
            "sex": rng.choice(["F", "M"], n),
            "outcome": rng.random(n) < 0.5,
        }
    )
    rows = pl.concat(
        [
            people.with_columns(pl.lit(m).alias("model"), pl.Series("score", rng.integers(1, 11, n)))
            for m in ("m1", "m2")
        ]
    ).with_columns(pl.lit(DS).alias("ds"))
    (folder / "scores").mkdir(parents=True)
    rows.select("ds", "model", "item_id", "score", "outcome", "sex").write_csv(folder / "scores" / f"{DS}.csv")
    (folder / "fairmon.toml").write_text(CONFIG.format())
    daily(str(folder / "fairmon.toml"), DS)


def _export(folder, model: str, epsilon: float):
    return CliRunner().invoke(
        app,
        ["audit-export", "-c", str(folder / "fairmon.toml"), "--date", str(DS), "--attribute", "sex",
         "--model", model, "--epsilon", str(epsilon)],
        env={"COLUMNS": "1000"},  # a message on one line, however long its temporary folder's path
    )  # fmt: skip


def _ledger(folder) -> list[tuple]:
    """The ledger's (dataset, ε) rows; none before a first release made the table."""
    with duckdb.connect(str(folder / "p.duckdb"), read_only=True) as con:
        try:
            return con.sql("SELECT dataset, epsilon FROM privacy_ledger ORDER BY released_at, release_id").fetchall()
        except duckdb.CatalogException:
            return []


def test_two_models_on_the_same_people_share_one_budget(tmp_path):
    """m1 spends 0.6; m2 scores the same 400 people: 0.6 more would make 1.2 of 1.0,
    refused (exit 3, nothing recorded); 0.4 fits. The key names neither model nor path."""
    _project(tmp_path)
    first = _export(tmp_path, "m1", 0.6)
    assert first.exit_code == 0, first.output
    second = _export(tmp_path, "m2", 0.6)
    assert second.exit_code == 3 and "refused" in second.output, second.output
    assert "400 individuals" in second.output and "0.6 of 1" in second.output
    key = population_key(f"p{i}" for i in range(400))
    assert _ledger(tmp_path) == [(key, 0.3), (key, 0.3)]  # noisy sizes: ε/2 bins + ε/2 sizes
    cfg = load_config(tmp_path / "fairmon.toml")
    r = export_release(cfg, DS, "sex", "m2", 0.4)
    assert r["budget_spent"] == pytest.approx(1.0) and r["platform_only"]["ledger_key"] == key
    assert "dataset" not in r and str(tmp_path) not in str({k: v for k, v in r.items() if k != "platform_only"})


def test_moving_the_project_folder_keeps_the_budget(tmp_path):
    """A release, then the whole folder moved (a new absolute path): the next release
    about the same people is refused (exit 3)."""
    old, new = tmp_path / "old", tmp_path / "moved" / "here"
    old.mkdir()
    _project(old)
    assert _export(old, "m1", 0.6).exit_code == 0
    new.parent.mkdir()
    shutil.move(old, new)
    res = _export(new, "m1", 0.6)
    assert res.exit_code == 3 and "refused" in res.output, res.output
    assert [e for _, e in _ledger(new)] == [0.3, 0.3]


def test_an_old_path_keyed_ledger_still_counts(tmp_path):
    """Rows of the former `path#model` keys cannot be matched to individuals: they count in
    full against every release (conservative), and the refusal says so."""
    _project(tmp_path)
    with duckdb.connect(str(tmp_path / "p.duckdb")) as con:
        con.execute(
            "CREATE TABLE privacy_ledger (dataset VARCHAR, release_id VARCHAR PRIMARY KEY, epsilon DOUBLE, "
            "released_at TIMESTAMP, description VARCHAR)"
        )
        con.execute("INSERT INTO privacy_ledger VALUES ('/old/place/scores/{ds}.csv#m1', 'r0:bins', 0.7, now(), 'x')")
    cfg = load_config(tmp_path / "fairmon.toml")
    with pytest.raises(BudgetExceeded, match=r"0\.7 from 1 ledger row\(s\) keyed by path#model"):
        export_release(cfg, DS, "sex", "m2", 0.6)
    r = export_release(cfg, DS, "sex", "m2", 0.3)
    assert r["budget_spent"] == pytest.approx(1.0)


def test_deleting_the_duckdb_file_resets_nothing(tmp_path):
    """Spend 0.6 of 1.0, delete the DuckDB file, re-run the day, spend 0.6 again: refused (exit 3). The
    ledger's record is the warehouse's files (pipelines/storage/ledger_store.py); DuckDB is rebuilt from them."""
    _project(tmp_path)
    assert _export(tmp_path, "m1", 0.6).exit_code == 0
    assert sorted(p.parent.name for p in (tmp_path / "wh" / "_ledger").rglob("*.parquet")) == ["members", "releases"]
    (tmp_path / "p.duckdb").unlink()
    daily(str(tmp_path / "fairmon.toml"), DS)  # the day again, into a new DuckDB file
    res = _export(tmp_path, "m1", 0.6)
    assert res.exit_code == 3 and "have spent up to ε = 0.6 of 1" in res.output, res.output
    assert _export(tmp_path, "m1", 0.4).exit_code == 0
    assert [e for _, e in _ledger(tmp_path)] == [0.3, 0.3, 0.2, 0.2]  # rebuilt from the files, then the new one


def test_a_duckdb_ledger_the_files_lack_refuses(tmp_path):
    """The warehouse's ledger files lost (a release recorded in DuckDB only): the ledgers disagree, and the
    release is refused (exit 3) naming the folder, rather than trusting the smaller record."""
    _project(tmp_path)
    assert _export(tmp_path, "m1", 0.3).exit_code == 0
    assert _export(tmp_path, "m1", 0.2).exit_code == 0
    first = sorted((tmp_path / "wh" / "_ledger" / "releases").glob("*.parquet"))[0]
    first.unlink()
    res = _export(tmp_path, "m1", 0.1)
    assert res.exit_code == 3 and "_ledger lacks" in res.output, res.output


def test_a_ledger_from_before_the_files_is_written_out_once(tmp_path):
    """A project whose ledger lives in DuckDB only (an earlier fairmon): its releases go to the files at the
    next release, which still counts them."""
    _project(tmp_path)
    assert _export(tmp_path, "m1", 0.6).exit_code == 0
    shutil.rmtree(tmp_path / "wh" / "_ledger")
    res = _export(tmp_path, "m1", 0.6)
    assert res.exit_code == 3, res.output
    assert len(list((tmp_path / "wh" / "_ledger" / "releases").glob("*.parquet"))) == 1
    (tmp_path / "p.duckdb").unlink()
    daily(str(tmp_path / "fairmon.toml"), DS)
    assert _export(tmp_path, "m1", 0.6).exit_code == 3


def test_a_second_release_of_the_day_gets_its_own_file_and_an_existing_file_is_never_replaced(tmp_path):
    """Two releases of m1 by sex on DS went to releases/m1_sex_<ds>.json, the second replacing the first's
    noisy numbers (both ε spent). Each now has its own file; an --out that exists is refused before any ε."""
    import json

    _project(tmp_path)
    assert _export(tmp_path, "m1", 0.2).exit_code == 0 and _export(tmp_path, "m1", 0.2).exit_code == 0
    files = sorted((tmp_path / "releases").glob(f"m1_sex_{DS}_*.json"))
    ids = {json.loads(f.read_text())["release_id"] for f in files}
    assert len(files) == 2 and len(ids) == 2 and all(f.stem.endswith(i[:12]) for f, i in zip(files, sorted(ids)))
    spent = _ledger(tmp_path)
    res = CliRunner().invoke(
        app,
        ["audit-export", "-c", str(tmp_path / "fairmon.toml"), "--date", str(DS), "--attribute", "sex",
         "--model", "m1", "--epsilon", "0.2", "--out", str(files[0])],
        env={"COLUMNS": "1000"},
    )  # fmt: skip
    assert (
        res.exit_code == 2
        and "exists: a release is never written over a file" in res.output
        and "nothing was released" in res.output
    )
    assert _ledger(tmp_path) == spent and {json.loads(f.read_text())["release_id"] for f in files} == ids


def test_a_scores_file_changed_after_its_day_ran_is_not_released_from_its_old_rows(tmp_path):
    """The staged rows are the old file's: a release then spent ε on numbers that are no longer the data's."""
    _project(tmp_path)
    day = tmp_path / "scores" / f"{DS}.csv"
    day.write_text(day.read_text().replace(",M\n", ",F\n", 5))
    res = _export(tmp_path, "m1", 0.2)
    assert res.exit_code == 2 and f"{day} changed since it was staged" in res.output, res.output
    assert "no ε spent" in res.output and _ledger(tmp_path) == []
    daily(str(tmp_path / "fairmon.toml"), DS)  # the day run again stages the new file: released
    assert _export(tmp_path, "m1", 0.2).exit_code == 0 and len(_ledger(tmp_path)) == 2
