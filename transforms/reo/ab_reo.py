"""D_REO = REO_T − REO_C where the delta method, the bootstrap or the
partition cannot be trusted: near parity in an arm (DESIGN §4.1).

Why. REO = ‖ΔU‖/√K is a norm of the relative utilities. Far from parity it
is smooth and every A/B method of :mod:`fairmon.transforms.reo.ab` is
first-order right. Near parity it is not: for K = 2, REO = |tanh(x/2)| with
x = log U_1 − log U_2 has a kink at x = 0, and for K > 2 its Hessian
(I − uuᵀ)/(√K‖ΔU‖) (u = ΔU/‖ΔU‖) blows up as ‖ΔU‖ → 0, so the plug-in is
biased upwards by (tr Σ − uᵀΣu)/(2√K‖ΔU‖) to second order (Σ the delta
covariance of ΔÛ; the second-order delta method, Oehlert 1992, Am. Stat.
46:27). The normal, percentile-bootstrap and fold-based intervals of a
difference of two such norms then miss (0.88 at K = 2 with 100
random positives a group, 0.56 for the bootstrap with a control near parity;
the bootstrap is inconsistent at the kink, Andrews 2000, Econometrica 68:399).

What is done, per arm X ∈ {T, C}, from its ΔÛ_X and Σ_X (delta covariance,
cluster-robust when rows are clustered):

* ``near parity`` when the arm's own parity-aware interval
  (:func:`fairmon.transforms.reo.intervals_near_zero.reo_interval_near_zero`)
  at level 1 − τ (τ = :data:`NEAR_PARITY_LEVEL` = 0.05, i.e. the arm's
  published 95 % REO interval) reaches 0 — the data cannot tell the arm from
  parity, so REO's kink is within reach of the sampling error;
* then D_REO's interval of ``delta`` and ``bootstrap`` is the projection (Bonferroni)
  interval [lo_T − hi_C, hi_T − lo_C] of the two arms' parity-aware intervals
  at level 1 − α/2 each: P(REO_T ∈ I_T and REO_C ∈ I_C) ≥ 1 − α whatever the
  dependence through the shared P̂, so it holds uniformly near the boundary,
  and it is conservative (Bonferroni; the arms' intervals are conservative
  at parity themselves). Its p-value is the smallest α whose interval
  excludes 0 (found by bisection), so interval and p-value agree by
  construction. The row's reason names the regime;
* otherwise (both arms far from parity) the ``delta`` interval is centred
  at the second-order bias-corrected difference D̂ − (b̂_T − b̂_C),
  b̂_X = (tr Σ_X − ûᵀΣ_X û)/(2√K‖ΔÛ_X‖), with the joint delta SE; its p-value
  is that of the same normal pivot;
* ``partition`` (Algorithm 3) gives no D_REO interval in any regime
  (:data:`PARTITION_WHY`): its folds hold 1/M of the data, where REO is
  nearer its kink, and gates on the data that were tried published only a
  selected subset of rows that missed (bench/README.md).

Note: the projection is valid unconditionally, not conditionally on the
near-parity flag (an arm flagged near parity by chance can make it miss);
coverage is measured over all rows (bench/ci_coverage.py).

The bootstrap's p-value inverts its percentile interval: with the bounds
the ⌈Bα/2⌉-th smallest and largest replicates, the interval at level 1 − α
excludes 0 iff #(θ* ≤ 0) or #(θ* ≥ 0) is below Bα/2, so
p = 2·min(#(θ* ≤ 0), #(θ* ≥ 0))/B — never a normal approximation.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from fairmon.transforms.reo.cluster import sandwich_df
from fairmon.transforms.reo.intervals_delta import both_bucketed_factor
from fairmon.transforms.reo.intervals_near_zero import NearZeroShape, near_zero_shape, reo_interval_near_zero
from fairmon.transforms.reo.reo_math import (
    delta_u_covariance,
    delta_u_factor,
    few_cluster_scale,
    relative_utilities,
    z_value,
)

#: τ: an arm whose parity-aware interval at level 1 − τ reaches 0 is near parity.
NEAR_PARITY_LEVEL = 0.05
#: Why ``partition`` publishes no D_REO interval (its D_k rows stand).
PARTITION_WHY = (
    "partition: no D_REO interval. Each fold holds 1/M of the data, where REO sits nearer its kink at parity "
    "than on the full data, so the spread of fold differences misstates D_REO's SE (measured 0.17-0.93 coverage "
    "with 100-2,000 random positives a group, and 0.00 where a data-driven gate let only rare rows through); "
    "use delta or bootstrap. Partition's D_k rows are published"
)


@dataclass(frozen=True)
class ArmShape:
    """One arm's ΔÛ (K,), the delta covariance of ΔÛ as a matrix Σ (K, K) or
    a factor B (r, K) with Σ = BᵀB, whether it is near parity, its curvature
    ratio ρ and REO's second-order bias b̂ (REO units)."""

    name: str
    dU: np.ndarray
    cov: np.ndarray | None
    factor: np.ndarray | None
    near: bool
    rho: float
    bias: float
    lo: float = 0.0
    nz: NearZeroShape | None = None  # formed by arm_shape; None: not finite

    def interval(self, level: float) -> tuple[float, float]:
        """The arm's parity-aware interval for REO at ``level``
        (:func:`reo_interval_near_zero`, from the shape formed once)."""
        if self.nz is None:
            return reo_interval_near_zero(self.dU, self.cov, level, factor=self.factor)
        return self.nz.interval(level)


