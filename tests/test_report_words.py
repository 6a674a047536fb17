"""The report's opening sentences (issue 41 item 6), on hand-made rows: the
favoured group, REO against the line, how sure, the A/B change read as an
improvement or a harm, what to do, and why a rejected parity test stands
beside an inconclusive verdict."""

from __future__ import annotations

import datetime as dt

import polars as pl

from fairmon.pipelines.report.report_words import (
    GLOSSARY,
    ab_effect,
    headline_sentences,
    latest_with_groups,
    parity_explanation,
)

D = dt.date(2026, 2, 1)
NAN = float("nan")


def _reo(arm: str, reo: float, lo: float, hi: float, verdict: str, **kw) -> dict:
    base = dict(ds=D, arm=arm, attribute="creator", K=2, reo=reo, ci_low=lo, ci_high=hi, level=0.95)
    base |= dict(reo_threshold=1 / 9, verdict_80pct=verdict, parity_p_value=1e-9, reason=None, n_small_groups=0)
    return base | dict(ci_method="delta") | kw


def _grp(arm: str, group: str, du: float, lo: float, hi: float, attribute: str = "creator") -> dict:
    return dict(ds=D, arm=arm, attribute=attribute, group=group, delta_U=du, ci_low=lo, ci_high=hi)


def _ab(treatment: str, diff: float, lo: float, hi: float, q: float, method: str = "delta") -> dict:
    return dict(ds=D, attribute="creator", control="control", treatment=treatment, metric="reo", method=method) | dict(
        diff=diff, ci_low=lo, ci_high=hi, q_value=q
    )


def test_a_production_disparity_and_a_treatment_that_removes_it():
    reo = pl.DataFrame(
        [
            _reo("control", 0.56, 0.52, 0.60, "exceeds"),
            _reo("new_ranker", 0.05, 0.01, 0.09, "within"),
            _reo("worse", 0.70, 0.66, 0.74, "exceeds"),
            _reo("control", 0.3, 0.2, 0.4, "exceeds", ds=D - dt.timedelta(days=1)),  # not the latest day
        ]
    )
    groups = pl.DataFrame(
        [
            _grp("control", "star", 0.56, 0.50, 0.62),
            _grp("control", "new", -0.56, -0.62, -0.50),
            _grp("new_ranker", "star", 0.05, -0.01, 0.11),
            _grp("new_ranker", "new", -0.05, -0.11, 0.01),
        ]
    )
    ab = pl.DataFrame(
        [
            _ab("new_ranker", -0.51, -0.55, -0.47, 1e-6),
            _ab("new_ranker", -0.51, -0.60, -0.40, 1e-5, method="bootstrap"),  # not the arm's own method
            _ab("worse", 0.14, 0.10, 0.18, 1e-4),
        ]
    )
    out = {h["arm"]: h for h in headline_sentences(reo, groups, ab)}
    assert list(out) == ["control", "new_ranker", "worse"]  # the latest day, control first
    c = out["control"]
    assert c["text"].startswith(
        "By creator, arm control favours star (+56 % against an even share): REO 0.56, above the 0.111 line "
        "(80 % rule), its 95 % interval [0.520, 0.600] wholly above it. Act:"
    )
    assert (c["verdict"], c["tone"], c["ab"]) == ("exceeds", "harm", None)
    n = out["new_ranker"]
    assert (
        "arm new_ranker favours no group clearly: REO 0.05, below the 0.111 line (80 % rule), its 95 % interval "
        "[0.010, 0.090] wholly at or below it." in n["text"]
    )
    assert "It lowers REO against control: −0.51 [−0.55, −0.47], an improvement." in n["text"]
    assert "On fairness it can ship" in n["text"] and (n["ab"], n["tone"]) == ("improvement", "good")
    w = out["worse"]
    assert "It raises REO against control: +0.14 [+0.10, +0.18], a harm." in w["text"]
    assert "Do not ship this treatment" in w["text"] and w["ab"] == "harm"


