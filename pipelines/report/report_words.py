"""The report's opening in plain words: one sentence per arm × attribute
(what is favoured, by how much, its interval, what to do), the reading of an A/B
row as an improvement or a harm, why a rejected parity test can stand beside
an inconclusive verdict, and the glossary that keeps the notation out of
the sentences. Pure functions of published rows (``reo``, ``reo_group``,
``reo_ab``); the report (pipelines/report/report.py) only renders them.

Sources: seed 001 eqs. 3, 4, 7, 19 (U_k, ΔU_k, REO), Algorithm 2 (A/B
differences); DESIGN §4.1 (interval verdicts, the parity test)."""

from __future__ import annotations

import polars as pl


def pfmt(x: float | None) -> str:
    """A p- or q-value as the report and the command line show it: two significant digits, "< 0.001" below
    (a bootstrap's 0 means no replicate crossed, not a p of 0; a normal tail's 1e-12 reads no better), "nan"
    when missing (None or NaN)."""
    if x is None or x != x:
        return "nan"
    return "< 0.001" if x < 0.001 else f"{x:.2g}"


def p_words(x: float) -> str:
    """A p-value in a sentence, as :func:`pfmt` rounds it: ``p < 0.001`` or ``p = 0.034``."""
    text = pfmt(x)
    return f"p {text}" if text.startswith("<") else f"p = {text}"


#: Each term the report's tables and figures use, defined once (the sentences above them avoid the symbols).
GLOSSARY: tuple[tuple[str, str], ...] = (
    ("arm", "A variant of the system served to part of the traffic; 'control' is the production variant an A/B "
     "test compares the others (treatments) with; 'all' when there is no A/B test."),
    ("default / random traffic", "Default traffic is what the system recommended; random traffic is a small "
     "share served at random, which shows how often each group's items would be liked without the system's "
     "choice."),
    ("utility U_k", "How much more often the system recommends group k's liked items than random traffic "
     "shows them liked: U_k = Q_k / P_k, Q_k the liked recommended rows of group k's items over all "
     "recommended rows, P_k the liked random rows of group k's items over all random rows (the ranking's "
     "true-positive rate for the group, up to a constant)."),
    ("near parity", "When the groups' utilities are nearly equal, REO (a spread, never below 0) bends sharply "
     "at 0, and the usual intervals fail there; fairmon then uses a parity-aware interval that stays right "
     "at 0, and an A/B difference of REO becomes the difference of the two arms' intervals, each at 97.5 % "
     "(Bonferroni), so the pair holds at 95 %: wider, never a false change. The 'curvature ratio' in a row's "
     "reason measures how strongly REO bends over the interval."),
    ("ΔU_k", "Group k's utility against the mean of all groups: U_k / mean(U) − 1; +20 % means the group gets "
     "20 % more than an even share."),
    ("REO", "Ranking-based equal opportunity: the spread of the utilities, std(U) / mean(U); 0 is parity. "
     "Utilities of 0.8 and 1 (the 80 % rule) give REO = 1/9 ≈ 0.111."),
    ("the line (reo_threshold)", "The REO above which a disparity counts: 1/9 for two groups (the 80 % rule); "
     "for more groups the configured reo_threshold (default 1/9)."),
    ("verdict", "Read from the interval, never from the estimate alone: 'exceeds' when the whole interval lies "
     "above the line, 'within' when it lies at or below it, 'inconclusive' when it reaches both sides or a "
     "group has too few positives, 'undefined' when a utility cannot be computed."),
    ("95 % interval", "REO's confidence interval at the report's level: a verdict of 'exceeds' or 'within' "
     "needs all of it on one side of the line (a statement about the interval, not a probability of REO)."),
    ("parity test", "A test of 'every U_k is equal' (a Wald test weighing each group's ΔU_k by its "
     "precision); p below 0.05 rejects equal utilities."),
    ("D_REO (A/B difference)", "REO of the treatment minus REO of the control on the same day. Below 0: the "
     "treatment is fairer (an improvement); above 0: less fair (a harm)."),
    ("ΔU_k change", "The A/B difference of one group's ΔU_k; an improvement when it moves the control's ΔU_k "
     "towards 0 over its whole interval, a harm when it moves it away."),
    ("q-value", "Benjamini–Hochberg adjusted p-value over the day's tests; q < 0.05 survives the multiple "
     "comparisons."),
    ("intersection a×b", "Groups formed by crossing two attributes (e.g. an item attribute with a user "
     "attribute); its cells are smaller, so its verdicts are read apart from the single attributes'."),
    ("look-ahead", "The day's random-traffic pool reaches past the day (pool_policy = overlap)."),
    ("sources", "Dong et al. 2024 (REO with missing labels: eqs. 3, 4, 7, 19; A/B: Algorithm 2; exposure "
     "parity and user-side precision: App. H; stage-wise REO: App. I.4); Lum et al. (implied thresholds); "
     "Curmei, Dean and Recht 2021 (reachability); Do et al. 2022 (envy-freeness: OCEF certificates, the AUDIT "
     "algorithm)."),
)  # fmt: skip

