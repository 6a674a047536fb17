"""Benchmark: coverage of the decision intervals (issue 14 "Honest verdicts";
DESIGN §4.2-4.3, seed 002 eqs. 6, 8-12).

Threshold family — prevalence at the threshold, in windows of n rows within
d of t = 0: scores s ~ N(0, 1) restricted to |s| < d, outcomes
Y ~ Bernoulli(logistic(a + b·s)) with a = −1.5, b = 1, so the truth is
β0 = logistic(−1.5) = 0.182 and E[Y | s] is curved (the local linear fit is
biased by about 0.002, 0.006 and 0.028 at d = 0.5, 1, 3). Every regime is run
with the pipeline's default interval (``robust``) and with the paper's
``conventional`` one; ``nan_share`` counts windows answered NaN or with the
bandwidth flag (d/2 estimate off by more than the larger SE).

SDT family — labeler intervals of the implied threshold (and so of the cost
ratio, the same event) at FPR = 0.05 with FNR ∈ {0.001, 0.01, 0.1} and
about 20, 200 and 2000 gold positives (prevalence 0.1, 0.2, 0.3 of
200, 1000 and 6667 gold items). ``nan_share`` counts cells with too few gold
labels (NaN with a reason); the note gives the share with exact bounds.

Ratio family — c_a / c_b, the ratio of two groups' implied cost ratios
(seed 002 eqs. 5-6; transforms/decisions/cost_ratio.py), from two independent
windows of n_a and n_b rows with outcomes Bernoulli(logistic(a_g + s)), so
c_g = exp(−a_g) and the truth is exp(a_b − a_a); pairs of large windows, a
30-row (Wilson) window against a large one, rare events, equal thresholds
(truth 1) and a wider d, both interval kinds. ``mean_width`` is on the log
scale, log(high/low); ``nan_share`` counts pairs with no ratio (a β0 of 0) or
an unbounded side; ``bias`` is that of log(c_a/c_b).

Each row: coverage of the 95 % interval, its Monte Carlo SE, mean width
(probability scale), bias of the point estimate, nan_share, ok (coverage in
[0.93, 0.97]; ≥ 0.93 when the interval is conservative by construction — the
exact SDT bounds and the robust interval, which is widened to contain the
point estimate; or NaN/flagged in most replications) and a note.

    python bench/coverage_decisions.py [--reps 2000] [--seed 0] [--workers 2] [--family ratio]

Last line: the share of regimes that are ok, the ratio it is judged by.
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from scipy import stats

from fairmon.transforms.decisions.cost_ratio import cost_ratio_ratio
from fairmon.transforms.decisions.sdt import sdt_estimate, sdt_from_rates
from fairmon.transforms.decisions.threshold import prevalence_at_threshold

A, B = -1.5, 1.0
TRUTH_THRESHOLD = float(1 / (1 + np.exp(-A)))
WINDOWS = (30, 100, 1000, 20_000)
BANDWIDTHS = (0.5, 1.0, 3.0)
FPR = 0.05
FNRS = (0.001, 0.01, 0.1)
GOLD = ((20, 0.1), (200, 0.2), (2000, 0.3))  # (expected gold positives, prevalence)
#: Ratio regimes: (n_a, n_b, a_a, a_b, d); c_g = exp(−a_g) at β0 = logistic(a_g).
RATIO_PAIRS = (
    (1000, 1000, -1.0, -1.5, 0.5),
    (20_000, 20_000, -1.0, -1.5, 0.5),
    (30, 1000, -1.0, -1.5, 0.5),
    (100, 100, -2.5, -3.0, 0.5),
    (1000, 1000, -1.5, -1.5, 0.5),
    (1000, 1000, -1.0, -1.5, 1.0),
)
#: The largest windows are the slow ones: they run reps // SLOW_DIVISOR replications.
SLOW_DIVISOR = 4
FAMILIES = ("threshold", "sdt", "ratio")


def _row(family, regime, hits, widths, errors, nan_count, reps, conservative, note):
    k = len(hits)
    cov = float(np.mean(hits)) if k else float("nan")
    mc_se = float(np.sqrt(cov * (1 - cov) / k)) if k else float("nan")
    nan_share = nan_count / reps
    in_band = 0.93 <= cov <= 0.97 or (conservative and cov >= 0.93)
    return {
        "family": family,
        "regime": regime,
        "coverage": cov,
        "mc_se": mc_se,
        "mean_width": float(np.mean(widths)) if k else float("nan"),
        "bias": float(np.mean(errors)) if k else float("nan"),
        "nan_share": nan_share,
        "ok": bool(in_band or nan_share > 0.5),
        "note": note,
    }


def threshold_regime(n: int, d: float, ci: str, reps: int, seed: int) -> dict:
    """``reps`` windows of ``n`` rows within d of t = 0; coverage of β0 = logistic(A)."""
    rng = np.random.default_rng(seed)
    lo, hi = stats.norm.cdf(-d), stats.norm.cdf(d)
    s_all = stats.norm.ppf(rng.uniform(lo, hi, (reps, n)))
    y_all = (rng.random((reps, n)) < 1 / (1 + np.exp(-(A + B * s_all)))).astype(float)
    hits, widths, errors, nan_count, wilson, hits_unflagged = [], [], [], 0, 0, []
    for s, y in zip(s_all, y_all, strict=True):
        e = prevalence_at_threshold(s, y, 0.0, d, ci=ci)
        if np.isnan(e.ci_low):
            nan_count += 1
            continue
        covered = e.ci_low <= TRUTH_THRESHOLD <= e.ci_high
        hits.append(covered)
        widths.append(e.ci_high - e.ci_low)
        errors.append(e.prevalence_at_threshold - TRUTH_THRESHOLD)
        wilson += e.ci_method.endswith("wilson_neff")
        if e.bandwidth_flag:
            nan_count += 1
        else:
            hits_unflagged.append(covered)
    unflagged = f"{np.mean(hits_unflagged):.3f}" if hits_unflagged else "-"
    note = f"{ci}; reps={reps}; Wilson {wilson / reps:.0%}; unflagged coverage {unflagged}"
    return _row("threshold", f"n={n} d={d:g} {ci}", hits, widths, errors, nan_count, reps, ci == "robust", note)


def sdt_regime(fnr: float, n_pos: int, phi: float, reps: int, seed: int) -> dict:
    """``reps`` gold samples of n_pos/φ items; coverage of the implied threshold (eq. 12)."""
    rng = np.random.default_rng(seed)
    n = int(round(n_pos / phi))
    _, _, tau, _ = sdt_from_rates(FPR, fnr, phi)
    pos = rng.binomial(n, phi, reps)
    tp = rng.binomial(pos, 1 - fnr)
    fp = rng.binomial(n - pos, FPR)
    hits, widths, errors, nan_count, exact = [], [], [], 0, 0
    for p, a, b in zip(pos, tp, fp, strict=True):
        e = sdt_estimate(int(a), int(p - a), int(b), int(n - p - b))
        if e.ci_method is None:
            nan_count += 1
            continue
        lo, hi = e.implied_threshold_ci
        hits.append(lo <= tau <= hi)
        widths.append(hi - lo)
        errors.append(e.implied_threshold - tau)
        exact += e.ci_method == "exact"
    share = exact / max(1, reps - nan_count)
    note = f"reps={reps}; exact bounds {share:.0%}; truth τ={tau:.4f}; cost ratio covers iff τ does"
    regime = f"FNR={fnr:g} n_pos≈{n_pos} φ={phi:g}"
    return _row("sdt", regime, hits, widths, errors, nan_count, reps, share > 0.5, note)


def _windows(n: int, d: float, a: float, reps: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``reps`` windows of ``n`` scores in |s| < d (N(0, 1) truncated) and outcomes from logistic(a + s)."""
    lo, hi = stats.norm.cdf(-d), stats.norm.cdf(d)
    s = stats.norm.ppf(rng.uniform(lo, hi, (reps, n)))
    return s, (rng.random((reps, n)) < 1 / (1 + np.exp(-(a + s)))).astype(float)