def arm_shape(name: str, dU: np.ndarray, cov: np.ndarray | None = None, factor: np.ndarray | None = None) -> ArmShape:
    """:class:`ArmShape` of one arm from ΔÛ (K,) and Σ (K, K) or its factor B
    (r, K). Near parity and b̂ as in the module docstring; ρ = b̂ ÷ REO's SE
    (reported in the reason); a ΔÛ of zero
    norm is near parity with ρ = b̂ = inf. Never raises for finite inputs."""
    dU = np.asarray(dU, float)
    K = dU.size
    norm = float(np.linalg.norm(dU))
    if factor is not None:
        tr = float(np.sum(factor * factor))
        uSu = float(np.sum((factor @ dU) ** 2)) / norm**2 if norm > 0 else 0.0
    else:
        tr = float(np.trace(cov))
        uSu = float(dU @ cov @ dU) / norm**2 if norm > 0 else 0.0
    nz = near_zero_shape(dU, cov, factor=factor)  # the arm's interval at every level the A/B rows ask for
    if norm == 0 or uSu <= 0:
        return ArmShape(name, dU, cov, factor, True, float("inf"), float("inf"), nz=nz)
    curv = max(tr - uSu, 0.0)
    rho = curv / (2 * norm * np.sqrt(uSu))
    bias = curv / (2 * np.sqrt(K) * norm)
    lo = nz.interval(1.0 - NEAR_PARITY_LEVEL)[0] if nz is not None else float("nan")
    return ArmShape(name, dU, cov, factor, bool(lo == 0.0), float(rho), float(bias), float(lo), nz)


def near_parity_reason(arms: tuple[ArmShape, ArmShape], level: float) -> str:
    """The reason carried by a projection row: which arm is near parity and why."""
    which = ", ".join(
        f"{a.name} (curvature ratio {a.rho:.2g})" if np.isfinite(a.rho) else f"{a.name} (ΔÛ = 0)"
        for a in arms
        if a.near
    )
    return (
        f"near parity in arm(s) {which}: REO's delta, bootstrap and fold intervals fail at the kink of "
        f"REO = ‖ΔU‖/√K, so D_REO's interval is the difference of the arms' parity-aware intervals at level "
        f"{1 - (1 - level) / 2:.4g} each (Bonferroni; conservative)"
    )


def projection_interval(T: ArmShape, C: ArmShape, level: float) -> tuple[float, float]:
    """[lo_T − hi_C, hi_T − lo_C] from the arms' parity-aware intervals at level 1 − α/2 each."""
    alpha = 1.0 - level
    lo_T, hi_T = T.interval(1.0 - alpha / 2)
    lo_C, hi_C = C.interval(1.0 - alpha / 2)
    return lo_T - hi_C, hi_T - lo_C


