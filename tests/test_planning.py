"""Traffic planning (seed 001 App. E, DESIGN §4.5): Thms E.1–E.4 against hand
computations from the printed formulas, the union bound, per-day volumes over
the span the random rows cover, and ``fairmon plan --json``."""

from __future__ import annotations

import datetime as dt
import json
import math

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from fairmon.pipelines.faces.cli import app
from fairmon.transforms.planning.traffic import (
    PLAN_METHODS,
    default_traffic_required,
    eq13_check,
    plan_volumes,
    random_traffic_required,
    random_volume_for_reo_se,
    reo_se_for_volume,
    thm_e2_volumes,
    thm_e34_volumes,
    union_bound_volumes,
)

SETTINGS = [
    # (P, Q, ε, δ)
    (np.array([0.01, 0.05]), np.array([0.1, 0.25]), 0.1, 0.05),
    (np.array([0.02, 0.03, 0.05]), np.array([0.05, 0.04, 0.2]), 0.05, 0.01),
]


def _eq8(n, U, P, Q):
    """Seed 001 eq. 8 by hand: |D_rec| = n max U²(1−q)/q, |D_rand| = n max U²(1−p)/p."""
    rec = max(n * u * u * (1 - q) / q for u, q in zip(U, Q))
    rand = max(n * u * u * (1 - p) / p for u, p in zip(U, P))
    return math.ceil(rec - 1e-6), math.ceil(rand - 1e-6)


def test_thm_e1_reference_value():
    assert random_traffic_required(0.01, 0.1, 0.05) == 110_667  # ⌈3/0.01 · 100 · ln 40⌉


@pytest.mark.parametrize(("P", "Q", "eps", "delta"), SETTINGS)
def test_thm_e2_as_printed(P, Q, eps, delta):
    C = 0.08
    v = thm_e2_volumes(P, Q, eps, delta, C)
    n = math.ceil(4 / eps**2 * math.log(1 / delta))
    assert v["n"] == n
    assert (v["n_rec"], v["n_rand"]) == _eq8(n, [C * q / p for p, q in zip(P, Q)], P, Q)


@pytest.mark.parametrize(("P", "Q", "eps", "delta"), SETTINGS)
def test_thm_e3_e4_as_printed_and_corrected(P, Q, eps, delta):
    U = [q / p for p, q in zip(P, Q)]
    K, S = len(U), sum(U)
    for thm, log in (("E.3", math.log(K / delta)), ("E.4", math.log(1 / delta))):
        for c in (4, 8):
            n = c * K * K / (S * S * eps * eps) * log
            v = thm_e34_volumes(P, Q, eps, delta, thm, c)
            assert v["n"] == pytest.approx(n, rel=1e-12)
            assert (v["n_rec"], v["n_rand"]) == _eq8(n, U, P, Q)
    # scale-free: only U_k/ΣU enters
    a = thm_e34_volumes(P, Q, eps, delta, "E.4")
    b = thm_e34_volumes(P, 3 * Q, eps, delta, "E.4")
    assert a["n_rand"] == pytest.approx(b["n_rand"], rel=1e-6, abs=2)


def test_union_bound_is_named_as_such():
    P, Q = SETTINGS[0][:2]
    j = union_bound_volumes(P, Q, 0.1, 0.05)
    eps_s = 0.1 / 2.1
    assert (1 + eps_s) / (1 - eps_s) == pytest.approx(1.1)
    assert j["n_rand"] == math.ceil(3 / 0.01 / eps_s**2 * math.log(2 / (0.05 / 4)))
    methods = [v["method"] for v in plan_volumes(P, Q, 0.1, 0.05)]
    assert tuple(methods) == PLAN_METHODS
    e2 = next(v for v in plan_volumes(P, Q, 0.1, 0.05) if v["method"] == "thm_e2")
    assert e2["n_rand"] is None and "recommendation rate" in e2["note"]


def test_se_inversion_round_trip():
    Q, P = np.array([0.135, 0.198]), np.array([0.125, 0.14])
    n = random_volume_for_reo_se(Q, P, 50_000, 0.015)
    se, se_du = reo_se_for_volume(Q, P, 50_000, n)
    assert se == pytest.approx(0.015, rel=1e-3) and se <= 0.015
    assert random_volume_for_reo_se(Q, P, 100, 0.001) == float("inf")  # default traffic alone is too noisy
    assert se_du.shape == (2,)