def test_inconclusive_with_a_rejected_parity_test_says_why():
    row = _reo("all", 0.26, 0.0, 0.29, "inconclusive", K=16, reo_threshold=1 / 9, parity_p_value=0.044)
    row |= dict(attribute="jacket", n_small_groups=3)
    groups = pl.DataFrame(
        [_grp("all", "bomber", 0.43, 0.02, 0.85, "jacket"), _grp("all", "vest", 0.1, -0.3, 0.5, "jacket")]
    )
    (h,) = headline_sentences(pl.DataFrame([row]), groups, pl.DataFrame())
    assert h["text"].startswith(
        "By jacket, the system favours bomber (+43 % against an even share): REO 0.26, interval [0.000, 0.290] "
        "reaches both sides of the 0.111 line (configured reo_threshold)."
    )
    assert "Not sure either way: some groups are too small" in h["text"]
    assert "The parity test rejects equal utilities (p = 0.044), but the REO interval reaches 0" in h["text"]
    assert (h["verdict"], h["tone"]) == ("inconclusive", "warn")
    # parity not rejected, or an interval that excludes 0: nothing to explain
    assert parity_explanation(row | {"parity_p_value": 0.2}) is None
    assert parity_explanation(row | {"ci_low": 0.01}) is None


def test_an_intersection_says_it_is_one_and_comes_last():
    reo = pl.DataFrame(
        [
            _reo("all", 0.76, 0.6, 0.83, "exceeds", attribute="gender×user_gender", K=4),
            _reo("all", 0.02, 0.0, 0.09, "within", attribute="user_gender", parity_p_value=0.9),
        ]
    )
    first, second = headline_sentences(reo, pl.DataFrame(), pl.DataFrame())
    assert first["text"].startswith("By user_gender, the system favours no group clearly: REO 0.02, below the 0.11")
    assert "No action needed." in first["text"]
    assert second["text"].startswith("By the intersection gender×user_gender (crossed groups, smaller cells),")
    assert (
        "above the 0.111 line (configured reo_threshold), its 95 % interval [0.600, 0.830] wholly above it"
        in (second["text"])
    )


def test_undefined_reo_names_the_reason():
    row = _reo("all", NAN, NAN, NAN, "undefined", reason="Q_k = 0 for group(s) new", parity_p_value=NAN)
    (h,) = headline_sentences(pl.DataFrame([row]), pl.DataFrame(), pl.DataFrame())
    assert h["text"] == "By creator, the system: REO is undefined. Fix the input first: Q_k = 0 for group(s) new."
    assert h["tone"] == "muted"


def test_ab_effect_reads_reo_and_delta_u_rows():
    assert ab_effect("reo", -0.55, -0.47, 1e-6, None) == "improvement"
    assert ab_effect("reo", 0.10, 0.18, 0.01, None) == "harm"
    assert ab_effect("reo", -0.1, 0.05, 0.3, None) == "no clear change"
    assert ab_effect("reo", -0.3, -0.1, 0.2, None) == "no clear change"  # q ≥ 0.05: not after multiple comparisons
    assert ab_effect("reo", NAN, NAN, NAN, None) == "undefined"
    # control ΔU_0 = −0.3 (group 0 disfavoured): D in (0, 0.6) moves it towards 0
    assert ab_effect("delta_U:0", 0.1, 0.4, 1e-3, -0.3) == "improvement"
    assert ab_effect("delta_U:0", -0.2, -0.1, 1e-3, -0.3) == "harm"  # further below 0
    assert ab_effect("delta_U:0", 0.7, 0.9, 1e-3, -0.3) == "harm"  # overshoots: |−0.3 + 0.7| > 0.3
    assert ab_effect("delta_U:0", 0.4, 0.8, 1e-3, -0.3) == "changed"  # part of it overshoots
    assert ab_effect("delta_U:1", -0.4, -0.1, 1e-3, 0.3) == "improvement"
    assert ab_effect("delta_U:1", 0.1, 0.2, 1e-3, None) == "changed"  # no control value to compare with


def test_glossary_defines_each_term_once():
    terms = [t for t, _ in GLOSSARY]
    assert len(terms) == len(set(terms))
    assert {"utility U_k", "ΔU_k", "REO", "the line (reo_threshold)", "parity test", "q-value"} <= set(terms)


