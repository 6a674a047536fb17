"""The CLI's own output at 80 columns: no number cut, each day's REO on
screen from ``backfill`` itself, a reason that many rows share said once."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import polars as pl
import pytest
from rich.console import Console
from typer.testing import CliRunner

from fairmon.pipelines.faces.cli import app
from fairmon.pipelines.faces.daylines import day_lines, print_day
from fairmon.pipelines.faces.fitting import Fit, Footnotes
from fairmon.pipelines.faces.views import LOOK_AHEAD_NOTE, day_warnings, reo_table
from fairmon.pipelines.simulation.simulated import write_simulation
from fairmon.pipelines.storage.warehouse import read_table
from fairmon.transforms.simulators.impressions import SimulationSpec

SPEC = SimulationSpec(start=dt.date(2026, 3, 1), days=3, rows_per_day=4000, random_rows_per_day=2000, seed=5)
NARROW = {"COLUMNS": "80"}


def _reo_row(ds: dt.date, arm: str, reo: float, **more) -> dict:
    row = {
        "ds": ds, "arm": arm, "attribute": "young_adult", "reo": reo, "reo_bc": reo - 0.0123,
        "ci_low": reo - 0.0712, "ci_high": reo + 0.0834, "parity_p_value": 0.0291, "n_rec": 50000,
        "n_rand": 6000, "reo_threshold": 1 / 9, "K": 2, "verdict_80pct": "inconclusive", "level": 0.95,
    }  # fmt: skip
    return {**row, **more}


def _text(renderable, width: int = 80) -> str:
    console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(renderable)
    return console.export_text()


def test_reo_table_at_80_columns_cuts_no_number_and_says_a_shared_reason_once():
    days = [dt.date(2026, 1, 1) + dt.timedelta(days=i) for i in range(5)]
    rows = [_reo_row(d, "deboost_1.25", 0.1 + 0.01 * i, look_ahead=i < 4) for i, d in enumerate(days)]
    rows[2]["reason"] = "n_rand below min_rows_random for group 0"
    truth = {(str(r["ds"]), r["arm"], r["attribute"]): r["reo"] + 0.00051 for r in rows}
    text = _text(Fit(reo_table(rows, "Daily REO", truth)))
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    for r in rows:  # every number whole, each on the row of its day
        day_lines = [line for line in text.splitlines() if str(r["ds"]) in line]
        for number in (f"{r['reo']:.4f}", f"[{r['ci_low']:.4f}, {r['ci_high']:.4f}]", "50000 / 6000", "0.029"):
            assert sum(number in line for line in day_lines) == 1, (number, text)
        assert f"{truth[(str(r['ds']), r['arm'], r['attribute'])]:.4f}" in text
    assert text.count(LOOK_AHEAD_NOTE) == 1 and f"[1] {LOOK_AHEAD_NOTE}" in text
    assert text.count("[2] n_rand below min_rows_random for group 0") == 1
    assert text.count("inconclusive [1]") == 3 and "inconclusive [2] [1]" in text
    assert "(continued)" in text  # the columns that did not fit beside the keys: a second table


def test_fit_leaves_a_table_that_fits_whole():
    rows = [_reo_row(dt.date(2026, 1, 1), "all", 0.2)]
    assert "(continued)" not in _text(Fit(reo_table(rows, "REO")), width=200)


def test_day_lines_say_status_reo_interval_verdict_and_footnote_once():
    ds = dt.date(2026, 1, 2)
    notes = Footnotes()
    result = {"ds": ds, "status": "published", "reo": [_reo_row(ds, "control", 0.143, look_ahead=True)]}
    head, lines = day_lines(result, notes)
    assert head == "2026-01-02 [green]published[/green]"
    assert lines == ["control/young_adult  REO 0.143 [0.072, 0.226]  [yellow]inconclusive[/] [1]"]
    first, second = _text_of_days([result, {**result, "ds": ds + dt.timedelta(days=1)}])
    assert first.splitlines() == [
        "2026-01-02 published  control/young_adult  REO 0.143 [0.072, 0.226]  inconclusive [1]",
        f"  [1] {LOOK_AHEAD_NOTE}",
    ]
    assert second.splitlines() == [
        "2026-01-03 published  control/young_adult  REO 0.143 [0.072, 0.226]  inconclusive [1]"
    ]
    failed = {"ds": ds, "status": "quarantined", "error": "gate impressions_day: ds_matches\nmore"}
    assert day_lines(failed, notes) == ("2026-01-02 [yellow]quarantined[/yellow]: gate impressions_day: ds_matches", [])


def _text_of_days(results: list[dict], width: int = 120) -> list[str]:
    notes, out = Footnotes(), []
    for r in results:
        console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
        print_day(console, r, notes)
        out.append(console.export_text())
    return out


def test_day_lines_go_under_their_day_when_they_do_not_fit():
    ds = dt.date(2026, 1, 2)
    result = {"ds": ds, "status": "published", "reo": [_reo_row(ds, "deboost_1.25_long_arm_name", 0.143)]}
    (text,) = _text_of_days([result], width=80)
    assert text.splitlines() == [
        "2026-01-02 published",
        "  deboost_1.25_long_arm_name/young_adult  REO 0.143 [0.072, 0.226]  inconclusive",
    ]


def _printed(reo: pl.DataFrame) -> list[str]:
    """The ``reo`` rows as a day line prints them: arm/attribute, REO and interval to 3 decimals, verdict."""
    return [
        f"{r['arm']}/{r['attribute']}  REO {r['reo']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]  {r['verdict_80pct']}"
        for r in reo.sort("ds", "arm", "attribute").iter_rows(named=True)
    ]


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_backfill_prints_each_days_reo_at_80_columns(tmp_path):
    paths = write_simulation(SPEC, tmp_path / "sim", "csv", pool_policy="overlap")
    days = ["--start", "2026-03-01", "--end", "2026-03-03"]
    res = CliRunner().invoke(app, ["backfill", "-c", str(paths["config"]), *days, "--no-prefect"], env=NARROW)
    assert res.exit_code == 0, res.output
    out = res.output
    assert "…" not in out and max(len(line) for line in out.splitlines()) <= 80, out
    reo = read_table(paths["config"].parent / "warehouse", "reo")
    assert reo.height == 3
    for line in _printed(reo):  # what the warehouse holds, as printed
        assert out.count(line) == 1, (line, out)
    for r in reo.iter_rows(named=True):  # beside the day's status, or under it when the line is too wide
        assert f"{r['ds']} published" in out
    ahead = reo.filter(pl.col("look_ahead"))
    assert ahead.height >= 2  # the 7-day pools reach past the first days: the same reason on several days
    assert out.count(LOOK_AHEAD_NOTE) == 1 and f"[1] {LOOK_AHEAD_NOTE}" in out
    assert out.count(f"{ahead.row(0, named=True)['verdict_80pct']} [1]") >= ahead.height - 1
    assert "Run summary" in out


def _contract_log(folder, days: list[dt.date], seed: int = 1) -> None:
    """A user's own log in the contract layout: per day default rows (two arms) and random rows,
    group B clicked more often than group A in default traffic than in random traffic."""
    rng = np.random.default_rng(seed)
    (folder / "logs").mkdir(parents=True)
    for ds in days:
        parts = []
        for traffic, arm, n, rates in (
            ("default", "control", 3000, (0.20, 0.32)), ("default", "treatment", 3000, (0.22, 0.28)),
            ("random", None, 2000, (0.20, 0.24)),
        ):  # fmt: skip
            group = rng.integers(0, 2, n)
            click = rng.random(n) < np.where(group == 0, rates[0], rates[1])
            parts.append(
                pl.DataFrame(
                    {
                        "ds": [ds] * n,
                        "traffic": [traffic] * n,
                        "arm": [arm] * n,
                        "click": click,
                        "creator_group": np.where(group == 0, "A", "B"),
                    }  # fmt: skip
                )
            )
        pl.concat(parts).write_csv(folder / "logs" / f"{ds}.csv")  # the contract template reads logs/{ds}.csv


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_a_contract_log_reaches_its_first_reo_on_screen_from_backfill(tmp_path):
    days = [dt.date(2026, 4, 1), dt.date(2026, 4, 2)]
    _contract_log(tmp_path, days)
    runner = CliRunner()
    config = tmp_path / "fairmon.toml"
    assert runner.invoke(app, ["init", "--format", "contract", "-o", str(config)]).exit_code == 0
    res = runner.invoke(
        app, ["backfill", "-c", str(config), "--start", "2026-04-01", "--end", "2026-04-02", "--no-prefect"], env=NARROW
    )
    assert res.exit_code == 0, res.output
    assert "…" not in res.output
    reo = read_table(tmp_path / "warehouse", "reo")
    assert set(reo.get_column("arm")) == {"control", "treatment"} and reo.height == 4
    for line in _printed(reo):
        assert res.output.count(line) == 1, (line, res.output)


def test_a_days_warnings_carry_their_notes_three_cells_at_most():
    """The run summary's warning line says what to act on (a check's note), not only the check's name; a note of
    many cells shows three and counts the rest."""
    cells = [
        f"random traffic, arm all, g = {k}: n_pos {k} of n 100 (the window needs 9,000 random rows)" for k in "abcde"
    ]
    details = [
        {"name": "random_traffic_sufficient", "severity": "warning", "note": "; ".join(cells)},
        {"name": "group_has_positives", "severity": "warning"},
    ]
    result = {
        "dq": [
            {
                "suite": "impressions_day",
                "failed_warning": "random_traffic_sufficient, group_has_positives",
                "details": json.dumps(details),
            },
            {"suite": "reo", "failed_warning": "", "details": "[]"},
        ]
    }
    assert day_warnings(result) == [
        "impressions_day: random_traffic_sufficient (" + "; ".join(cells[:3]) + "; 2 more in dq_results), "
        "group_has_positives"
    ]


def test_the_prevalence_table_names_only_the_methods_used():
    """A group too small to estimate has no ci_method (None): the caption names the methods of the rows that have
    one, not "None" beside them (the demo's COMPAS part printed "CI method: None, robust_hc_normal")."""
    from rich.console import Console

    from fairmon.pipelines.faces.views import prevalence_table

    nan = float("nan")
    row = dict(model="m", attribute="race", t=5.0, d=0.5, n_window=40, prevalence_at_threshold=0.3, ci_low=0.2)
    row |= dict(
        ci_high=0.4, naive_window_mean=0.3, implied_cost_ratio=0.4, cost_ratio_ci_low=0.3, cost_ratio_ci_high=0.6
    )
    rows = [
        {**row, "group": "a", "ci_method": "robust_hc_normal"},
        {**row, "group": "b", "ci_method": None, "prevalence_at_threshold": nan, "reason": "too few rows"},
    ]
    console = Console(width=200, record=True)
    console.print(prevalence_table(rows, "prevalence"))
    text = console.export_text()
    assert "CI method: robust_hc_normal" in text and "None" not in text


def test_a_date_option_says_whether_it_is_malformed_or_no_day():
    """--end 2026-02-30 has the form YYYY-MM-DD but is no day: the refusal says so; 03/01/2026 has not the form."""
    from typer.testing import CliRunner

    from fairmon.pipelines.faces.cli import app

    no_day = CliRunner().invoke(app, ["backfill", "--start", "2026-02-01", "--end", "2026-02-30"])
    assert no_day.exit_code == 2 and "'2026-02-30' is no day of the calendar" in " ".join(no_day.output.split())
    malformed = CliRunner().invoke(app, ["run", "--date", "03/01/2026"])
    assert malformed.exit_code == 2 and "'03/01/2026' is not a date YYYY-MM-DD" in " ".join(malformed.output.split())


@pytest.mark.slow
def test_a_reader_that_stops_reading_cuts_the_output_not_the_run(tmp_path):
    """`fairmon backfill ... | head -1`: the reader closes the pipe after the first line, and the backfill still
    publishes every day and ends with its own code (0), saying nothing on stderr. Rich's default on a broken
    pipe ends the process with exit code 1 (fairmon's "quarantined") at the next line printed, cutting the
    run short; `fairmon tables | head -1`, whose only work is printing, ends 0 too."""
    import subprocess
    import sys

    sim = tmp_path / "sim"
    write_simulation(SPEC, sim, "csv")
    argv = ["backfill", "--start", "2026-03-01", "--end", "2026-03-03", "-c", str(sim / "fairmon.toml"), "--no-prefect"]
    for args, days in ((argv, 3), (["tables"], 3)):
        proc = subprocess.Popen(
            [sys.executable, "-m", "fairmon", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path
        )
        assert proc.stdout.readline()
        proc.stdout.close()  # as `head -1` does once it has its line
        stderr = proc.communicate(timeout=600)[1].decode()
        assert proc.returncode == 0, stderr[-2000:]
        assert "Error" not in stderr and "Traceback" not in stderr, stderr[-2000:]
        assert len(list((sim / "warehouse").glob("reo/ds=*"))) == days
