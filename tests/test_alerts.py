"""Alerts over time (DESIGN §4.9): the spending level, REO's interval at it, and hand-checked alert sequences
(a condition starting, holding, ending) for every kind."""

import datetime as dt

import numpy as np
import polars as pl
import pytest
from scipy import stats

from fairmon.pipelines.faces.daylines import day_lines
from fairmon.pipelines.faces.fitting import Footnotes
from fairmon.pipelines.faces.views import alert_lines
from fairmon.transforms.alerts.alert_tables import (
    ALERTS_SCHEMA,
    AlertRules,
    ab_alerts,
    alert_id,
    alerts_table,
    budget_alerts,
    open_alerts,
    p_against,
    reo_alerts,
    run_alerts,
)
from fairmon.transforms.alerts.horizon import alert_level, day_alpha
from fairmon.transforms.alerts.words import status_words
from fairmon.transforms.reo.estimate import estimate_reo

D0 = dt.date(2026, 3, 1)
LINE = 1 / 9


def _day(i: int) -> dt.date:
    return D0 + dt.timedelta(days=i)


def _reo(rows: list[tuple]) -> pl.DataFrame:
    """reo rows from (day index, verdict, alert_low, alert_high[, n_small_groups])."""
    return pl.DataFrame(
        [
            {"ds": _day(i), "arm": "all", "attribute": "a", "reo": (lo + hi) / 2, "reo_threshold": LINE,
             "verdict_80pct": v, "n_small_groups": rest[0] if rest else 0, "alert_level": 0.99, "alert_low": lo,
             "alert_high": hi}
            for i, v, lo, hi, *rest in rows
        ]
    )  # fmt: skip


def test_the_level_spends_alpha_evenly_over_the_horizon():
    assert day_alpha(0.05, 90) == pytest.approx(0.05 / 90)
    assert alert_level(0.05, 90) == pytest.approx(1 - 0.1 / 90)
    assert alert_level(0.05, 1) == pytest.approx(0.9)
    for bad in [(0.0, 90), (1.0, 90), (0.05, 0), (0.05, 2.5), (0.9, 1)]:
        with pytest.raises(ValueError):
            alert_level(*bad)


def test_reo_alert_interval_is_the_one_sided_bound_at_alpha_over_h():
    """K = 2: REO = tanh(|l|/2), l = log(U_1/U_2), and the bound is |l̂| ± z·sd(l̂) through tanh(·/2) with
    z = Φ⁻¹(1 − α/H) and Var(l̂) = Σ_k 1/(n_pos_rec,k) + 1/(n_pos_rand,k) (the multinomial delta method on
    log shares, DESIGN §4.1): by hand at the 80 % line (U = (0.8, 1), seed 001 §4.3)."""
    est = estimate_reo(
        ["0", "1"], np.array([3200, 4000]), 20000, np.array([2625, 2625]), 21000, alert_level=alert_level(0.05, 90)
    )
    assert est.reo == pytest.approx(1 / 9)
    z = stats.norm.ppf(1 - 0.05 / 90)
    sd = np.sqrt(1 / 3200 + 1 / 4000 + 2 / 2625)
    l = abs(np.log(0.8))
    assert est.alert_low == pytest.approx(np.tanh((l - z * sd) / 2), rel=1e-12)
    assert est.alert_high == pytest.approx(np.tanh((l + z * sd) / 2), rel=1e-12)
    assert est.alert_low < est.ci_low < est.ci_high < est.alert_high
    plain = estimate_reo(["0", "1"], np.array([3200, 4000]), 20000, np.array([2625, 2625]), 21000)
    assert np.isnan(plain.alert_low) and plain.ci_low == est.ci_low  # off: the daily interval is unchanged


def test_reo_alert_interval_beyond_two_groups_is_the_parity_aware_one():
    """K > 2 has no exact log transform: the alert interval is the daily interval's machinery at 1 − 2α/H."""
    a, b = np.array([2000, 2400, 2400, 2500]), np.array([1300, 1300, 1300, 1300])
    lvl = alert_level(0.05, 90)
    est = estimate_reo(list("abcd"), a, 20000, b, 21000, alert_level=lvl)
    wide = estimate_reo(list("abcd"), a, 20000, b, 21000, level=lvl)
    assert (est.alert_low, est.alert_high) == (wide.ci_low, wide.ci_high)


