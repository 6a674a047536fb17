"""The demo's explanations beside its numbers: why its
daily intervals hit or miss the truth together, with the coverage over
independent pools beside them; why a private audit's decision near α can
flip between runs; which interval methods are undefined for the data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from fairmon.transforms.simulators.coverage import independent_pool_coverage

#: Simulated independent days per arm for the coverage reference (about 1 ms of CPU each with K = 2).
COVERAGE_REPS = 250


def coverage_lines(reo_rows: list[dict], truth_groups: Path, arm: str = "control", seed: int = 0) -> list[str]:
    """Lines on the daily REO intervals of ``reo_rows`` (published ``reo``
    rows of every arm and day) against the simulator's truth (``truth_groups``
    CSV: ds, arm, attribute, group, Q, P): how many of ``arm``'s days and of
    all day × arm rows contain the true REO, why they move together (the days
    read the same random pools), and the coverage of the same interval over
    :data:`COVERAGE_REPS` simulated days per arm, each with an independent
    pool of the same sizes (:func:`independent_pool_coverage`, seeded)."""
    truth = pl.read_csv(truth_groups).sort("ds", "arm", "attribute", "group")
    rng = np.random.default_rng(seed)
    hits = {True: 0, False: 0}
    own = {True: 0, False: 0}
    reps = covered = 0
    last: dict[str, dict] = {}
    for r in reo_rows:
        g = truth.filter(
            (pl.col("ds") == str(r["ds"])) & (pl.col("arm") == r["arm"]) & (pl.col("attribute") == r["attribute"])
        )
        if g.is_empty() or r["ci_low"] != r["ci_low"]:
            continue
        U = (g.get_column("Q") / g.get_column("P")).to_numpy()
        true_reo = float(U.std() / U.mean())
        inside = r["ci_low"] <= true_reo <= r["ci_high"]
        hits[inside] += 1
        if r["arm"] == arm:
            own[inside] += 1
        last[r["arm"]] = {"Q": g.get_column("Q").to_numpy(), "P": g.get_column("P").to_numpy(), **r}
    for r in last.values():
        c, d = independent_pool_coverage(r["Q"], r["P"], r["n_rec"], r["n_rand"], COVERAGE_REPS, rng, r["level"])
        covered, reps = covered + c, reps + d
    if not reps:
        return []
    level = next(iter(last.values()))["level"]
    sizes = ", ".join(f"{a} {r['n_rec']} / {r['n_rand']}" for a, r in sorted(last.items()))
    return [
        f"Intervals that contain the true REO: {own[True]} of {own[True] + own[False]} days of the {arm} arm, "
        f"{hits[True]} of {hits[True] + hits[False]} day × arm rows.",
        "These days are not independent draws: each day's window reads the same 7-day random pools, so one "
        "pool's sampling error shifts every day's estimate the same way, and the days hit or miss the truth "
        "together. Their share is not the interval's coverage.",
        f"Coverage over independent pools: {covered} of {reps} simulated days ({100 * covered / reps:.1f} %, "
        f"nominal {100 * level:g} %) with a fresh pool each, same sizes (default / random rows: {sizes}).",
    ]


def dp_edge_note(release: dict) -> str | None:
    """A sentence when α sits at the edge of a private release's FG interval
    (within 0.02 or a tenth of its width): the noise is drawn afresh on each
    release, so the decision can flip between runs. None otherwise. Source:
    seed 000 §5 (the noisy histograms), DESIGN §4.6 (the interval decision)."""
    lo, hi = release["fg_interval"]
    alpha, decision = release["alpha"], release["decision"]
    near_hi, near_lo = abs(alpha - hi), abs(alpha - lo)
    margin = min(near_hi, near_lo)
    if margin >= max(0.02, 0.1 * (hi - lo)):
        return None
    if decision == "inconclusive":
        other = "fair" if near_hi <= near_lo else "unfair"
    else:
        other = "inconclusive"
    edge = "upper" if near_hi <= near_lo else "lower"
    return (
        f"α = {alpha:g} lies {margin:.3f} from the {edge} edge of the FG interval [{lo:.3f}, {hi:.3f}]: the noise is "
        f"random and drawn afresh for each release, so another run moves EFG and the interval and can turn "
        f"'{decision}' into '{other}'. A decision that holds needs a margin: a larger ε or more people per group "
        "narrow the interval."
    )


def undefined_methods_note(rows: list[dict], methods: dict[str, str]) -> str | None:
    """Which interval ``methods`` ({method: printed column}) have no finite
    interval in ``rows`` (``reo_ab`` rows), with the first row's reason; None
    when every method has one. The printed table leaves those columns out."""
    out = []
    for m, column in methods.items():
        rs = [r for r in rows if r["method"] == m]
        if rs and not any(r["ci_low"] == r["ci_low"] for r in rs):
            out.append(f"{column} ({m}): {rs[0].get('reason') or 'undefined for these data'}")
    return ("Not shown, undefined for these data: " + "; ".join(out) + ".") if out else None
