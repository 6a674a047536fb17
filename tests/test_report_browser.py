"""The report a product manager reads (issue 41 item 6), rendered from
hand-made rows and checked in headless Chromium (a screenshot of each is
kept): it opens with one sentence per arm × attribute, keeps the notation in
a glossary, colours improvements and harms differently, draws a single day
as points with intervals and explains a rejected parity test beside an
inconclusive verdict. Without Chromium the browser test fails where a
browser is required (FAIRMON_REQUIRE_BROWSER=1, CI), else skips."""

from __future__ import annotations

import datetime as dt
import re
import subprocess

import polars as pl
import pytest

from fairmon.pipelines.report.report import render_report
from fairmon.pipelines.report.report_data import ReportData

D = dt.date(2026, 2, 2)


def _reo(ds, arm, reo, lo, hi, verdict, p=1e-9, attribute="creator", K=2) -> dict:
    return dict(ds=ds, arm=arm, attribute=attribute, K=K, reo=reo, se=0.02, ci_low=lo, ci_high=hi, n_rec=9000)| dict(
        n_rand=4000, ci_method="delta", level=0.95, reo_bc=reo, parity_p_value=p, reo_threshold=1 / 9,
        verdict_80pct=verdict, n_small_groups=0, look_ahead=False, reason=None,
    )  # fmt: skip


def _grp(ds, arm, group, du, lo, hi, attribute="creator") -> dict:
    return dict(ds=ds, arm=arm, attribute=attribute, group=group, delta_U=du, ci_low=lo, ci_high=hi)


def _ab(ds, treatment, metric, diff, lo, hi, q) -> dict:
    return dict(
        ds=ds, attribute="creator", control="control", treatment=treatment, metric=metric, method="delta"
    ) | dict(diff=diff, se=0.02, ci_low=lo, ci_high=hi, p_value=q / 2, q_value=q, level=0.95, reason=None)


def _data(days: list[dt.date]) -> ReportData:
    reo, grp, ab = [], [], []
    for ds in days:
        reo += [
            _reo(ds, "control", 0.56, 0.52, 0.60, "exceeds"),
            _reo(ds, "new_ranker", 0.05, 0.01, 0.09, "within"),
            _reo(ds, "worse", 0.70, 0.66, 0.74, "exceeds"),
            _reo(ds, "control", 0.26, 0.0, 0.29, "inconclusive", p=0.044, attribute="jacket", K=3),
        ]
        grp += [
            _grp(ds, "control", "star", 0.56, 0.50, 0.62),
            _grp(ds, "control", "new", -0.56, -0.62, -0.50),
            _grp(ds, "new_ranker", "star", 0.05, -0.01, 0.11),
            _grp(ds, "new_ranker", "new", -0.05, -0.11, 0.01),
            _grp(ds, "worse", "star", 0.7, 0.66, 0.74),
            _grp(ds, "worse", "new", -0.7, -0.74, -0.66),
        ]
        grp += [
            _grp(ds, "control", g, du, du - 0.3, du + 0.3, "jacket") for g, du in (("a", 0.3), ("b", -0.1), ("c", -0.2))
        ]
        ab += [
            _ab(ds, "new_ranker", "reo", -0.51, -0.55, -0.47, 1e-6),
            _ab(ds, "new_ranker", "delta_U:star", -0.51, -0.55, -0.47, 1e-6),
            _ab(ds, "worse", "reo", 0.14, 0.10, 0.18, 1e-4),
            _ab(ds, "worse", "reo", 0.14, float("nan"), float("nan"), float("nan"))
            | dict(method="delta_paper", reason="delta_paper assumes independent rows"),
        ]
    excluded = pl.DataFrame(schema={"ds": pl.Date, "reasons": pl.String})
    empty = pl.DataFrame()
    frames = [pl.DataFrame(reo), pl.DataFrame(grp), excluded, empty, days, pl.DataFrame(ab), empty, empty]
    return ReportData(days[0], days[-1], *frames[:2], frames[2], frames[3], frames[4], *frames[5:], {})


def _render(chromium: str, html, png, profile) -> str:
    """The page's text after Chromium rendered it (and a screenshot)."""
    common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={profile}"]
    subprocess.run(
        [*common, "--window-size=1200,3000", f"--screenshot={png}", html.as_uri()],
        check=True,
        capture_output=True,
        timeout=120,
    )
    dom = subprocess.run([*common, "--dump-dom", html.as_uri()], check=True, capture_output=True, timeout=120)
    return dom.stdout.decode()


def _text(dom: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", dom))


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_the_report_opens_in_plain_words_in_headless_chromium(tmp_path, find_chromium):
    chromium = find_chromium()
    one = tmp_path / "one_day.html"
    one.write_text(render_report(_data([D])), encoding="utf-8")
    many = tmp_path / "two_days.html"
    many.write_text(render_report(_data([D - dt.timedelta(days=1), D])), encoding="utf-8")
    dom = _render(chromium, one, tmp_path / "one_day.png", tmp_path / "profile")
    assert (tmp_path / "one_day.png").stat().st_size > 20_000
    text = _text(dom)
    # the opening: one sentence per arm × attribute, control first
    head = text[text.index("In short") : text.index("At a glance")]
    assert head.index("arm control favours star (+56 % against an even share): REO 0.56, above the 0.111 line") < (
        head.index("arm new_ranker")
    )
    assert "It lowers REO against control: −0.51 [−0.55, −0.47], an improvement." in head
    assert "It raises REO against control: +0.14 [+0.10, +0.18], a harm." in head
    assert "The parity test rejects equal utilities (p = 0.044), but the REO interval reaches 0" in head
    # the counter reads each arm and attribute on its own
    assert "day × arm × attribute" not in text
    assert re.search(r"At a glance: each arm and attribute on its own .*? control creator exceeds 1 0 0 0 1", text)
    # A/B rows: an improvement and a harm look different
    assert re.search(r'<tr class="ab-improvement">\s*<td>creator</td><td>control → new_ranker</td>\s*<td>REO', dom)
    assert re.search(r'<tr class="ab-harm">\s*<td>creator</td><td>control → worse</td>', dom)
    assert re.search(
        r'<tr class="ab-improvement">\s*<td>creator</td><td>control → new_ranker</td>\s*<td>ΔU of group star', dom
    )
    # a method without any interval is one line, not rows of nan
    assert "Method delta_paper is left out: it has no interval for these data (delta_paper assumes" in text
    assert "<td>delta_paper</td>" not in dom
    # notation in the glossary, no paper jargon in the text
    assert "Glossary" in text and "ΔU_k Group k's utility against the mean of all groups" in text
    main = text[: text.index("Glossary")]
    assert "seed 0" not in main and "App. " not in main and "docs/tables.md" not in text
    # a single day: points with intervals, not one-point time series
    assert "REO on the one published day" in text and "REO by attribute and arm, 2026-02-02" in text
    assert "Daily REO by arm" not in text
    text2 = _text(_render(chromium, many, tmp_path / "two_days.png", tmp_path / "profile"))
    assert "Daily REO by arm, attribute 'creator'" in text2 and "REO by attribute and arm" not in text2
    print(f"screenshots for review: {tmp_path}")