def test_an_exceeds_alert_starts_holds_ends_and_starts_again():
    reo = _reo(
        [
            (0, "exceeds", 0.10, 0.30),  # daily verdict exceeds, the alert interval reaches below the line
            (1, "exceeds", 0.12, 0.30),  # above: exceeds, since day 0 (the daily verdicts' run)
            (2, "exceeds", 0.13, 0.31),  # holds: not raised again
            (3, "inconclusive", 0.08, 0.20),  # neither: still open
            (4, "within", 0.02, 0.12),
            (5, "within", 0.01, 0.105),  # back within, since day 4 (the daily verdicts' run)
            (6, "within", 0.01, 0.10),  # holds: nothing
            (7, "exceeds", 0.20, 0.40, 1),  # a small group: no change
            (8, "exceeds", 0.20, 0.40),  # a new episode
        ]
    )
    got = [(a["ds"], a["kind"], a["since"]) for a in reo_alerts(reo)]
    assert got == [(_day(1), "exceeds", _day(0)), (_day(5), "back_within", _day(4)), (_day(8), "exceeds", _day(7))]


def test_series_are_separate_and_nan_changes_nothing():
    reo = pl.concat(
        [_reo([(0, "exceeds", 0.2, 0.3)]), _reo([(0, "inconclusive", float("nan"), float("nan"))])]
    ).with_columns(pl.Series("arm", ["t", "c"]))
    assert [(a["arm"], a["kind"]) for a in reo_alerts(reo)] == [("t", "exceeds")]


def _ab(rows: list[tuple]) -> pl.DataFrame:
    """reo_ab rows from (day index, diff, se, p_value, ci_low, ci_high)."""
    return pl.DataFrame(
        [
            {"ds": _day(i), "attribute": "a", "control": "c", "treatment": "t", "metric": "reo", "method": "delta",
             "diff": d, "se": se, "p_value": p, "df": float("nan"), "ci_low": lo, "ci_high": hi}
            for i, d, se, p, lo, hi in rows
        ]
    )  # fmt: skip


def test_ab_change_raised_once_per_direction_and_cleared_by_a_day_holding_zero():
    a = day_alpha(0.05, 90)
    ab = _ab(
        [
            (0, 0.05, 0.02, 0.012, 0.01, 0.09),  # significant by the day, not at α/H
            (1, 0.10, 0.02, a / 2, 0.06, 0.14),  # a change: raised
            (2, 0.11, 0.02, a / 3, 0.07, 0.15),  # the same change: not again
            (3, -0.10, 0.02, a / 2, -0.14, -0.06),  # flipped: raised
            (4, 0.00, 0.02, 0.9, -0.04, 0.04),  # holds 0: cleared
            (5, -0.10, 0.02, a / 2, -0.14, -0.06),  # raised again
        ]
    )
    got = ab_alerts(ab, 0.05, 90)
    assert [(x["ds"], x["value"]) for x in got] == [(_day(1), 0.10), (_day(3), -0.10), (_day(5), -0.10)]
    z = stats.norm.ppf(1 - a / 2)
    assert got[0]["ci_low"] == pytest.approx(0.10 - z * 0.02) and got[0]["level"] == pytest.approx(1 - a)
    assert ab_alerts(ab.with_columns(pl.lit("bootstrap").alias("method")), 0.05, 90) == []
    # p beside α/H in plain decimals, as the report writes p-values (it printed "p = 1e-12")
    assert "p = 0.000278 ≤ α/H = 0.000556" in got[0]["message"]
    tiny = ab_alerts(ab.with_columns(pl.lit(1e-12).alias("p_value")), 0.05, 90)
    assert "p < 0.0001 ≤ α/H = 0.000556" in tiny[0]["message"] and "e-" not in tiny[0]["message"]
    assert [p_against(p, 0.05) for p in (0.004, 0.02, 0.05)] == ["p < 0.01", "p = 0.02", "p = 0.05"]


def test_bad_days_alert_on_the_first_day_of_a_run_of_them():
    runs = pl.DataFrame(
        {
            "ds": [_day(i) for i in (0, 1, 2, 3, 5, 6)],
            "status": ["quarantined", "quarantined", "published", "failed", "failed", "quarantined"],
            "detail": ["q0", "q1", None, "f3", "f5", "q6"],
        }
    )
    got = [(a["ds"], a["kind"], a["message"]) for a in run_alerts(runs)]
    assert got == [
        (_day(0), "quarantined", f"day {_day(0)} quarantined: q0"),
        (_day(3), "failed", f"day {_day(3)} failed: f3"),
        (_day(5), "failed", f"day {_day(5)} failed: f5"),  # day 4 between them is not a failed day
        (_day(6), "quarantined", f"day {_day(6)} quarantined: q6"),
    ]


