"""The demo's explanations (issue 41 item 5), on hand-made inputs: the
daily intervals' hits against the truth beside the coverage over independent
pools, a private decision at α's edge, methods undefined for the data, no
printed column without a value, and progress that follows the run's log."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest
from rich.console import Console
from rich.table import Table

from fairmon.pipelines.faces import demo_notes
from fairmon.pipelines.faces.demo_notes import coverage_lines, dp_edge_note, undefined_methods_note
from fairmon.pipelines.faces.views import drop_empty_columns, following_log
from fairmon.transforms.reo.estimate import estimate_reo
from fairmon.transforms.simulators.coverage import independent_pool_coverage


def _row(ds: str, arm: str, lo: float, hi: float) -> dict:
    return dict(ds=ds, arm=arm, attribute="a", ci_low=lo, ci_high=hi, n_rec=20_000, n_rand=20_000, level=0.95)


def test_coverage_lines_count_hits_and_simulate_independent_pools(tmp_path, monkeypatch):
    # U = Q/P = (1, 1.25): true REO = std/mean = 0.125/1.125 = 1/9
    truth = tmp_path / "truth_groups.csv"
    lines = ["ds,arm,attribute,group,Q,P"]
    for ds in ("2026-01-01", "2026-01-02", "2026-01-03"):
        for arm in ("control", "t"):
            lines += [f"{ds},{arm},a,0,0.1,0.1", f"{ds},{arm},a,1,0.125,0.1"]
    truth.write_text("\n".join(lines) + "\n")
    rows = [
        _row("2026-01-01", "control", 0.10, 0.12),  # contains 1/9
        _row("2026-01-02", "control", 0.12, 0.15),  # misses
        _row("2026-01-03", "control", 0.05, 0.2),  # contains
        _row("2026-01-03", "t", 0.0, 0.1),  # misses
    ]
    monkeypatch.setattr(demo_notes, "COVERAGE_REPS", 40)
    out = coverage_lines(rows, truth)
    assert out[0] == "Intervals that contain the true REO: 2 of 3 days of the control arm, 2 of 4 day × arm rows."
    assert "reads the same 7-day random pools" in out[1] and "not the interval's coverage" in out[1]
    # 40 simulated days for each of the two arms, every interval defined
    assert out[2].startswith("Coverage over independent pools: ") and " of 80 simulated days (" in out[2]
    assert "control 20000 / 20000, t 20000 / 20000" in out[2]


def test_independent_pool_coverage_counts_what_estimate_reo_covers():
    Q, P = np.array([0.1, 0.125]), np.array([0.1, 0.1])
    covered, defined = independent_pool_coverage(Q, P, 20_000, 20_000, 30, np.random.default_rng(4))
    # the same draws by hand: multinomial counts, then estimate_reo's interval against 1/9
    rng = np.random.default_rng(4)
    a = rng.multinomial(20_000, [0.1, 0.125, 0.775], size=30)[:, :2]
    b = rng.multinomial(20_000, [0.1, 0.1, 0.8], size=30)[:, :2]
    hits = 0
    for i in range(30):
        e = estimate_reo(["0", "1"], a[i], 20_000, b[i], 20_000)
        hits += int(e.ci_low <= 1 / 9 <= e.ci_high)
    assert (covered, defined) == (hits, 30)
    with pytest.raises(ValueError):
        independent_pool_coverage(Q, P, 100, 100, 0, np.random.default_rng(0))
    with pytest.raises(ValueError):
        independent_pool_coverage([0.7, 0.6], P, 100, 100, 5, np.random.default_rng(0))


@pytest.mark.slow  # Monte Carlo
def test_independent_pool_coverage_is_near_nominal():
    covered, defined = independent_pool_coverage(
        [0.1, 0.125], [0.1, 0.1], 20_000, 20_000, 600, np.random.default_rng(9)
    )
    assert defined == 600
    assert abs(covered / 600 - 0.95) < 3 * np.sqrt(0.95 * 0.05 / 600)


def test_dp_edge_note_only_at_the_edge():
    rel = dict(fg_interval=[0.0, 0.309], alpha=0.3, decision="inconclusive")
    note = dp_edge_note(rel)
    assert note.startswith("α = 0.3 lies 0.009 from the upper edge of the FG interval [0.000, 0.309]")
    assert "can turn 'inconclusive' into 'fair'" in note
    assert dp_edge_note(dict(fg_interval=[0.0, 0.6], alpha=0.3, decision="inconclusive")) is None
    fair = dp_edge_note(dict(fg_interval=[0.05, 0.29], alpha=0.3, decision="fair"))
    assert "turn 'fair' into 'inconclusive'" in fair
    low = dp_edge_note(dict(fg_interval=[0.295, 0.7], alpha=0.3, decision="inconclusive"))
    assert "lower edge" in low and "into 'unfair'" in low


def test_undefined_methods_and_empty_columns_are_left_out():
    nan = float("nan")
    rows = [
        dict(method="delta", ci_low=-0.1, ci_high=0.1, reason=None),
        dict(method="delta_paper", ci_low=nan, ci_high=nan, reason="assumes independent rows"),
    ]
    assert undefined_methods_note(rows, {"delta_paper": "CI paper", "delta": "CI delta"}) == (
        "Not shown, undefined for these data: CI paper (delta_paper): assumes independent rows."
    )
    assert undefined_methods_note(rows[:1], {"delta": "CI delta"}) is None
    t = Table()
    for c in ("a", "CI paper", "b"):
        t.add_column(c)
    t.add_row("1", "[nan, nan]", "x")
    t.add_row("2", "-", "nan")
    assert [c.header for c in drop_empty_columns(t).columns] == ["a", "b"]
    console = Console(width=80, record=True)
    console.print(t)
    assert "CI paper" not in console.export_text()


def test_following_log_passes_info_lines_and_prints_nothing_new(caplog, monkeypatch):
    log = logging.getLogger("fairmon")
    # a logger as a library user has it (the CLI's stderr handler, if an earlier test added it, set aside)
    monkeypatch.setattr(log, "handlers", [])
    monkeypatch.setattr(log, "propagate", True)
    monkeypatch.setattr(log, "level", logging.NOTSET)
    seen: list[str] = []
    with caplog.at_level(logging.WARNING), following_log(True) as callbacks:
        callbacks.append(seen.append)
        log.info("reach %s: %d/%d users solved", "2016-06-19", 29, 290)
        log.warning("a warning")
    assert seen == ["reach 2016-06-19: 29/290 users solved", "a warning"]
    assert [r.getMessage() for r in caplog.records if r.name == "fairmon"] == ["a warning"]  # INFO not propagated
    assert log.propagate and not any(type(h).__name__ == "Follow" for h in log.handlers)


def _fake_parts(monkeypatch, tmp_path, status="published"):
    """The demo's six parts replaced by ones that only record that they ran; returns the record."""
    from fairmon.pipelines.faces import demo

    ran = []

    def fake(folder):
        def part(out, console):
            ran.append(folder)
            return out / folder, [{"status": status}], out / folder / "report.html"

        return part

    names = ("sim", "coat", "compas", "labels", "envy", "coat-reach")
    parts = [fake(n) for n in names]
    monkeypatch.setattr(demo, "DEFAULT_PARTS", tuple(parts[:3]))
    monkeypatch.setattr(demo, "FULL_PARTS", tuple(parts[3:]))
    return ran


