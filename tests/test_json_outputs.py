"""Every ``--json`` output is strict JSON (issue 41 item 7): NaN and ±Infinity
are ``null``, never the bare tokens ``NaN``/``Infinity`` that ``json.loads``
accepts but other parsers reject. The commands are enumerated from the Typer
app, so a new command with ``--json`` fails here until it has a recipe."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from fairmon.pipelines.faces.cli import app
from fairmon.pipelines.simulation.simulated import write_simulation
from fairmon.transforms.simulators.impressions import SimulationSpec

SPEC = SimulationSpec(start=dt.date(2026, 3, 1), days=2, rows_per_day=3000, random_rows_per_day=1500, seed=11)


def _strict(text: str):
    """``json.loads`` that rejects NaN, Infinity and -Infinity."""

    def no_constant(token: str):
        raise ValueError(f"non-strict JSON token {token}")

    return json.loads(text, parse_constant=no_constant)


def json_commands() -> set[str]:
    """The names of the app's commands that take ``--json``."""
    cmd = typer.main.get_command(app)
    return {name for name, c in cmd.commands.items() if any("--json" in getattr(p, "opts", []) for p in c.params)}


def _project(tmp: Path) -> Path:
    paths = write_simulation(SPEC, tmp / "sim", "csv", pool_policy="overlap")
    return paths["config"]


#: One invocation per command with --json; ``{cfg}`` and ``{tmp}`` are filled in. The fast ones need no project.
FAST = {
    "sample-size": ["sample-size", "--alpha", "0.2", "--json"],
    "envy-plan": ["envy-plan", "--delta", "0.05", "--lambda", "0.2", "--gamma", "0.2", "--json"],
    # one group never recommended (P = 0): thm_e1's volume is infinite and eq. 13 undefined
    "plan": ["plan", "--P", "0.0,0.05", "--Q", "0.1,0.25", "--n-rec", "1000", "--rand-per-day", "100", "--json"],
}
PROJECT = {
    "run": ["run", "-c", "{cfg}", "--date", "2026-03-01", "--no-prefect", "--json"],
    "backfill": ["backfill", "-c", "{cfg}", "--start", "2026-03-01", "--end", "2026-03-02", "--no-prefect", "--json"],
    "alerts": ["alerts", "-c", "{cfg}", "--since", "2026-03-01", "--json"],
    "sql": ["sql", "-c", "{cfg}", "select 'NaN'::double as nan, 'Infinity'::double as inf, 1.5 as x", "--json"],
    "plan": ["plan", "-c", "{cfg}", "--json"],
    "train-snapshot": ["train-snapshot", "-o", "{tmp}/reach", "--json"],
}


def test_every_json_command_has_a_recipe():
    assert json_commands() == set(FAST) | set(PROJECT)


def test_planning_commands_print_strict_json():
    for name, argv in FAST.items():
        res = CliRunner().invoke(app, argv)
        assert res.exit_code == 0, (name, res.output)
        doc = _strict(res.stdout)
        if name == "plan":
            e1 = next(v for v in doc["volumes"] if v["method"] == "thm_e1")
            assert e1["n_rand"] is None  # 3 p⁻¹ ε⁻² ln(2/δ) with p = 0 is +inf: printed as null
            assert e1["rand_days"] is None


@pytest.mark.slow  # runs a project's days (GX, DuckDB) and trains the Coat snapshot
def test_project_commands_print_strict_json(tmp_path):
    cfg = _project(tmp_path)
    for name, argv in PROJECT.items():
        argv = [a.format(cfg=cfg, tmp=tmp_path) for a in argv]
        res = CliRunner().invoke(app, argv)
        assert res.exit_code == 0, (name, res.output)
        doc = _strict(res.stdout)
        if name == "sql":
            assert doc["rows"] == [{"nan": None, "inf": None, "x": 1.5}]
        if name in ("run", "backfill"):
            assert {d["status"] for d in doc["days"]} == {"published"}