#: The A/B readings and the class the report colours them with.
AB_TONE = {"improvement": "good", "harm": "harm", "no clear change": "muted", "changed": "warn", "undefined": "muted"}


def _finite(x) -> bool:
    return x is not None and x == x and abs(x) != float("inf")


def _signed(x: float) -> str:
    return f"{x:+.2f}".replace("-", "−")


def ab_effect(
    metric: str, ci_low: float | None, ci_high: float | None, q_value: float | None, control_value: float | None
) -> str:
    """The reading of one ``reo_ab`` row: ``improvement``, ``harm``,
    ``no clear change`` (the interval reaches 0, or q ≥ 0.05 when the row has
    a q-value), ``changed`` (a clear change whose direction towards parity the
    interval does not settle) or ``undefined`` (NaN interval).

    For ``reo`` lower is fairer (REO ≥ 0; seed 001 eq. 19). For ``delta_U:k``
    the change D applies to the control's ΔU_k = ``control_value``: an
    improvement when |ΔU_k + D| < |ΔU_k| for every D in the interval, a harm
    when > for every D in it (seed 001 eq. 7, Algorithm 2)."""
    if not (_finite(ci_low) and _finite(ci_high)):
        return "undefined"
    if (ci_low <= 0 <= ci_high) or (q_value is not None and q_value == q_value and q_value >= 0.05):
        return "no clear change"
    if metric == "reo":
        return "improvement" if ci_high < 0 else "harm"
    if not _finite(control_value) or control_value == 0:
        return "changed"
    c = control_value
    towards = (ci_low > 0 and ci_high < -2 * c) if c < 0 else (ci_high < 0 and ci_low > -2 * c)
    away = (ci_high < 0 or ci_low > -2 * c) if c < 0 else (ci_low > 0 or ci_high < -2 * c)
    return "improvement" if towards else "harm" if away else "changed"


def parity_explanation(row: dict) -> str | None:
    """Why a rejected parity test stands beside an interval that does not
    exclude parity, for one ``reo`` row; None when they agree. The Wald test
    weighs each ΔU_k by its precision, the REO interval bounds the plain spread
    std(U)/mean(U), which imprecise (small) groups widen (DESIGN §4.1)."""
    p, lo = row.get("parity_p_value"), row.get("ci_low")
    level = row.get("level") or 0.95
    if not (_finite(p) and _finite(lo)) or p >= 1 - level or lo > 0:
        return None
    return (
        f"The parity test rejects equal utilities ({p_words(p)}), but the REO interval reaches 0: the test weighs "
        "each group by how precisely it is measured, while REO is the plain spread of all groups, which the "
        "noisiest groups widen. Some difference is likely; its size is too uncertain to compare with the line."
    )


def _line_text(row: dict) -> str:
    line = row.get("reo_threshold")
    line = line if _finite(line) else 1 / 9
    return f"the {line:.3f} line" + (" (80 % rule)" if (row.get("K") or 2) <= 2 else " (configured reo_threshold)")