def test_budget_low_once_when_the_spent_share_is_reached():
    t = dt.datetime(2026, 3, 1, 12)
    ledger = pl.DataFrame(
        {
            "dataset": ["population:x"] * 4 + ["population:y"],
            "released_at": [t, t + dt.timedelta(days=1), t + dt.timedelta(days=2), t + dt.timedelta(days=3), t],
            "epsilon": [0.3, 0.3, 0.25, 0.1, 0.5],
        }
    )
    got = budget_alerts(ledger, 0.8, 1.0)
    assert [(a["ds"], a["value"], a["line"]) for a in got] == [(dt.date(2026, 3, 3), pytest.approx(0.85), 0.8)]


def test_the_same_history_gives_the_same_ids_and_projects_differ():
    reo = _reo([(0, "exceeds", 0.2, 0.3)])
    empty = pl.DataFrame()
    runs = pl.DataFrame({"ds": [_day(0)], "status": ["published"], "detail": [None]})
    one = alerts_table(reo, empty, runs, empty, AlertRules(project="p"))
    assert one.schema == pl.Schema(ALERTS_SCHEMA) and one.height == 1
    assert one.equals(alerts_table(reo, empty, runs, empty, AlertRules(project="p")))
    assert one["alert_id"][0] == alert_id("p", "exceeds", "reo arm=all attribute=a", _day(0))
    assert one["alert_id"][0] != alerts_table(reo, empty, runs, empty, AlertRules(project="q"))["alert_id"][0]


def test_open_alerts_on_a_day():
    reo = _reo([(0, "exceeds", 0.2, 0.3), (3, "within", 0.0, 0.1)])
    runs = pl.DataFrame({"ds": [_day(1)], "status": ["quarantined"], "detail": [f"{_day(1)}: x"]})
    frame = alerts_table(reo, pl.DataFrame(), runs, pl.DataFrame(), AlertRules())
    assert frame.filter(pl.col("kind") == "quarantined")["message"].to_list() == [f"day {_day(1)} quarantined: x"]
    failed_at = dt.datetime(2026, 3, 10, 12)
    bad = {_day(1): failed_at}

    def pub(*days):  # published after day 1 failed
        return dict.fromkeys(map(_day, days), failed_at + dt.timedelta(hours=1))

    assert [a["kind"] for a in open_alerts(frame, _day(2), pub(0), bad)] == ["quarantined", "exceeds"]
    assert [a["kind"] for a in open_alerts(frame, _day(2), pub(2), bad)] == ["exceeds"]  # a later day published
    assert [a["kind"] for a in open_alerts(frame, _day(2), pub(1), bad)] == ["exceeds"]  # re-run and published
    assert open_alerts(frame, _day(3), pub(3), bad) == []  # back within


def test_a_run_of_refused_days_stays_open_until_all_publish_or_a_later_day_does():
    """Days 1-3 quarantined (one alert, on day 1). Re-running day 1 alone does not close it while days 2-3 are
    still refused; it closes when all three publish, or when a day after them publishes after they failed (the
    next published day), not when that day had published before (a past day re-run and refused)."""
    runs = pl.DataFrame({"ds": [_day(i) for i in (1, 2, 3)], "status": ["quarantined"] * 3, "detail": ["x"] * 3})
    frame = alerts_table(pl.DataFrame(), pl.DataFrame(), runs, pl.DataFrame(), AlertRules())
    assert frame["ds"].to_list() == [_day(1)]
    failed_at = dt.datetime(2026, 3, 10, 12)
    bad = {_day(i): failed_at + dt.timedelta(minutes=i) for i in (1, 2, 3)}

    def still_open(until, published, hours=1):
        at = failed_at + dt.timedelta(hours=hours)
        return [a["ds"] for a in open_alerts(frame, _day(until), dict.fromkeys(map(_day, published), at), bad)]

    assert still_open(3, {0}) == [_day(1)]
    assert still_open(3, {0, 1}) == [_day(1)]  # day 1 re-run and published; days 2 and 3 are not
    published = dict.fromkeys([_day(0), _day(1)], failed_at + dt.timedelta(hours=1))
    assert [a["waiting"] for a in open_alerts(frame, _day(3), published, bad)] == [[_day(2), _day(3)]]
    assert still_open(3, {0, 1, 3}) == [_day(1)]  # day 2 still refused
    assert still_open(3, {0, 1, 2, 3}) == []
    assert still_open(4, {0, 4}) == []  # the next published day after the run
    assert still_open(4, {0, 4}, hours=-1) == [_day(1)]  # day 4 published before the run failed: no recovery
    assert still_open(1, {1}) == []  # on day 1 the run was day 1 alone
    assert still_open(2, {1}) == [_day(1)]
    # a second run of refused days (days 5-6) is its own alert: day 4's publication closed the first only
    runs = pl.concat([runs, pl.DataFrame({"ds": [_day(5), _day(6)], "status": ["failed"] * 2, "detail": ["y"] * 2})])
    frame = alerts_table(pl.DataFrame(), pl.DataFrame(), runs, pl.DataFrame(), AlertRules())
    bad |= {_day(5): failed_at, _day(6): failed_at}
    assert still_open(6, {0, 4, 5}) == [_day(5)]


