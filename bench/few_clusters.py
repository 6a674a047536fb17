"""Benchmark: intervals over few clusters that span both traffics (issue 38 item 5).

C users, each with rows of both groups in default and in random traffic and
one taste per group θ_{c,k} ~ Beta(0.6, 2) in both, so a user moves Q̂_k and
P̂_k together. Default traffic shows group 0 at twice group 1's rate, random
traffic both alike, so U ∝ (1, 1/2) and the true REO is 1/3 whatever the
tastes. Each replication draws C new users; REO's 95 % interval is computed
three ways from the same rows:

* exact: per-user sums (the count stage's per-cluster keys, C ≤ buckets), the
  joint sandwich over the C users;
* hashed: the users hashed into ``--buckets`` buckets (what the count stage
  did before a day of few clusters kept per-cluster keys): collisions merge
  users, fewer units;
* separate: per-user sums, but the two traffics' sandwiches added as if
  independent (no cross-covariance, before issue 38).

And the cluster bootstrap's SE of ΔU_0 (percentile bootstrap, 400
resamples) beside the exact delta SE: the joint draw of a user for both
traffics against one draw per traffic.

Prints per C: coverage ± Monte-Carlo SE of each interval, mean units, and
the bootstrap/delta SE ratios; then the parity test's rejection rate when
both groups' U are equal (REO = 0); last line: the worst exact coverage.

    python bench/few_clusters.py [--reps 1000] [--buckets 128]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from fairmon.transforms.reo.bootstrap import single_arm_bootstrap
from fairmon.transforms.reo.cluster import BucketSums
from fairmon.transforms.reo.estimate import estimate_reo

TRUTH = 1 / 3
MULT = ((1.0, 0.5), (0.6, 0.6))  # default, random: per-group rate multipliers


def users(C: int, rng: np.random.Generator, mult_by_traffic=MULT) -> list[tuple[np.ndarray, np.ndarray]]:
    """(positives (C, 2), rows (C,)) of default and of random traffic."""
    theta = rng.beta(0.6, 2, (C, 2))
    out = []
    for mult in mult_by_traffic:
        n_k = rng.integers(20, 80, size=(C, 2))
        out.append((rng.binomial(n_k, theta * np.array(mult)).astype(float), n_k.sum(axis=1).astype(float)))
    return out


def merged(pos: np.ndarray, rows: np.ndarray, key: np.ndarray) -> BucketSums:
    """Sums per distinct ``key`` (hash buckets), ids = the keys."""
    ids, inv = np.unique(key, return_inverse=True)
    p = np.zeros((ids.size, pos.shape[1]))
    np.add.at(p, inv, pos)
    return BucketSums(p, np.bincount(inv, weights=rows, minlength=ids.size), ids)


def replicate(C: int, buckets: int, rng: np.random.Generator, boot: bool) -> dict:
    (a_c, n_c), (b_c, m_c) = users(C, rng)
    a, n, b, m = a_c.sum(axis=0), int(n_c.sum()), b_c.sum(axis=0), int(m_c.sum())
    ids = np.arange(C)
    key = rng.integers(0, 2**32, C) % buckets  # a hash of the user id, modulo the buckets
    ways = {
        "exact": (BucketSums(a_c, n_c, ids), BucketSums(b_c, m_c, ids)),
        "hashed": (merged(a_c, n_c, key), merged(b_c, m_c, key)),
        "separate": (BucketSums(a_c, n_c), BucketSums(b_c, m_c)),
    }
    out = {"units": np.unique(key).size}
    for name, (q, p) in ways.items():
        est = estimate_reo(["0", "1"], a, n, b, m, clusters_rec=q, clusters_rand=p)
        out[name] = est.ci_low <= TRUTH <= est.ci_high
        if name == "exact":
            se = est.se_delta_U[0]
    if boot:
        args = (a.astype(int), n, b.astype(int), m)
        for name in ("exact", "separate"):
            res = single_arm_bootstrap(
                *args, method="bootstrap_percentile", level=0.95, B=400, rng=rng, clusters=ways[name]
            )
            out[f"boot_{name}"] = res["delta_U"][0][2] / se
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--buckets", type=int, default=128)
    args = ap.parse_args()
    rng = np.random.default_rng(38)
    t0 = time.process_time()
    worst = 1.0
    print(f"{'C':>4} {'exact':>13} {'hashed':>13} {'separate':>13} {'units':>6}  boot/delta SE: joint, separate")
    for C in (20, 40, 100):
        rows = [replicate(C, args.buckets, rng, boot=i < 200) for i in range(args.reps)]
        cov = {k: np.mean([r[k] for r in rows]) for k in ("exact", "hashed", "separate")}
        mcse = {k: np.sqrt(v * (1 - v) / len(rows)) for k, v in cov.items()}
        boots = [np.mean([r[f"boot_{w}"] for r in rows if f"boot_{w}" in r]) for w in ("exact", "separate")]
        cells = " ".join(f"{cov[k]:.3f}±{mcse[k]:.3f}" for k in ("exact", "hashed", "separate"))
        print(f"{C:>4} {cells} {np.mean([r['units'] for r in rows]):>6.1f}  {boots[0]:.3f}, {boots[1]:.3f}")
        worst = min(worst, cov["exact"])
    print("parity test's size at REO = 0 (default traffic shows both groups alike), exact per-user sums:")
    for C in (20, 40):
        p = []
        for _ in range(args.reps):
            (a_c, n_c), (b_c, m_c) = users(C, rng, ((0.8, 0.8), (0.6, 0.6)))
            q, r = BucketSums(a_c, n_c, np.arange(C)), BucketSums(b_c, m_c, np.arange(C))
            est = estimate_reo(["0", "1"], a_c.sum(0), int(n_c.sum()), b_c.sum(0), int(m_c.sum()),
                               clusters_rec=q, clusters_rand=r)  # fmt: skip
            p.append(est.parity_p_value)
        size = np.mean(np.array(p) < 0.05)
        print(f"{C:>4} rejects {size:.3f} ± {np.sqrt(size * (1 - size) / len(p)):.3f} (nominal 0.05)")
    print(f"CPU {time.process_time() - t0:.1f} s")
    print(f"worst exact per-cluster coverage: {worst:.3f}")


if __name__ == "__main__":
    main()