def ratio_regime(n_a: int, n_b: int, a_a: float, a_b: float, d: float, ci: str, reps: int, seed: int) -> dict:
    """``reps`` pairs of windows; coverage of c_a / c_b = exp(a_b − a_a) (seed 002 eqs. 5-6)."""
    rng = np.random.default_rng(seed)
    log_truth = a_b - a_a
    sa, ya = _windows(n_a, d, a_a, reps, rng)
    sb, yb = _windows(n_b, d, a_b, reps, rng)
    hits, widths, errors, nan_count, wilson = [], [], [], 0, 0
    for i in range(reps):
        ea = prevalence_at_threshold(sa[i], ya[i], 0.0, d, ci=ci)
        eb = prevalence_at_threshold(sb[i], yb[i], 0.0, d, ci=ci)
        r = cost_ratio_ratio(ea, eb)
        if np.isnan(r.ratio):
            nan_count += 1
            continue
        hits.append(r.ci_low <= np.exp(log_truth) <= r.ci_high)
        errors.append(np.log(r.ratio) - log_truth)
        wilson += ea.ci_method.endswith("wilson_neff") or eb.ci_method.endswith("wilson_neff")
        if r.ci_low == 0 or np.isinf(r.ci_high):
            nan_count += 1
        else:
            widths.append(np.log(r.ci_high / r.ci_low))
    note = f"{ci}; reps={reps}; a Wilson group {wilson / reps:.0%}; truth {np.exp(log_truth):.3f}"
    regime = f"n={n_a}/{n_b} c={np.exp(-a_a):.2f}/{np.exp(-a_b):.2f} d={d:g} {ci}"
    return _row("ratio", regime, hits, widths, errors, nan_count, reps, ci == "robust" or wilson > reps // 2, note)


def _task(args: tuple) -> dict:
    kind, *rest = args
    return {"threshold": threshold_regime, "sdt": sdt_regime, "ratio": ratio_regime}[kind](*rest)


def _size(task: tuple) -> int:
    """Rows per replication of a task (its first window's), for the slowest-first order."""
    return task[1] if task[0] in ("threshold", "ratio") else 0


def run(
    reps: int = 2000, seed: int = 0, workers: int | None = None, families: tuple[str, ...] = FAMILIES
) -> list[dict]:
    """The regimes of ``families`` (threshold: windows × bandwidths × {robust,
    conventional}; SDT: FNR × gold counts; ratio: :data:`RATIO_PAIRS` ×
    {robust, conventional}). Windows of 20,000 rows run reps // 4
    replications (the note says how many). Returns one dict per regime with
    family, regime, coverage, mc_se, mean_width, bias, nan_share, ok, note."""
    tasks = []
    grid = [(n, d, ci) for n in WINDOWS for d in BANDWIDTHS for ci in ("robust", "conventional")]
    for i, (n, d, ci) in enumerate(grid if "threshold" in families else []):
        r = reps // SLOW_DIVISOR if n >= 20_000 else reps
        tasks.append(("threshold", n, d, ci, max(r, 1), seed * 1000 + i))
    for j, (fnr, (n_pos, phi)) in enumerate((f, g) for f in FNRS for g in GOLD if "sdt" in families):
        tasks.append(("sdt", fnr, n_pos, phi, reps, seed * 1000 + 500 + j))
    ratio_grid = [(*pair, ci) for pair in RATIO_PAIRS for ci in ("robust", "conventional")]
    for k, (n_a, n_b, a_a, a_b, d, ci) in enumerate(ratio_grid if "ratio" in families else []):
        r = reps // SLOW_DIVISOR if max(n_a, n_b) >= 20_000 else reps
        tasks.append(("ratio", n_a, n_b, a_a, a_b, d, ci, max(r, 1), seed * 1000 + 700 + k))
    workers = workers or min(2, os.cpu_count() or 1)
    if workers == 1:
        return [_task(t) for t in tasks]
    # slowest first, so the pool ends together
    order = sorted(range(len(tasks)), key=lambda k: -_size(tasks[k]))
    with ProcessPoolExecutor(workers) as pool:
        done = dict(zip(order, pool.map(_task, [tasks[k] for k in order]), strict=True))
    return [done[k] for k in range(len(tasks))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--family", choices=FAMILIES, action="append", help="only these families (repeatable)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = run(args.reps, args.seed, args.workers, tuple(args.family or FAMILIES))
    head = f"{'family':9} {'regime':46} {'coverage':>8} {'mc_se':>6} {'width':>7} {'bias':>8} {'nan/flag':>8} ok   note"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['family']:9} {r['regime']:46} {r['coverage']:8.3f} {r['mc_se']:6.3f} {r['mean_width']:7.4f}"
            f" {r['bias']:+8.4f} {r['nan_share']:8.2f} {'yes' if r['ok'] else 'NO ':4} {r['note']}"
        )
    ok = sum(r["ok"] for r in rows)
    print(f"\n{time.perf_counter() - t0:.0f} s; regimes ok: {ok}/{len(rows)} = {ok / len(rows):.2f}")


if __name__ == "__main__":
    main()