def test_a_day_failing_after_the_day_before_was_fixed_raises_its_own_alert():
    """Day 1 quarantined then fixed (published at t1); day 2 quarantined after t1: a condition of its own, its
    own alert and reason (it was folded into day 1's closed alert, no notification). Day 2 failing while day 1
    was still refused continues day 1's alert; a day failing again after a fix is a new alert of that day."""
    t = [dt.datetime(2026, 3, 10, h) for h in range(6)]

    def alerts(*spells):
        cols = ("ds", "status", "detail", "bad_from", "fixed_at")
        frame = pl.DataFrame([dict(zip(cols, (_day(d), *rest), strict=True)) for d, *rest in spells])
        return [(a["ds"], a["kind"], a["message"]) for a in run_alerts(frame)]

    q = "quarantined"
    assert alerts((1, q, "x", t[0], t[1]), (2, q, "y", t[2], None)) == [
        (_day(1), q, f"day {_day(1)} quarantined: x"), (_day(2), q, f"day {_day(2)} quarantined: y")
    ]  # fmt: skip
    assert alerts((1, q, "x", t[0], t[3]), (2, q, "y", t[2], None)) == [(_day(1), q, f"day {_day(1)} quarantined: x")]
    assert alerts((1, q, "x", t[0], None), (2, "failed", "y", t[2], None))[1][:2] == (_day(2), "failed")
    assert alerts((1, q, "x", t[0], t[1]), (1, q, "z", t[4], None)) == [
        (_day(1), q, f"day {_day(1)} quarantined: x"), (_day(1), q, f"day {_day(1)} quarantined: z")
    ]  # fmt: skip
    again = run_alerts(
        pl.DataFrame(
            {
                "ds": [_day(1)] * 2,
                "status": [q] * 2,
                "detail": ["x", "z"],
                "bad_from": t[0:5:4],
                "fixed_at": [t[1], None],
            }
        )
    )
    assert [a["subject"] for a in again] == ["runs", "runs again from 2026-03-10 04:00:00"]  # its own id: sent anew
    # day 3 fails while day 2's second spell is open (day 2's first was mended before): it joins that alert
    got = alerts((2, q, "x", t[0], t[1]), (2, q, "y", t[2], None), (3, q, "w", t[3], None))
    assert [(a[0], a[2][-1]) for a in got] == [(_day(2), "x"), (_day(2), "y")]


def test_a_day_not_published_is_named_once_in_its_line():
    """A quarantine reason starts with its day and status ("2026-01-04: quarantined at stage ..."), which the
    alert's message and the command line's day line already say: each is said once."""
    d = _day(0)
    assert status_words(d, "quarantined", f"{d}: quarantined at stage impressions: x") == " at stage impressions: x"
    assert status_words(d, "failed", f"  {d}: OSError: disk full ") == ": OSError: disk full"
    assert status_words(d, "failed", f"DayFailed: {d}: stage scores: x") == ": stage scores: x"
    assert status_words(d, "failed", f"{_day(1)}: OSError") == f": {_day(1)}: OSError"  # another day's name stays
    assert status_words(d, "quarantined", "pre-flight: nothing ran", 5) == ": pre-f"
    assert status_words(d, "failed", None) == status_words(d, "failed", " ") == ""
    runs = pl.DataFrame({"ds": [d], "status": ["quarantined"], "detail": [f"{d}: quarantined at stage scores: y"]})
    assert [a["message"] for a in run_alerts(runs)] == [f"day {d} quarantined at stage scores: y"]
    head, rows = day_lines(
        {"ds": str(d), "status": "quarantined", "error": f"{d}: quarantined at stage scores: y"}, Footnotes()
    )
    assert (head, rows) == (f"{d} [yellow]quarantined[/yellow] at stage scores: y", [])
    line = alert_lines([{"ds": d, "kind": "quarantined", "message": f"day {d} quarantined at stage scores: y"}])
    assert line == [f"[red]alert[/red] [bold]{d} quarantined[/bold] at stage scores: y"]
    line = alert_lines([{"ds": d, "kind": "exceeds", "message": "REO 0.3 > 0.111"}])
    assert line == [f"[red]alert[/red] [bold]{d} exceeds[/bold]: REO 0.3 > 0.111"]