def _favoured(groups: list[dict]) -> str:
    clear = [g for g in groups if _finite(g.get("ci_low")) and (g["ci_low"] > 0 or g["ci_high"] < 0)]
    up = max((g for g in clear if g["ci_low"] > 0), key=lambda g: g["delta_U"], default=None)
    down = min((g for g in clear if g["ci_high"] < 0), key=lambda g: g["delta_U"], default=None)

    def name(g: dict) -> str:
        return f"group {g['group']}" if str(g["group"]).isdigit() else str(g["group"])

    if up:
        return f"favours {name(up)} ({100 * up['delta_U']:+.0f} % against an even share)".replace("-", "−")
    if down:
        return f"disfavours {name(down)} ({100 * down['delta_U']:+.0f} % against an even share)".replace("-", "−")
    return "favours no group clearly"


def ab_phrase(ab: dict | None) -> tuple[str, str | None]:
    """The A/B clause of an arm's sentence from its ``reo_ab`` D_REO row
    ``ab`` (a dict: control, diff, ci_low, ci_high, q_value, reason; None: no
    A/B row) and its reading (improvement, harm, no clear change, undefined;
    :func:`ab_effect`). A 'no clear change' whose row is the near-parity
    projection interval (DESIGN §4.3) says why it is wide. Raises nothing."""
    if ab is None:
        return "", None
    effect = ab_effect("reo", ab["ci_low"], ab["ci_high"], ab.get("q_value"), None)
    if effect == "undefined":
        return f" Against {ab['control']}, the change in REO is undefined.", effect
    change = f"{_signed(ab['diff'])} [{_signed(ab['ci_low'])}, {_signed(ab['ci_high'])}]"
    words = {
        "improvement": f"it lowers REO against {ab['control']}: {change}, an improvement",
        "harm": f"it raises REO against {ab['control']}: {change}, a harm",
        "no clear change": f"against {ab['control']}, REO changes by {change}, no clear change",
    }[effect]
    if effect == "no clear change" and "near parity" in (ab.get("reason") or ""):
        words += (
            " (an arm is near parity, where REO's interval must be wide to be right: the A/B table's "
            "per-group changes, ΔU_k, are sharper)"
        )
    return f" {words[0].upper()}{words[1:]}.", effect


def _action(verdict: str, row: dict, ab_effect_: str | None) -> str:
    if ab_effect_ == "harm":
        return "Do not ship this treatment as it stands: it is less fair than its control."
    if ab_effect_ == "improvement":
        return (
            "Better than its control but still above the line."
            if verdict == "exceeds"
            else "On fairness it can ship: below the line and fairer than its control."
            if verdict == "within"
            else "Better than its control; whether it is below the line is not yet sure."
        )
    if verdict == "exceeds":
        return (
            "Act: find which stage creates it (with post-recall traffic logged, the report's stage section "
            "shows where) and test a fix in an A/B."
        )
    if verdict == "within":
        return "No action needed."
    if verdict == "inconclusive":
        if (row.get("n_small_groups") or 0) > 0 or "small" in (row.get("reason") or ""):
            return "Not sure either way: some groups are too small; collect more traffic (fairmon plan says how much)."
        return "Not sure either way: collect more random traffic (fairmon plan says how much) before deciding."
    return f"Fix the input first: {row.get('reason') or 'REO cannot be computed'}."


def latest_with_groups(reo: pl.DataFrame, reo_group: pl.DataFrame) -> tuple[object, list[tuple[dict, list[dict]]]]:
    """The latest day in ``reo`` (rows of the ``reo`` table) and that day's
    rows, each an arm × attribute as a dict in ``reo``'s order, paired with
    its ``reo_group`` rows of the same day, arm and attribute (dicts in
    ``reo_group``'s order; none when ``reo_group`` is empty): what the
    report's sentences and paragraphs about REO (seed 001 eq. 19) and its
    groups' ΔU_k (eq. 7) read. (None, []) without ``reo`` rows."""
    if reo.is_empty():
        return None, []
    day = reo.get_column("ds").max()
    groups = reo_group.filter(pl.col("ds") == day) if not reo_group.is_empty() else None

    def of(r: dict) -> list[dict]:
        if groups is None:
            return []
        return groups.filter((pl.col("arm") == r["arm"]) & (pl.col("attribute") == r["attribute"])).to_dicts()

    return day, [(r, of(r)) for r in reo.filter(pl.col("ds") == day).to_dicts()]