def test_a_no_clear_change_near_parity_says_why_its_interval_is_wide():
    """A D_REO projection row (an arm near parity) reads as 'no clear change' with the reason in plain words,
    not beside per-group improvements without a word (the newcomer's contradiction)."""
    from fairmon.pipelines.report.report_words import ab_phrase

    ab = {
        "control": "control",
        "diff": -0.20,
        "ci_low": -0.29,
        "ci_high": 0.02,
        "q_value": 0.3,
        "reason": "near parity in arm(s) treatment (curvature ratio 0): ...",
    }
    text, effect = ab_phrase(ab)
    assert effect == "no clear change"
    assert text == (
        " Against control, REO changes by −0.20 [−0.29, +0.02], no clear change (an arm is near parity, "
        "where REO's interval must be wide to be right: the A/B table's per-group changes, ΔU_k, are "
        "sharper)."
    )
    text, _ = ab_phrase({**ab, "reason": ""})
    assert text == " Against control, REO changes by −0.20 [−0.29, +0.02], no clear change."


def test_latest_day_pairs_each_arm_and_attribute_with_its_own_groups():
    """latest_with_groups: the latest day's reo rows in their order, each with the reo_group rows of
    that day, arm and attribute only (an older day's and another attribute's rows are left out);
    no group rows for an empty reo_group; (None, []) without reo rows."""
    old = D - dt.timedelta(days=1)
    reo = pl.DataFrame(
        [_reo("b", 0.2, 0.1, 0.3, "exceeds"), _reo("a", 0.1, 0, 0.2, "within"), _reo("a", 1, 0, 2, "exceeds", ds=old)]
    )
    groups = pl.DataFrame(
        [
            _grp("a", "x", 0.1, 0.0, 0.2),
            _grp("a", "y", -0.1, -0.2, 0.0),
            _grp("a", "x", 0.9, 0.8, 1.0, attribute="other"),
            _grp("b", "x", 0.2, 0.1, 0.3) | dict(ds=old),
        ]
    )
    day, pairs = latest_with_groups(reo, groups)
    assert day == D
    assert [(r["arm"], r["reo"]) for r, _ in pairs] == [("b", 0.2), ("a", 0.1)]
    assert pairs[0][1] == []
    assert [(g["group"], g["delta_U"]) for g in pairs[1][1]] == [("x", 0.1), ("y", -0.1)]
    assert [g for _, g in latest_with_groups(reo, pl.DataFrame())[1]] == [[], []]
    assert latest_with_groups(reo.clear(), groups) == (None, [])


def test_p_values_read_alike_in_tables_and_sentences():
    """Two digits, "< 0.001" below, everywhere (the verdict paragraph said "p = 1.1e-17" above a table's "< 0.001")."""
    from fairmon.pipelines.report.report_data import reo_verdict_paragraphs
    from fairmon.pipelines.report.report_words import p_words, pfmt

    assert [pfmt(x) for x in (1.1e-17, 0.0, 0.00094, 0.0441, None, float("nan"))] == [
        "< 0.001", "< 0.001", "< 0.001", "0.044", "nan", "nan"
    ]  # fmt: skip
    assert (p_words(1.1e-17), p_words(0.0441)) == ("p < 0.001", "p = 0.044")
    row = {
        "ds": dt.date(2026, 1, 1), "arm": "all", "attribute": "g", "reo": 0.3, "ci_low": 0.2, "ci_high": 0.4,
        "reo_threshold": 1 / 9, "verdict_80pct": "exceeds", "parity_p_value": 1.1e-17, "level": 0.95, "K": 2,
    }  # fmt: skip
    groups = pl.DataFrame(
        [{k: row[k] for k in ("ds", "arm", "attribute")} | {"group": g, "delta_U": d, "ci_low": d - 0.1,
          "ci_high": d + 0.1} for g, d in (("a", 0.15), ("b", -0.15))]
    )  # fmt: skip
    (para,) = reo_verdict_paragraphs(pl.DataFrame([row]), groups)
    text = para["text"]
    assert "Parity test (all U_k equal): p < 0.001, parity rejected." in text
