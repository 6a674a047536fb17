"""Days of a scores-only project (no [impressions]): a day without its own file, and a value the gate
refuses, each quarantine the day naming why (a helper trying the tool found the first published with exit 0
from other days' rows, the second a crash: AttributeError on the absent impressions section)."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

import fairmon
from fairmon.pipelines.faces.cli import app

D1, D2, D3 = (dt.date(2026, 2, 1) + dt.timedelta(days=i) for i in range(3))


def _scores_project(root, days, window_days=1):
    """Scores of model m1 for 400 items a day in two regions, contract CSV; the config's path."""
    (root / "scores").mkdir(parents=True)
    rng = np.random.default_rng(7)
    for ds in days:
        score = rng.random(400)
        pl.DataFrame(
            {
                "ds": str(ds),
                "model": "m1",
                "item_id": [f"{ds}-{i}" for i in range(400)],
                "score": score,
                "outcome": rng.random(400) < score,
                "region": np.where(np.arange(400) % 2 == 0, "north", "south"),
            }
        ).write_csv(root / "scores" / f"{ds}.csv")
    cfg = root / "fairmon.toml"
    cfg.write_text(
        'warehouse = "warehouse"\nduckdb = "fairmon.duckdb"\n[scores]\nformat = "contract"\n'
        f'path = "scores/{{ds}}.csv"\nattributes = ["region"]\nwindow_days = {window_days}\n'
        '[[scores.thresholds]]\nmodel = "m1"\nt = 0.5\nd = 0.2\n'
    )
    return cfg


def _backfill(cfg, a, b) -> dict:
    res = CliRunner().invoke(app, ["backfill", "-c", str(cfg), "--start", str(a), "--end", str(b), "--json"])
    return {d["ds"]: d for d in json.loads(res.stdout)["days"]}


@pytest.mark.parametrize("window_days", [1, 3])
def test_a_day_without_its_own_scores_file_is_quarantined_not_published_from_its_window(tmp_path, window_days):
    cfg = _scores_project(tmp_path, [D1, D3], window_days)
    why = f"no scores file for {D2}: scores/{D2}.csv does not exist ([scores] path = 'scores/{{ds}}.csv', "
    why += f"{{ds}} = {D2})"
    r = fairmon.run_day(cfg, D2)  # the pre-flight check
    assert r["status"] == "quarantined" and why in r["error"], r
    days = _backfill(cfg, D1, D3)  # a range: the pre-flight only warns, the day's run quarantines it
    assert [days[str(d)]["status"] for d in (D1, D2, D3)] == ["published", "quarantined", "published"]
    assert (
        f"at stage scores: reader on {tmp_path / 'scores' / f'{D2}.csv'}: day_file_present: {why}"
        in (days[str(D2)]["error"])
    )
    published = fairmon.read_table(cfg, "threshold_prevalence")
    assert sorted(set(published["ds"].to_list())) == [D1, D3]


def test_a_score_the_gate_refuses_quarantines_a_day_of_a_project_without_impressions(tmp_path):
    cfg = _scores_project(tmp_path, [D1])
    path = tmp_path / "scores" / f"{D1}.csv"
    lines = path.read_text().splitlines()
    cells = lines[8].split(",")
    cells[3] = "NaN"
    path.write_text("\n".join([*lines[:8], ",".join(cells), *lines[9:]]) + "\n")
    days = _backfill(cfg, D1, D1)
    assert days[str(D1)]["status"] == "quarantined", days
    assert "score_is_number (1 unexpected, rows 8: ['nan'])" in days[str(D1)]["error"]
    assert "AttributeError" not in days[str(D1)]["error"]