def projection_p_value(T: ArmShape, C: ArmShape, steps: int = 14) -> float:
    """The smallest α whose projection interval (:func:`projection_interval` at
    level 1 − α) excludes 0: bisection on log α over [1e-12, 1) (the interval
    shrinks as α grows; 14 halvings of log α's range give p to ±0.1 %
    relative). 1 when even the narrowest interval holds 0."""

    def excludes(alpha: float) -> bool:
        lo, hi = projection_interval(T, C, 1.0 - alpha)
        return lo > 0 or hi < 0

    top = 1.0 - 1e-9
    if not excludes(top):
        return 1.0
    lo_a, hi_a = np.log(1e-12), np.log(top)
    if excludes(np.exp(lo_a)):
        return float(np.exp(lo_a))
    for _ in range(steps):
        mid = (lo_a + hi_a) / 2
        if excludes(float(np.exp(mid))):
            hi_a = mid
        else:
            lo_a = mid
    return float(np.exp(hi_a))


def percentile_bounds(reps: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval from B replicates (B, J) -> ((J,), (J,)): the j-th smallest
    and j-th largest replicate, j = ⌈B·α/2⌉ (α = 1 − level). With this choice
    the lower bound exceeds 0 iff #(θ* ≤ 0) < B·α/2 and the upper bound is
    below 0 iff #(θ* ≥ 0) < B·α/2, so :func:`percentile_p_value` is exactly the
    smallest α whose interval excludes 0. Efron & Tibshirani (1993) §13.3."""
    reps = np.asarray(reps, float)
    B = reps.shape[0]
    j = max(int(np.ceil(B * (1 - level) / 2 - 1e-9)) - 1, 0)
    if reps.ndim != 2 or reps.shape[1] <= SORT_COLUMNS:
        reps = np.sort(reps, axis=0)
        return reps[j], reps[B - 1 - j]
    lo, hi = np.empty(reps.shape[1]), np.empty(reps.shape[1])
    for i in range(0, reps.shape[1], SORT_COLUMNS):  # each column sorts alone: the same order statistics
        part = np.sort(reps[:, i : i + SORT_COLUMNS], axis=0)
        lo[i : i + SORT_COLUMNS], hi[i : i + SORT_COLUMNS] = part[j], part[B - 1 - j]
    return lo, hi


#: Columns :func:`percentile_bounds` sorts at a time: a sort along the first
#: axis reads each column with a stride of a row, so (B, 32) blocks (256 KB at
#: B = 1,000) stay in cache while (B, 256) ones do not: 41 -> 13 ms for the
#: 4,097 metrics of one A/B pair at K = 4,096.
SORT_COLUMNS = 32


def percentile_p_value(reps: np.ndarray, null: float = 0.0) -> np.ndarray:
    """p = 2·min(#(θ* ≤ null), #(θ* ≥ null))/B, capped at 1, per column of
    ``reps`` (B, J) -> (J,): the interval of :func:`percentile_bounds` at level
    1 − α holds ``null`` iff p ≥ α (module docstring), by construction."""
    reps = np.asarray(reps, float)
    B = reps.shape[0]
    low, high = np.count_nonzero(reps <= null, axis=0), np.count_nonzero(reps >= null, axis=0)
    return np.minimum(1.0, 2 * np.minimum(low, high) / B)


def arm_shapes(
    shares: tuple[np.ndarray, np.ndarray, np.ndarray],
    sizes: tuple[int, int, int],
    U_T: np.ndarray,
    U_C: np.ndarray,
    clusters: tuple,
    level: float = 0.95,
) -> tuple[ArmShape, ArmShape]:
    """Each arm's ΔÛ with its delta covariance (:mod:`fairmon.transforms.reo.ab_reo`):
    Σ_X = A_X diag(1/(Q_X n_X) + 1/(P n_rand)) A_Xᵀ without clustering; with it,
    the factor B_X = F_X A_Xᵀ of the stacked per-sample factors F_X (a
    bucketed sample's sandwich factor, else its multinomial diagonal), times
    the few-cluster widening t_{df}/z at ``level`` (df of the arm's samples,
    :func:`fairmon.transforms.reo.cluster.sandwich_df`), as the single-arm
    interval has it (:func:`fairmon.transforms.reo.intervals_delta.delta_intervals`)."""
    (Q_T, Q_C, P), (n_T, n_C, n_rand) = shares, sizes
    c_T, c_C, c_R = clusters
    out = []
    for name, U, Q, n, c in (("treatment", U_T, Q_T, n_T, c_T), ("control", U_C, Q_C, n_C, c_C)):
        dU = relative_utilities(U)
        if c is None and c_R is None:
            out.append(arm_shape(name, dU, cov=delta_u_covariance(U, 1 / (Q * n) + 1 / (P * n_rand))))
            continue
        if c is not None and c_R is not None:
            F, _ = both_bucketed_factor(c, c_R)  # joint over shared buckets when ids are known
        else:
            F = np.vstack(
                [
                    x.log_share_factor() if x is not None else np.diag(np.sqrt(1 / (share * size)))
                    for x, share, size in ((c, Q, n), (c_R, P, n_rand))
                ]
            )
        scale = few_cluster_scale(level, sandwich_df([c, c_R]))
        out.append(arm_shape(name, dU, factor=delta_u_factor(U, F) * scale))
    return out[0], out[1]


def undecided_note(diff: float, lo: float, hi: float, n_rand: int | None) -> str:
    """Words for a projection interval [lo, hi] that holds 0: the row is
    inconclusive, and the traffic that would decide it if the estimate
    ``diff`` stays: the half-width h facing 0 must shrink below d = |diff|,
    and a width that falls as 1/√rows needs both traffics ×(h/d)² (the
    planner's rule for a verdict, :func:`fairmon.transforms.planning.settle.settle_verdict`);
    ``n_rand``: the random rows of the window now, or None."""
    d = abs(diff)
    h = diff - lo if diff >= 0 else hi - diff
    if not (np.isfinite(d) and np.isfinite(h)):
        return "inconclusive: the interval holds 0 (the traffic that would decide it cannot be computed)"
    if d == 0 or h <= 0:
        return "inconclusive: the interval holds 0 and the estimate is 0, so no traffic decides the sign of a change"
    f = (h / d) ** 2
    rows = f" (about {n_rand * f:,.0f} random rows in the window, now {n_rand:,})" if n_rand else ""
    return (
        f"inconclusive: the interval holds 0; if D_REO stays near {diff:.3g}, both traffics ×{f:.3g}{rows} "
        "would put it on one side of 0"
    )


def reo_rows_by_regime(
    out: list, arms: tuple[ArmShape, ArmShape], diff: float, level: float, n_rand: int | None = None
) -> list:
    """D_REO's rows by regime (:mod:`fairmon.transforms.reo.ab_reo`): near parity
    in an arm, every method's interval (not ``delta_paper``, a comparison
    method) becomes the projection interval with its p-value and a reason;
    far from it the ``delta`` row is centred at the second-order
    bias-corrected difference; ``partition``'s D_REO is NaN with
    :data:`PARTITION_WHY` (per-fold REO misstates the SE; no gate on the data
    avoided publishing only a selected, miscovering subset). A projection
    interval that holds 0 says it is inconclusive and what traffic would
    decide it (:func:`undecided_note`, ``n_rand`` the window's random rows).
    The method's SE is kept."""
    from scipy import stats  # imported here, not at the top (fairmon.transforms)

    T, C = arms
    near = T.near or C.near
    proj = None
    res = []
    for e in out:
        if e.metric != "reo" or e.method == "delta_paper" or (not np.isfinite(e.se) and not near):
            res.append(e)
        elif e.method == "partition":
            nan = float("nan")
            res.append(replace(e, ci_low=nan, ci_high=nan, p_value=nan, reason=PARTITION_WHY))
        elif near:
            if proj is None:
                lo, hi = projection_interval(T, C, level)
                why = near_parity_reason(arms, level)
                why += f"; {undecided_note(diff, lo, hi, n_rand)}" if lo <= 0 <= hi else ""
                proj = (lo, hi, projection_p_value(T, C), why)
            res.append(replace(e, ci_low=proj[0], ci_high=proj[1], p_value=proj[2], reason=proj[3], df=float("nan")))
        elif e.method == "delta":
            centre = diff - (T.bias - C.bias)
            if np.isfinite(e.df):  # cluster-robust: t_{df}, as the row's D_k (ab._normal_rows)
                z = z_value(level) * few_cluster_scale(level, e.df)
                p = float(2 * stats.t.sf(abs(centre) / e.se, e.df))
            else:
                z = z_value(level)
                p = float(2 * stats.norm.sf(abs(centre) / e.se))
            res.append(replace(e, ci_low=centre - z * e.se, ci_high=centre + z * e.se, p_value=p))
        else:
            res.append(e)
    return res
