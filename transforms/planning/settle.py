"""What settles an inconclusive REO verdict: the traffic that would bring a
``reo`` row's interval to one side of its line, and the rows its small
groups need to leave the "too small" state. ``fairmon plan`` marks the
rows of its traffic table with it, so the report's "fairmon plan says how
much" points at a row and a number.

Sources: seed 001 Algorithm 1 (the delta-method variance of REO,
Var = Σ_j g_j²(1/(Q_j n_rec) + 1/(P_j n_rand)), DESIGN §4.1 compact form) and
App. E (traffic volumes); DESIGN §4.1 (verdicts from the interval, small
groups below ``min_expected_positives``)."""

from __future__ import annotations

import math

import numpy as np

from fairmon.transforms.planning.traffic import random_volume_for_reo_se, reo_se_for_volume


def _finite(x) -> bool:
    return x is not None and isinstance(x, int | float) and math.isfinite(x)


def _rows(x: float) -> str:
    return f"{x:,.0f}"


def settle_verdict(
    row: dict | None,
    groups: list[str],
    Q: np.ndarray,
    P: np.ndarray,
    n_rec: int,
    n_rand: int,
    minimum: float,
) -> dict:
    """The traffic that settles the verdict of one ``reo`` row (``row``:
    reo, ci_low, ci_high, reo_threshold, verdict_80pct; None when the day
    has no row) whose groups ``groups`` have shares Q (default traffic), P
    (random traffic), shapes (K,), in n_rec default rows (one day) and
    n_rand random rows (the window).

    Interval: the half-width h on the side facing the line must shrink
    below the distance d = |REO − line|. Assuming the estimate stays where
    it is and h scales with SE(REO), the target is SE_now · d/h; the random
    rows for it at today's default rows invert Algorithm 1's variance
    (:func:`random_volume_for_reo_se`). When default traffic alone keeps
    the SE above the target, both traffics must grow by (h/d)². A group
    with fewer than ``minimum`` positives (n·Q_k or n·P_k) needs
    ⌈minimum / Q_k⌉ default or ⌈minimum / P_k⌉ random rows.

    Returns {verdict (str or None), settles (True only for an inconclusive
    verdict), rand_to_settle (random rows in the window, float; inf when no
    random volume suffices; None when nothing is to settle), rec_to_settle
    (default rows a day, likewise), settle_note (plain words, None when
    nothing is to settle)}. Raises nothing: undefined inputs give inf."""
    verdict = (row or {}).get("verdict_80pct")
    out = {"verdict": verdict, "settles": False, "rand_to_settle": None, "rec_to_settle": None, "settle_note": None}
    if verdict != "inconclusive":
        return out
    reo, lo, hi = row.get("reo"), row.get("ci_low"), row.get("ci_high")
    line = row.get("reo_threshold") if _finite(row.get("reo_threshold")) else 1 / 9
    Q, P = np.asarray(Q, float), np.asarray(P, float)
    rand, rec, words = float(n_rand), float(n_rec), []
    if _finite(reo) and _finite(lo) and _finite(hi):
        d, h = abs(line - reo), (hi - reo if reo <= line else reo - lo)
        side = "below" if reo <= line else "above"
        where = f"REO {reo:.3f}, interval [{lo:.3f}, {hi:.3f}] reaches both sides of the {line:.3f} line"
        if h >= d:  # the width, not only small groups, keeps it inconclusive
            rand, rec, text = _width(
                Q, P, n_rec, n_rand, d, h, f"if REO stays near {reo:.3f}, the interval lies wholly {side} the line"
            )
            words.append(f"{where}; {text}")
        else:
            words.append(
                f"REO {reo:.3f}, interval [{lo:.3f}, {hi:.3f}] is {side} the {line:.3f} line, but small groups "
                "keep the verdict inconclusive"
            )
    rand_small, rec_small, small_words = _small_groups(groups, Q, P, n_rec, n_rand, minimum)
    words += small_words
    rand, rec = max(rand, rand_small), max(rec, rec_small)
    out.update(settles=True, rand_to_settle=rand, rec_to_settle=rec, settle_note="; ".join(words) or None)
    return out


def _width(Q: np.ndarray, P: np.ndarray, n_rec: int, n_rand: int, d: float, h: float, goal: str):
    """(random rows, default rows, words ending with ``goal``'s sentence) that
    shrink the facing half-width h below d, the estimate assumed to stay
    (see :func:`settle_verdict`)."""
    if not d > 0:
        return math.inf, math.inf, "the estimate sits on the line: no traffic settles it unless the estimate moves"
    se_now, _ = reo_se_for_volume(Q, P, n_rec, n_rand)
    if not (np.isfinite(se_now) and se_now > 0 and h > 0):
        return math.inf, math.inf, "its SE cannot be computed from the counts"
    target = se_now * d / h * (1 - 1e-9)  # strictly inside: the verdict needs the bound past the line
    need = random_volume_for_reo_se(Q, P, n_rec, target)
    if np.isfinite(need):
        return (
            max(need, float(n_rand)),
            float(n_rec),
            (f"{goal} with about {_rows(need)} random rows in the window (now {_rows(n_rand)})"),
        )
    f = (h / d) ** 2
    rec, rand = math.ceil(n_rec * f), math.ceil(n_rand * f)
    return (
        float(rand),
        float(rec),
        (
            f"more random traffic alone cannot narrow it enough with {_rows(n_rec)} default rows a day: "
            f"{goal} with both traffics ×{f:.1f} ({_rows(rec)} default rows a day, {_rows(rand)} random rows "
            "in the window)"
        ),
    )


def _small_groups(groups: list[str], Q: np.ndarray, P: np.ndarray, n_rec: int, n_rand: int, minimum: float):
    """(random rows, default rows, words) that give every group at least
    ``minimum`` positives in both traffics (DESIGN §4.1 small groups): per
    traffic, the rows its smallest group's share needs, ⌈minimum / share⌉,
    with the small groups named (fewest positives first, at most five)."""
    need = {"random": 0.0, "default": 0.0}
    words = []
    for kind, shares, n, per in (("random", P, n_rand, "in the window"), ("default", Q, n_rec, "a day")):
        small = sorted((share * n, g, share) for g, share in zip(groups, shares) if share * n < minimum * (1 - 1e-12))
        if not small:
            continue
        share = small[0][2]
        need[kind] = math.ceil(minimum / share * (1 - 1e-12)) if share > 0 else math.inf
        named = ", ".join(f"{g!r} {pos:.0f}" for pos, g, _ in small[:5]) + (", …" if len(small) > 5 else "")
        rows = f"about {_rows(need[kind])} {kind} rows {per}" if math.isfinite(need[kind]) else f"no {kind} volume"
        words.append(
            f"{len(small)} group(s) have fewer than min_expected_positives = {minimum:g} positives in {kind} "
            f"traffic ({named}): {rows} give each {minimum:g}"
        )
    return need["random"], need["default"], words