@pytest.mark.parametrize("full", [False, True])
def test_demo_says_how_long_it_takes_and_full_adds_every_audit_family(tmp_path, monkeypatch, full):
    from fairmon.pipelines.faces.demo import run_demo

    ran = _fake_parts(monkeypatch, tmp_path)
    console = Console(width=300, record=True, file=open(tmp_path / "log", "w"))  # noqa: SIM115
    run_demo(tmp_path, console, full=full)
    lines = [line for line in console.export_text().splitlines() if line.strip()]
    expected = ["sim", "coat", "compas", *(["labels", "envy", "coat-reach"] if full else [])]
    assert ran == expected
    if full:
        assert lines[0].startswith("fairmon demo --full: six parts")
    else:
        assert lines[0].startswith("fairmon demo: three parts (simulated A/B traffic, Coat, COMPAS)")
        assert "--full adds labelers (SDT), an envy-freeness audit and Coat's reachability audit" in lines[0]
    assert re.fullmatch(r"the demo took \d+ s \(\d+ CPU-s, this process and the ones it started\)(; .*)?", lines[-1])
    assert ("--full adds" in lines[-1]) is not full
    tables = [line.split(":")[0] for line in lines if "tables under" in line]
    named = {"sim": "simulation", "coat-reach": "coat-reach"}
    assert tables == [named.get(n, n) for n in expected]


def test_demo_exits_1_when_a_day_did_not_publish(tmp_path, monkeypatch):
    from fairmon.pipelines.faces.demo import run_demo

    _fake_parts(monkeypatch, tmp_path, status="quarantined")
    with pytest.raises(SystemExit) as exc:
        run_demo(tmp_path, Console(file=open(tmp_path / "log", "w")))  # noqa: SIM115
    assert exc.value.code == 1


def test_took_line_and_cpu_seconds():
    from fairmon.pipelines.faces.demo import cpu_seconds, took_line

    assert (
        took_line(75.4, 41.6, full=True) == "the demo took 1 min 15 s (42 CPU-s, this process and the ones it started)"
    )
    assert took_line(9.6, 8.2, full=False).startswith("the demo took 10 s (8 CPU-s, this process")
    assert 0 < cpu_seconds() < 3600


def test_demo_command_passes_full(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from fairmon.pipelines.faces import demo
    from fairmon.pipelines.faces.cli import app

    calls = []
    monkeypatch.setattr(demo, "run_demo", lambda out, console, full=False: calls.append((out, full)))
    for args, full in (
        (["demo", "--out", str(tmp_path / "d")], False),
        (["demo", "-o", str(tmp_path / "d"), "--full"], True),
    ):
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 0, res.output
        assert calls[-1] == ((tmp_path / "d").resolve(), full)