def headline_sentences(reo: pl.DataFrame, reo_group: pl.DataFrame, reo_ab: pl.DataFrame) -> list[dict]:
    """One sentence per arm × attribute of the latest day in ``reo`` (rows of
    the ``reo`` table; ``reo_group`` and ``reo_ab`` rows of the same days):
    which group the arm favours (only when its ΔU_k interval excludes 0), REO
    against the line with its interval, the treatment's A/B change in REO against
    its control (``reo`` metric, the arm's own interval method), what to do,
    and why a rejected parity test does not settle an inconclusive verdict.
    Single attributes come before intersections (their name holds ×), which
    say so.

    Returns [{arm, attribute, verdict, ab (reading or None), tone, text}];
    empty without rows. Source: seed 001 eqs. 7, 19, Algorithm 2; DESIGN §4.1."""
    day, pairs = latest_with_groups(reo, reo_group)
    pairs.sort(key=lambda p: ("×" in p[0]["attribute"], p[0]["attribute"], p[0]["arm"] != "control", p[0]["arm"]))
    out = []
    for r, groups in pairs:
        ab = _ab_row(reo_ab, day, r["arm"], r["attribute"], r.get("ci_method"))
        verdict = r.get("verdict_80pct") or "undefined"
        who = "the system" if r["arm"] == "all" else f"arm {r['arm']}"
        attr = r["attribute"]
        subject = f"By {attr}" if "×" not in attr else f"By the intersection {attr} (crossed groups, smaller cells)"
        # the interval said as such: a confidence interval is not a probability that REO is on one side
        sure = f"its {100 * (r.get('level') or 0.95):g} % interval [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
        if verdict == "undefined" or not _finite(r.get("reo")):
            text = f"{subject}, {who}: REO is undefined."
        else:
            reo_txt = f"REO {r['reo']:.2f}"
            where = {
                "exceeds": f"above {_line_text(r)}, {sure} wholly above it",
                "within": f"below {_line_text(r)}, {sure} wholly at or below it",
            }.get(verdict, f"interval [{r['ci_low']:.3f}, {r['ci_high']:.3f}] reaches both sides of {_line_text(r)}")
            text = f"{subject}, {who} {_favoured(groups)}: {reo_txt}, {where}."
        ab_txt, effect = ab_phrase(ab)
        text += ab_txt + " " + _action(verdict, r, effect)
        explain = parity_explanation(r) if verdict == "inconclusive" else None
        if explain:
            text += " " + explain
        tone = {"exceeds": "harm", "within": "good", "inconclusive": "warn"}.get(verdict, "muted")
        out.append(dict(arm=r["arm"], attribute=attr, verdict=verdict, ab=effect, tone=tone, text=text))
    return out


def _ab_row(reo_ab: pl.DataFrame, day, arm: str, attribute: str, method: str | None) -> dict | None:
    """The day's ``reo`` A/B row of treatment ``arm`` for ``attribute``: the
    arm's own interval ``method`` (the reo row's ci_method) when it has a
    finite interval, else the first method (by name) that has; None when absent."""
    if reo_ab.is_empty():
        return None
    cand = reo_ab.filter(
        (pl.col("ds") == day)
        & (pl.col("treatment") == arm)
        & (pl.col("attribute") == attribute)
        & (pl.col("metric") == "reo")
    ).sort("method")
    if cand.is_empty():
        return None
    rows = sorted(cand.to_dicts(), key=lambda x: x["method"] != method)
    return next((x for x in rows if _finite(x.get("ci_low"))), rows[0])
