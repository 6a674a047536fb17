"""Coverage of the decision-side intervals (issue 14, DESIGN §4.2–4.3), for bench/ci_coverage.py.

1. Prevalence at the threshold: scores uniform on the window (t − d, t + d)
   with t = 0, outcomes Bernoulli(logistic(−1 + s)), so the truth is
   β0 = logistic(−1) ≈ 0.269; windows of 30, 100, 1,000 and 20,000 rows at
   d ∈ {0.5, 1, 3}. Rows below ``min_window_rows`` (100) are answered NaN with
   a reason; a fired bandwidth flag counts as answered with a reason.
2. SDT: FPR = 0.05, prevalence 0.2, FNR ∈ {0.001, 0.01, 0.1} with 20, 200
   and 2,000 gold positives; coverage of the cost-ratio interval (exact
   binomial bounds near 0 or 1, the delta method elsewhere).

    python bench/coverage_decisions.py [--reps 2000]
"""

from __future__ import annotations

import argparse

import numpy as np

from fairmon.transforms.sdt import sdt_estimate, sdt_from_rates
from fairmon.transforms.threshold import prevalence_at_threshold

A, B = -1.0, 1.0
TRUTH = 1 / (1 + np.exp(-A))


def _row(family, regime, hits, widths, est, truth, answered, reps, conservative=False, note=""):
    cov = float(np.mean(hits)) if hits else float("nan")
    return {
        "family": family,
        "regime": regime,
        "coverage": cov,
        "mc_se": float(np.sqrt(cov * (1 - cov) / max(len(hits), 1))),
        "mean_width": float(np.mean(widths)) if widths else float("nan"),
        "bias": float(np.mean(est) / truth - 1) if est else float("nan"),
        "answered": answered / reps,
        "published_coverage": cov,
        "conservative": conservative,
        "note": note,
    }


def threshold_regime(n: int, d: float, reps: int, rng: np.random.Generator) -> dict:
    """One window size × bandwidth: coverage of β0's interval among published rows."""
    hits, widths, est, answered = [], [], [], 0
    for _ in range(reps):
        s = rng.uniform(-d, d, n)
        y = (rng.random(n) < 1 / (1 + np.exp(-(A + B * s)))).astype(float)
        e = prevalence_at_threshold(s, y, 0.0, d)
        if not np.isfinite(e.ci_low) or e.bandwidth_flag:
            answered += 1
            if not np.isfinite(e.ci_low):
                continue
        if e.bandwidth_flag:
            continue
        hits.append(e.ci_low <= TRUTH <= e.ci_high)
        widths.append(e.ci_high - e.ci_low)
        est.append(e.prevalence_at_threshold)
    return _row("thresh", f"n={n} d={d:g}", hits, widths, est, TRUTH, answered, reps)


def sdt_regime(fnr: float, n_pos: int, reps: int, rng: np.random.Generator) -> dict:
    """One FNR × gold-positive count: coverage of the cost-ratio interval."""
    fpr, phi = 0.05, 0.2
    n_neg = int(round(n_pos * (1 - phi) / phi))
    c = sdt_from_rates(fpr, fnr, phi)[3]
    fn, fp = rng.binomial(n_pos, fnr, reps), rng.binomial(n_neg, fpr, reps)
    hits, widths, est, exact = [], [], [], 0
    for i in range(reps):
        e = sdt_estimate(n_pos - int(fn[i]), int(fn[i]), int(fp[i]), n_neg - int(fp[i]))
        if not np.isfinite(e.cost_ratio):
            continue
        exact += not np.isfinite(e.se_log_cost_ratio)
        hits.append(e.cost_ratio_ci_low <= c <= e.cost_ratio_ci_high)
        widths.append(np.log(e.cost_ratio_ci_high / e.cost_ratio_ci_low) if e.cost_ratio_ci_low > 0 else np.inf)
        est.append(e.cost_ratio)
    return _row(
        "sdt",
        f"FNR={fnr:g} n+={n_pos}",
        hits,
        [w for w in widths if np.isfinite(w)],
        est,
        c,
        0,
        reps,
        conservative=exact > reps / 2,
        note=f"exact bounds in {exact / reps:.0%}; width = log(high/low)",
    )


def run(reps: int = 2000, seed: int = 0) -> list[dict]:
    """Every threshold and SDT regime (module docstring); rows as bench/ci_coverage.py prints them."""
    rng = np.random.default_rng(seed)
    rows = [
        threshold_regime(n, d, reps if n < 20_000 else reps // 4, rng)
        for n in (30, 100, 1000, 20_000)
        for d in (0.5, 1, 3)
    ]
    rows += [sdt_regime(f, n, reps, rng) for f in (0.001, 0.01, 0.1) for n in (20, 200, 2000)]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000)
    args = ap.parse_args()
    for r in run(args.reps):
        print(
            f"{r['family']:7} {r['regime']:20} {r['coverage']:.3f} ± {r['mc_se']:.3f} width {r['mean_width']:.4f} "
            f"bias {r['bias']:+.3f} answered {r['answered']:.2f} {r['note']}"
        )


if __name__ == "__main__":
    main()