def test_cli_plan_json_with_rates():
    res = CliRunner().invoke(
        app,
        ["plan", "--P", "0.01,0.05", "--Q", "0.1,0.25", "--rand-per-day", "6000", "--n-rec", "50000", "--json"],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    by = {v["method"]: v for v in out["volumes"]}
    assert set(by) == set(PLAN_METHODS)
    assert by["thm_e1"]["n_rand"] == 110_667 and by["thm_e1"]["rand_days"] == pytest.approx(110_667 / 6000)
    assert by["thm_e3"]["n_rec"] == thm_e34_volumes(*SETTINGS[0], "E.3")["n_rec"]
    res = CliRunner().invoke(app, ["plan", "--P", "0.01,0.05", "--Q", "0.1,0.25", "--rec-rate", "0.1"])
    assert res.exit_code == 0 and "thm_e2" in res.output and "union_bound" in res.output


def test_per_day_volume_uses_the_span_the_random_rows_cover(monkeypatch, tmp_path):
    """3,000 random rows a day in a 7-day window whose pools cover only 2 days: 3,000/day, not 857."""
    from fairmon.pipelines.core.config import load_config
    from fairmon.pipelines.privacy import audit_release as audit

    ds = dt.date(2026, 1, 8)
    rows = []
    for traffic, n, pos, ws in (
        ("default", 50_000, (5_000, 12_500), ds),
        ("random", 6_000, (60, 300), ds - dt.timedelta(days=1)),
    ):
        for g, p in zip("ab", pos):
            rows.append((ds, "impressions", traffic, "all", "s", g, n // 2, p, ws, ds))
    cols = ["ds", "source", "traffic", "arm", "attribute", "group", "n", "n_pos", "window_start", "window_end"]
    frame = pl.DataFrame(rows, schema=cols, orient="row")
    monkeypatch.setattr(audit, "read_table", lambda *a, **k: frame)
    cfgp = tmp_path / "f.toml"
    cfgp.write_text(
        'warehouse = "wh"\nduckdb = "f.duckdb"\n[impressions]\nformat = "contract"\npath = "d/{ds}.csv"\n'
        'signals = ["s1"]\nattributes = ["s"]\nrandom_window_days = 7\n'
    )
    table, volumes = audit.plan_from_counts(load_config(cfgp), dt.date.min, dt.date.max, 0.1, 0.05, 0.0001)
    # from counts, --json is strict JSON: no --target-se -> rand_for_target_se NaN is null
    res = CliRunner().invoke(app, ["plan", "-c", str(cfgp), "--json"])
    assert res.exit_code == 0, res.output
    doc = _strict_json(res.output)
    assert doc["summary"][0]["rand_for_target_se"] is None
    e1_json = next(v for v in doc["volumes"] if v["method"] == "thm_e1")
    # Thm E.1, default half: Q = (5000, 12500)/50000 -> q = 0.1 rules: ⌈3000 · ln 40⌉ = 11,067
    assert e1_json["n_rec"] == 11_067 and e1_json["eq13_holds"] is None
    row = table.to_dicts()[0]
    assert row["rand_span_days"] == 2 and row["rand_per_day"] == pytest.approx(3_000)
    e1 = next(v for v in volumes if v["method"] == "thm_e1")
    assert e1["rand_days"] == pytest.approx(e1["n_rand"] / 3_000)
    assert row["rand_for_target_se"] == float("inf") and "out of reach" in row["target_se_note"]


def _strict_json(text):
    """json.loads that refuses NaN / Infinity (not JSON)."""

    def bad(c):
        raise AssertionError(f"non-JSON constant {c}")

    return json.loads(text, parse_constant=bad)


def test_thm_e1_default_traffic_by_hand():
    # Thm E.1 for Q̂_k: ⌈3 / 0.1 · 0.1⁻² · ln 40⌉ = ⌈3000 · 3.68888⌉ = ⌈11066.64⌉ = 11,067
    assert default_traffic_required(0.1, 0.1, 0.05) == 11_067
    e1 = plan_volumes(np.array([0.01, 0.05]), np.array([0.1, 0.25]), 0.1, 0.05)[0]
    assert e1["method"] == "thm_e1" and (e1["n_rec"], e1["n_rand"]) == (11_067, 110_667)


def _eq13_by_jacobian(U):
    """Eq. 13 from the Jacobian of eq. 10 directly: 2 Σ_j (∂_j g_k)² ≤ 4K²/S² for every k."""
    U = np.asarray(U, float)
    K, S = U.size, U.sum()
    J = K * (np.eye(K) * S - U[:, None]) / S**2  # J[k, j] = ∂_j g_k
    return bool(np.all(2 * (J**2).sum(axis=1) <= 4 * K * K / S**2 * (1 + 1e-12)))


@pytest.mark.parametrize(
    ("U", "holds"),
    [
        # K = 4, equal U: x = 1/4; (S − U_k)² + 3U_k² = 9 + 3 = 12 ≤ 2S² = 32
        ([1, 1, 1, 1], True),
        # K = 4, U_1/S = 10/13 = 0.769 ≤ (1 + √5)/4 = 0.809: 3² + 3·10² = 309 ≤ 2·13² = 338
        ([10, 1, 1, 1], True),
        # K = 4, U_1/S = 20/23 = 0.870 > 0.809: 3² + 3·20² = 1209 > 2·23² = 1058
        ([20, 1, 1, 1], False),
        # K = 8, bound (1 + 3)/8 = 0.5; U_1/S = 7/14 exactly: 7² + 7·7² = 392 = 2·14²
        ([7] + [1] * 7, True),
        # K = 8, U_1/S = 8/15 > 0.5: 7² + 7·8² = 497 > 2·15² = 450
        ([8] + [1] * 7, False),
        # K = 3: bound (1 + 2)/3 = 1, always holds: 2² + 2·100² = 20004 ≤ 2·102² = 20808
        ([100, 1, 1], True),
    ],
)
def test_eq13_condition_by_hand(U, holds):
    c = eq13_check(np.array(U, float))
    assert c["holds"] is holds and _eq13_by_jacobian(U) is holds
    assert c["share_bound"] == pytest.approx((1 + math.sqrt(len(U) + 1)) / len(U))
    assert ("fails" in c["reason"]) is not holds
    assert eq13_check(3.7 * np.array(U, float))["holds"] is holds  # only U_k/ΣU enters
    assert c["max_share"] == pytest.approx(max(U) / sum(U))  # the largest share, where the condition binds


def test_eq13_reason_names_the_largest_share():
    """U = (1, 2, 3, 2.2): the largest share is 3/8.2 = 0.366 (not the smallest, 1/8.2 = 0.122)."""
    assert "max_k U_k/ΣU = 0.366" in eq13_check(np.array([1.0, 2.0, 3.0, 2.2]))["reason"]


def test_eq13_note_only_where_it_fails():
    P = np.full(4, 0.1)
    ok = {v["method"]: v for v in plan_volumes(P, np.full(4, 0.1), 0.1, 0.05)}
    # U = Q/P = (2, 0.1, 0.1, 0.1): U_1/ΣU = 2/2.3 = 0.870 > 0.809
    bad = {v["method"]: v for v in plan_volumes(P, np.array([0.2, 0.01, 0.01, 0.01]), 0.1, 0.05)}
    for m in ("thm_e3", "thm_e4", "thm_e3_corrected", "thm_e4_corrected"):
        assert ok[m]["eq13_holds"] is True and "eq. 13" not in ok[m]["note"]
        assert bad[m]["eq13_holds"] is False and "eq. 13 fails" in bad[m]["note"]
    assert ok["thm_e1"]["eq13_holds"] is None and bad["union_bound"]["eq13_holds"] is None


def test_cli_plan_eq13_and_strict_json():
    base = ["plan", "--P", "0.1,0.1,0.1,0.1", "--rand-per-day", "6000", "--n-rec", "100", "--target-se", "0.0001"]
    ok = CliRunner().invoke(app, [*base, "--Q", "0.1,0.1,0.1,0.1"])
    assert ok.exit_code == 0, ok.output
    assert "eq. 13" not in ok.output
    bad = CliRunner().invoke(app, [*base, "--Q", "0.2,0.01,0.01,0.01"])
    assert bad.exit_code == 0 and "eq. 13 fails" in bad.output and "0.870 >" in bad.output
    out = _strict_json(CliRunner().invoke(app, [*base, "--Q", "0.2,0.01,0.01,0.01", "--json"]).output)
    by = {v["method"]: v for v in out["volumes"]}
    assert by["thm_e4"]["eq13_holds"] is False and "0.870 > " in by["thm_e4"]["eq13_reason"]
    # Thm E.1, default half: max_k ⌈3 / q_k · 100 · ln 40⌉ at q = 0.01 -> 110,667
    assert by["thm_e1"]["n_rec"] == 110_667
    assert out["rand_for_target_se"] is None  # out of reach (inf) is null, not Infinity


def _reo_row(arm, pos_rec, n_rec, pos_rand, n_rand, ds):
    """A ``reo`` row as the pipeline writes it, from estimate_reo on the same counts."""
    from fairmon.transforms.reo.estimate import estimate_reo

    e = estimate_reo(["a", "b"], np.array(pos_rec), n_rec, np.array(pos_rand), n_rand)
    return dict(
        ds=ds, arm=arm, attribute="s", reo=e.reo, ci_low=e.ci_low, ci_high=e.ci_high, se=e.se,
        reo_threshold=e.threshold, verdict_80pct=e.verdict, n_small_groups=int(sum(e.small_group)),
    )  # fmt: skip


def test_plan_marks_the_row_that_settles_an_inconclusive_verdict(monkeypatch, tmp_path):
    """Two arms share 2,000 random rows (200 positives per group) over a 7-day window.
    control (Q = 0.2, 0.1) exceeds the line; treat (Q = 0.14, 0.10: U = 1.4, 1, REO = 1/6)
    reaches both sides: plan marks treat's row and no other, with the random rows that
    bring its interval above 1/9 if REO stays at 1/6, derived by hand for K = 2."""
    from fairmon.pipelines.privacy import audit_release as audit
    from fairmon.transforms.reo.estimate import estimate_reo

    ds = dt.date(2026, 1, 8)
    cols = ["ds", "source", "traffic", "arm", "attribute", "group", "n", "n_pos", "window_start", "window_end"]
    rows, reo = [], []
    for arm, pos in (("control", (2000, 1000)), ("treat", (1400, 1000))):
        rows += [(ds, "impressions", "default", arm, "s", g, 5000, p, ds, ds) for g, p in zip("ab", pos)]
        reo.append(_reo_row(arm, pos, 10_000, (200, 200), 2000, ds))
    rows += [(ds, "impressions", "random", "all", "s", g, 1000, 200, ds - dt.timedelta(days=6), ds) for g in "ab"]
    frames = {"group_counts": pl.DataFrame(rows, schema=cols, orient="row"), "reo": pl.DataFrame(reo)}
    monkeypatch.setattr(audit, "read_table", lambda _wh, name: frames[name])
    cfgp = tmp_path / "f.toml"
    cfgp.write_text(
        'warehouse = "wh"\nduckdb = "f.duckdb"\n[impressions]\nformat = "contract"\npath = "d/{ds}.csv"\n'
        'signals = ["s1"]\nattributes = ["s"]\nrandom_window_days = 7\n'
    )
    t = reo[1]
    assert [r["verdict_80pct"] for r in reo] == ["exceeds", "inconclusive"]
    # by hand, K = 2: REO = (r − 1)/(r + 1), r = U_a/U_b, so g_a = −g_b = 2 U_a U_b/(U_a + U_b)² = 2·1.4/2.4²
    g2 = (2 * 1.4 / 2.4**2) ** 2
    rec_var = g2 * (1 / 1400 + 1 / 1000)  # Σ g²/(Q n_rec) = Σ g²/positives
    se_now = math.sqrt(rec_var + g2 * (1 / 200 + 1 / 200))
    assert se_now == pytest.approx(t["se"], rel=1e-9)
    h, d = t["reo"] - t["ci_low"], t["reo"] - 1 / 9  # half-width facing the line, distance to it
    target = se_now * d / h
    n_hand = math.ceil(g2 * (1 / 0.1 + 1 / 0.1) / (target**2 - rec_var))  # Σ g²/(P n_rand) = rest
    assert n_hand == 11_867

    doc = _strict_json(CliRunner().invoke(app, ["plan", "-c", str(cfgp), "--json"]).output)
    by = {r["arm"]: r for r in doc["summary"]}
    assert (by["control"]["verdict"], by["control"]["settles"], by["control"]["rand_to_settle"]) == (
        "exceeds", False, None
    )  # fmt: skip
    assert (by["treat"]["verdict"], by["treat"]["settles"]) == ("inconclusive", True)
    assert by["treat"]["rand_to_settle"] == n_hand and by["treat"]["rec_to_settle"] == 10_000
    assert by["treat"]["days_to_settle"] == pytest.approx(n_hand / (2000 / 7))
    assert "interval [0.064, 0.270] reaches both sides of the 0.111 line" in by["treat"]["settle_note"]

    out = CliRunner().invoke(app, ["plan", "-c", str(cfgp)], terminal_width=200).output
    marked = [ln for ln in out.splitlines() if ln.startswith("│ ◀")]
    assert len(marked) == 1 and "treat" in marked[0] and "11,867" in marked[0]
    assert "◀ These rows settle the inconclusive verdicts of 2026-01-08" in out
    assert "treat / s: REO 0.167, interval [0.064, 0.270] reaches both sides of the 0.111 line" in out
    assert "set random_window_days = 42" in out  # 41.5 days of 285.7 random rows a day

    # the number is real: the same shares with 11,870 random rows settle it, 11,860 do not
    for n_rand, verdict in ((11_870, "exceeds"), (11_860, "inconclusive")):
        e = estimate_reo(["a", "b"], np.array([1400, 1000]), 10_000, np.array([n_rand // 10] * 2), n_rand)
        assert e.verdict == verdict


def test_settle_small_groups_and_default_bound():
    from fairmon.transforms.planning.settle import settle_verdict

    # a's 20 random positives (P = 0.01 of 2,000) make the verdict inconclusive though the interval is above
    row = dict(reo=0.3, ci_low=0.2, ci_high=0.4, reo_threshold=1 / 9, verdict_80pct="inconclusive")
    s = settle_verdict(row, ["a", "b"], np.array([0.05, 0.1]), np.array([0.01, 0.1]), 10_000, 2000, 30)
    assert s["settles"] and (s["rand_to_settle"], s["rec_to_settle"]) == (3000, 10_000)  # ⌈30/0.01⌉
    assert s["settle_note"] == (
        "REO 0.300, interval [0.200, 0.400] is above the 0.111 line, but small groups keep the verdict "
        "inconclusive; 1 group(s) have fewer than min_expected_positives = 30 positives in random traffic "
        "('a' 20): about 3,000 random rows in the window give each 30"
    )
    assert settle_verdict({**row, "verdict_80pct": "exceeds"}, ["a", "b"], *[np.ones(2)] * 2, 1, 1, 30) == {
        "verdict": "exceeds", "settles": False, "rand_to_settle": None, "rec_to_settle": None, "settle_note": None
    }  # fmt: skip
    # 100 default rows: their term alone, g²(1/30 + 1/20) = 0.0192 with g² = (2·6/25)², exceeds the
    # target SE² = (SE_now · d/h)² = 0.0068: both traffics grow by (h/d)² = (0.15/0.0889)²
    row = dict(reo=0.2, ci_low=0.05, ci_high=0.35, reo_threshold=1 / 9, verdict_80pct="inconclusive")
    s = settle_verdict(row, ["a", "b"], np.array([0.3, 0.2]), np.array([0.1, 0.1]), 100, 100_000, 0)
    f = (0.15 / (0.2 - 1 / 9)) ** 2
    assert (s["rec_to_settle"], s["rand_to_settle"]) == (math.ceil(100 * f), math.ceil(100_000 * f))
    assert "more random traffic alone cannot narrow it enough with 100 default rows a day" in s["settle_note"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--epsilon", "0"], "Invalid value for --epsilon: 0.0 is not a positive number"),
        (["--epsilon", "nan"], "Invalid value for --epsilon: nan is not a positive number"),
        (["--delta", "1"], "Invalid value for --delta: 1.0 is not a probability in (0, 1)"),
        (["--rec-rate", "2"], "Invalid value for --rec-rate: 2.0 is not a rate in (0, 1]"),
        (["--target-se", "-1"], "Invalid value for --target-se: -1.0 is not a positive number"),  # was read as 1
        (["--P", "0.01,1.5", "--Q", "0.1,0.2"], "Invalid value for --P: 1.5: a rate is a number in [0, 1]"),
        (["--P", "nan,0.1", "--Q", "0.1,0.2"], "Invalid value for --P: nan: a rate is a number in [0, 1]"),
    ],
)
def test_plan_refuses_what_the_theorems_do_not_take_naming_the_option(args, message):
    """Each was a raw traceback (exit 4), or volumes for rates above 1, before."""
    base = ["plan", "--P", "0.01,0.05", "--Q", "0.1,0.2"]
    res = CliRunner().invoke(app, base + args, env={"COLUMNS": "200"})
    assert res.exit_code == 2 and message in " ".join(res.output.split()) and "Traceback" not in res.output
