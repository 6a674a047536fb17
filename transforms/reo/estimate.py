"""Ranking-based Equal Opportunity (REO) with missing labels from per-group
counts: :func:`estimate_reo`, the one entry point, and two naive estimates the
paper warns about.

:func:`estimate_reo` checks the counts, forms the point estimates and hands
the intervals to one module per CI method, so each method's undefined cases
read in one place:

* ``delta`` / ``delta_paper`` and their cluster-robust form:
  :mod:`fairmon.transforms.reo.intervals_delta`;
* ``bootstrap_percentile`` / ``bootstrap_normal`` / ``bootstrap_bca``:
  :mod:`fairmon.transforms.reo.intervals_bootstrap`;
* near parity (parity test, the interval valid at REO = 0, ``reo_bc``), used
  by every method: :mod:`fairmon.transforms.reo.intervals_near_zero`;
* the algebra they share (U, ΔU, gradients, covariances, verdict):
  :mod:`fairmon.transforms.reo.reo_math`.

The names of those modules are re-exported here, so
``from fairmon.transforms.reo.estimate import X`` keeps working.

Source: seed 001 (Dong, Jin, Hu, Liu, "Measuring Fairness in Large-Scale
Recommendation Systems with Missing Labels", 2024), eqs. 3, 4, 7, 19 and
Algorithm 1; ``DESIGN.md §4.1`` fixes the conventions used here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fairmon.transforms.reo.cluster import BucketSums
from fairmon.transforms.reo.intervals_bootstrap import bootstrap_intervals
from fairmon.transforms.reo.intervals_delta import DeltaIntervals, delta_intervals, log_utility_model
from fairmon.transforms.reo.intervals_near_zero import (
    LOWER_TAIL_DRAWS,
    parity_test,
    quadratic_form_cdf,
    reo_bias_corrected,
    reo_interval_near_zero,
)
from fairmon.transforms.reo.reo_math import (
    CI_METHODS,
    EIGHTY_PERCENT_RULE_REO,
    MIN_EXPECTED_POSITIVES,
    CIMethod,
    Verdict,
    delta_u_covariance,
    delta_u_factor,
    delta_u_log_jacobian,
    log_utility_variance,
    named_groups,
    relative_utilities,
    reo_log_gradient,
    reo_of_utilities,
    small_groups,
    verdict_80pct,
    z_value,
)

__all__ = [
    "CI_METHODS",
    "EIGHTY_PERCENT_RULE_REO",
    "LOWER_TAIL_DRAWS",
    "MIN_EXPECTED_POSITIVES",
    "CIMethod",
    "REOEstimate",
    "Verdict",
    "delta_u_covariance",
    "delta_u_factor",
    "delta_u_log_jacobian",
    "estimate_reo",
    "log_utility_variance",
    "naive_reo_missing_as_negative",
    "naive_reo_recommended_only",
    "parity_test",
    "quadratic_form_cdf",
    "relative_utilities",
    "reo_bias_corrected",
    "reo_interval_near_zero",
    "reo_log_gradient",
    "reo_of_utilities",
    "small_groups",
    "verdict_80pct",
    "z_value",
]


@dataclass(frozen=True)
class REOEstimate:
    """Result of :func:`estimate_reo` for one (day, arm, attribute).

    Arrays have shape (K,), ordered like the input groups. Undefined values are
    NaN and ``reason`` says why (``None`` when everything is defined).
    ``reo_bc``, ``parity_*``, ``verdict`` (against ``threshold``) and the
    per-group ``small_group`` flags and reasons are those of DESIGN §4.1.
    ``design_effect``: robust ÷ multinomial variance of REO (of tr Σ_ΔU when
    REO's SE is undefined) when rows are clustered; 1 without clustering.
    ``alert_low``/``alert_high``: REO's interval at the alerts' level (NaN
    when not asked for or undefined).
    """

    groups: tuple[str, ...]
    Q: np.ndarray
    P: np.ndarray
    U: np.ndarray
    delta_U: np.ndarray
    se_delta_U: np.ndarray
    ci_low_delta_U: np.ndarray
    ci_high_delta_U: np.ndarray
    reo: float
    se: float
    ci_low: float
    ci_high: float
    n_rec: int
    n_rand: int
    ci_method: str
    level: float
    reason: str | None = None
    group_reasons: tuple[str | None, ...] = field(default_factory=tuple)
    reo_bc: float = float("nan")
    parity_stat: float = float("nan")
    parity_df: int = 0
    parity_p_value: float = float("nan")
    verdict: str = "undefined"
    threshold: float = EIGHTY_PERCENT_RULE_REO
    small_group: tuple[bool, ...] = field(default_factory=tuple)
    small_group_reasons: tuple[str | None, ...] = field(default_factory=tuple)
    design_effect: float = float("nan")
    alert_low: float = float("nan")
    alert_high: float = float("nan")

    @property
    def K(self) -> int:
        """Number of groups."""
        return len(self.groups)


def estimate_reo(
    groups: list[str] | tuple[str, ...],
    n_pos_rec: np.ndarray,
    n_rec: int,
    n_pos_rand: np.ndarray,
    n_rand: int,
    *,
    ci_method: CIMethod = "delta",
    level: float = 0.95,
    n_boot: int = 1000,
    rng: np.random.Generator | None = None,
    threshold: float = EIGHTY_PERCENT_RULE_REO,
    min_expected_positives: float = MIN_EXPECTED_POSITIVES,
    clusters_rec: BucketSums | None = None,
    clusters_rand: BucketSums | None = None,
    cluster_note: str | None = None,
    alert_level: float | None = None,
    known_pool: bool = False,
) -> REOEstimate:
    """REO, U, ΔU and their standard errors and CIs from per-group counts.

    Inputs: ``n_pos_rec[k]`` = #{Y=1, S=k} in default traffic (one day, one
    arm), ``n_rec`` = |D_rec| (all rows, including rows of groups not listed);
    ``n_pos_rand[k]`` and ``n_rand`` likewise for the random-traffic window.
    Shapes (K,) with K >= 1; counts are non-negative integers. ``known_pool``
    (RSP with a pool table, seed 001 App. H.1, eqs. 24–26): ``n_pos_rand`` and
    ``n_rand`` are its items N_k and N, so P_k = N_k/N is a constant without a
    variance term (:mod:`fairmon.transforms.reo.rsp_pool`), and reasons say RSP.

    ``ci_method``: "delta" (full multinomial covariance), "delta_paper"
    (Algorithm 1's diagonal Γ), or "bootstrap_percentile" / "bootstrap_normal"
    / "bootstrap_bca" (seed 001 §4.3: ``n_boot`` multinomial resamples of the
    count tables drawn with ``rng``; SE = bootstrap sd).

    Near parity (DESIGN §4.1): ``reo_bc`` (bias-corrected REO), the parity
    Wald test (:func:`parity_test`), and for the delta methods a REO interval
    that inverts the distribution of ‖ΔÛ‖² (:func:`reo_interval_near_zero`);
    with every method the lower bound is 0 when parity is not rejected at
    1 − ``level``. ``verdict`` compares the CI with ``threshold`` (1/9, the
    80 % rule, for K = 2; config ``reo_threshold`` for K > 2); groups with
    fewer than ``min_expected_positives`` positives in either traffic are
    ``small_group`` and make the verdict ``inconclusive`` at best.

    Clustered rows: ``clusters_rec`` / ``clusters_rand`` are the per-bucket
    sums of the default / random sample (totals equal to the counts); the
    delta method turns cluster-robust, the bootstraps resample buckets,
    ``delta_paper`` is NaN with a reason, and ``cluster_note`` makes every
    interval NaN with that reason (:func:`log_utility_model`).

    ``alert_level`` (1 − 2α/H, :mod:`fairmon.transforms.alerts.horizon`): also REO's
    parity-aware delta interval at that level, whatever ``ci_method`` (:func:`_alert_bounds`).

    Returns an :class:`REOEstimate`. Never raises for degenerate data: P_k = 0
    makes U_k (and REO) NaN; Q_k = 0 or REO = 0 keep the point estimate but make
    the SE NaN (the delta method is undefined there); each with a reason.
    Raises ValueError for malformed input (shape mismatch, negative counts, counts above their totals,
    unknown ci_method, level outside (0, 1), a ``known_pool`` with another ``ci_method`` or ``clusters_rand``).

    Source: seed 001 eqs. 3, 4, 7, 19 and Algorithm 1, with the full
    multinomial covariance (DESIGN §4.1).
    """
    groups, clusters = tuple(str(g) for g in groups), (clusters_rec, clusters_rand)
    a, b = _checked_counts(groups, n_pos_rec, n_rec, n_pos_rand, n_rand, ci_method, clusters, known_pool)
    z = z_value(level)
    Q, P, U = _shares(a, b, n_rec, n_rand)
    small, small_reasons = small_groups(groups, a, b, min_expected_positives)
    reasons, group_reasons, U_defined = _point_reasons(groups, P, U, n_rec, n_rand, known_pool)
    common = dict(threshold=threshold, small_group=small, small_group_reasons=small_reasons)
    head, traffic = (groups, Q, P, U), (int(n_rec), int(n_rand), ci_method, level)
    model = (n_rec, n_rand, ci_method, level)  # the totals as given: the variances use them unconverted
    if not U_defined:
        overall = "; ".join(reasons) or "undefined"
        nans = [np.full(U.size, np.nan) for _ in range(4)] + [float("nan")] * 4  # ΔU, its SE and bounds; REO, SE, CI
        return REOEstimate(*head, *nans, *traffic, overall, tuple(r or overall for r in group_reasons), **common)

    dU, reo = relative_utilities(U), reo_of_utilities(U)
    delta, defined = _delta_stage(
        groups, Q, P, U, reo, model, clusters, cluster_note, reasons, group_reasons, alert_level, known_pool
    )
    ci_low, ci_high, se_reo, se_dU = delta.ci_low, delta.ci_high, delta.se_reo, delta.se_dU
    lo_dU, hi_dU = dU - z * delta.scale * se_dU, dU + z * delta.scale * se_dU  # t_{G−1} with clusters
    if ci_method.startswith("bootstrap") and defined:
        (ci_low, ci_high, se_reo, lo_dU, hi_dU, se_dU), group_reasons = _bootstrap_stage(
            a, b, model, n_boot, rng, clusters, delta, reasons, group_reasons
        )
    if np.isfinite(ci_low) and np.isfinite(delta.parity[2]) and delta.parity[2] >= 1.0 - level:
        ci_low = 0.0  # parity not rejected: the interval reaches REO = 0
    reasons += _closing_reasons(groups, reo, ci_high, delta.reo_bc, small, min_expected_positives, known_pool)
    verdict = verdict_80pct(ci_low, ci_high, threshold, small=any(small))
    why = "; ".join(reasons) or "undefined"  # a group's NaN always carries a reason: its own, else the REO's
    defined_k = (np.isfinite(se_dU) & np.isfinite(lo_dU)).tolist()
    group_reasons = [r if ok else r or why for r, ok in zip(group_reasons, defined_k)]
    W, df, p = delta.parity
    ests = (dU, se_dU, lo_dU, hi_dU, reo, se_reo, ci_low, ci_high)
    fields = dict(reo_bc=delta.reo_bc, parity_stat=W, parity_df=df, parity_p_value=p, verdict=verdict, **common)
    fields |= _alert_bounds(delta, alert_level)
    overall = "; ".join(reasons) or None
    return REOEstimate(
        *head, *ests, *traffic, overall, tuple(group_reasons), design_effect=delta.design_effect, **fields
    )


def _alert_bounds(delta: DeltaIntervals, alert_level: float | None) -> dict:
    """{alert_low, alert_high}: REO's parity-aware delta interval at the
    alerts' level, whatever the CI method (a bootstrap of ``n_boot``
    resamples cannot reach a tail of α/H), its lower bound 0 when parity is
    not rejected at 1 − ``alert_level`` (as ``ci_low`` at ``level``)."""
    low, high = delta.alert
    p = delta.parity[2]
    if alert_level is not None and np.isfinite(low) and np.isfinite(p) and p >= 1.0 - alert_level:
        low = 0.0
    return {"alert_low": float(low), "alert_high": float(high)}


def _checked_counts(
    groups: tuple[str, ...],
    n_pos_rec: np.ndarray,
    n_rec: int,
    n_pos_rand: np.ndarray,
    n_rand: int,
    ci_method: str,
    clusters: tuple[BucketSums | None, BucketSums | None],
    known_pool: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """The positive counts as floats (K,), after the checks that make a
    malformed call raise rather than give a number (shapes, signs, totals,
    method, bucket sums adding up to the counts, a known pool taken for a
    sample). Raises ValueError."""
    a = np.asarray(n_pos_rec, dtype=float)
    b = np.asarray(n_pos_rand, dtype=float)
    K = len(groups)
    if a.shape != (K,) or b.shape != (K,):
        raise ValueError(f"counts must have shape ({K},), got {a.shape} and {b.shape}")
    if (a < 0).any() or (b < 0).any() or n_rec < 0 or n_rand < 0:
        raise ValueError("counts must be non-negative")
    if a.sum() > n_rec or b.sum() > n_rand:
        raise ValueError("positive counts exceed the traffic totals")
    if ci_method not in CI_METHODS:
        raise ValueError(f"unknown ci_method {ci_method!r}; expected one of {CI_METHODS}")
    if known_pool and (ci_method != "delta" or clusters[1] is not None):
        raise ValueError("known_pool: the pool's shares are constants, not a sample: delta method, no clusters_rand")
    for name, cl, pos, n in (("clusters_rec", clusters[0], a, n_rec), ("clusters_rand", clusters[1], b, n_rand)):
        if cl is not None and (cl.pos.shape[1] != K or not np.allclose(cl.pos.sum(axis=0), pos) or cl.n != n):
            raise ValueError(f"{name}: bucket sums do not add up to the counts")
    return a, b


def _shares(a: np.ndarray, b: np.ndarray, n_rec: int, n_rand: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Q, P, U), shapes (K,): Q_k = a_k/n_rec, P_k = b_k/n_rand, U_k = Q_k/P_k
    (seed 001 eq. 4); NaN where a total or P_k is 0, never a division error,
    so that the caller gives the reason instead."""
    nan_k = np.full(a.size, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        Q = a / n_rec if n_rec > 0 else nan_k.copy()
        P = b / n_rand if n_rand > 0 else nan_k.copy()
        U = np.where(P > 0, Q / P, np.nan)
    return Q, P, U


def _point_reasons(
    groups: tuple[str, ...], P: np.ndarray, U: np.ndarray, n_rec: int, n_rand: int, known: bool = False
) -> tuple[list[str], list[str | None], bool]:
    """(reasons, per-group reasons, whether U is defined): why the point
    estimate is undefined (no traffic, K < 2, P_k = 0, all U_k = 0), so that a
    NaN never goes out without one (DESIGN §4.1); RSP's words for a ``known`` pool."""
    K = len(groups)
    reasons: list[str] = []
    group_reasons: list[str | None] = [None] * K
    if n_rec == 0:
        reasons.append("no default traffic")
    if n_rand == 0 and not known:
        reasons.append("no random traffic in the window")
    stat = "RSP" if known else "REO"
    if K < 2:
        reasons.append(f"K = {K}: {stat} needs at least 2 groups")
    zero_p = [g for g, p in zip(groups, P) if p == 0]
    if zero_p and n_rand > 0:
        own, why = ("no items in the pool table", "") if known else ("P_k = 0", " (no positives in random traffic)")
        reasons.append(f"{own}{why} for {named_groups(zero_p)}: U_k undefined")
        for i, p in enumerate(P):
            if p == 0:
                group_reasons[i] = own
    U_defined = bool(K >= 2 and np.isfinite(U).all())
    if U_defined and U.sum() == 0:
        why = "no default traffic in the listed groups" if known else "no positives in default traffic"
        reasons.append(f"all U_k = 0 ({why}): {stat} undefined")
        U_defined = False
    return reasons, group_reasons, U_defined


def _delta_stage(
    groups: tuple[str, ...],
    Q: np.ndarray,
    P: np.ndarray,
    U: np.ndarray,
    reo: float,
    model: tuple[int, int, str, float],
    clusters: tuple[BucketSums | None, BucketSums | None],
    cluster_note: str | None,
    reasons: list[str],
    group_reasons: list[str | None],
    alert_level: float | None = None,
    known: bool = False,
) -> tuple[DeltaIntervals, bool]:
    """The delta method's part of :func:`estimate_reo` for a defined U:
    (its result, whether intervals are defined at all). Appends to ``reasons``
    and ``group_reasons`` in place; intervals are undefined for every method
    when a Q_k = 0 (log Q̂_k has no delta variance) or when the covariance
    model gives a note (:func:`log_utility_model`); a ``known`` pool adds no
    sample (:func:`delta_intervals`) and its Q_k = 0 reason stands alone."""
    n_rec, n_rand, ci_method, level = model
    n_rand = np.inf if known else n_rand  # a known share is one of infinitely many rows: 1/(P_k n_rand) = 0
    clusters_rec, clusters_rand = clusters
    v_mult = log_utility_variance(Q, P, n_rec, n_rand, "delta_paper" if ci_method == "delta_paper" else "delta")
    v, cluster_note = log_utility_model(
        v_mult, Q, P, n_rec, n_rand, ci_method, clusters_rec, clusters_rand, cluster_note
    )
    zero_q = [g for g, q in zip(groups, Q) if q == 0]
    if cluster_note and not (known and zero_q):
        reasons.append(cluster_note)
    clustered = clusters_rec is not None or clusters_rand is not None
    if zero_q:
        reasons.append(f"Q_k = 0 for {named_groups(zero_q)}: delta-method SE undefined")
        group_reasons[:] = [r if q != 0 else "Q_k = 0" for r, q in zip(group_reasons, Q)]
    elif not cluster_note:
        delta = delta_intervals(
            U, relative_utilities(U), reo, v, v_mult, level, clusters_rec, clusters_rand, alert_level, rand_known=known
        )
        reasons.extend(delta.notes)
        return delta, True
    return _undefined_delta(U.size, clustered), False


def _bootstrap_stage(a, b, model, n_boot, rng, clusters, delta, reasons, group_reasons):
    """The bootstrap's part of :func:`estimate_reo`: (REO's CI and SE, ΔU's
    bounds and SEs) and the per-group reasons; appends to ``reasons``. Near
    parity REO's interval is the parity-aware one (:func:`_bootstrap_defers`)."""
    n_rec, n_rand, ci_method, level = model
    boot = bootstrap_intervals(
        a, n_rec, b, n_rand, method=ci_method, level=level, n_boot=n_boot, rng=rng, clusters=clusters
    )
    ci_low, ci_high = boot.ci_low, boot.ci_high
    if defer := _bootstrap_defers(delta):
        ci_low, ci_high = delta.ci_low, delta.ci_high
        reasons.append(defer)
    if boot.undefined and not (defer and boot.undefined.startswith("BCa undefined for REO:")):  # REO deferred
        reasons.append(boot.undefined)
        group_reasons = [
            "; ".join(x for x in (r, "bootstrap undefined") if x) if not np.isfinite(lo) else r
            for r, lo in zip(group_reasons, boot.lo_dU)
        ]
    return (ci_low, ci_high, boot.se_reo, boot.lo_dU, boot.hi_dU, boot.se_dU), group_reasons


#: Curvature ratio ρ (REO's second-order bias ÷ SE) above which a bootstrap REO interval defers.
BOOTSTRAP_MAX_CURVATURE = 0.25


def _bootstrap_defers(delta: DeltaIntervals) -> str | None:
    """Why a bootstrap REO interval gives way to the parity-aware one, else None.

    REO = ‖ΔU‖/√K has a kink at parity and curvature (I − uuᵀ)/(√K‖ΔU‖) near
    it: the bootstrap is inconsistent at the kink (Andrews 2000, Econometrica
    68:399) and its percentile interval sits about twice the plug-in's bias
    (tr Σ − ûᵀΣû)/(2√K‖ΔÛ‖) above the truth near it (0.69 coverage
    at K = 8, REO = 0.05). So when the parity-aware interval reaches 0 or the
    curvature ratio ρ (:class:`DeltaIntervals`) exceeds
    :data:`BOOTSTRAP_MAX_CURVATURE`, REO's interval is the parity-aware one
    (:func:`reo_interval_near_zero`), which holds there (DESIGN §4.1)."""
    if not (np.isfinite(delta.ci_low) and np.isfinite(delta.ci_high)):
        return None
    if delta.ci_low == 0.0:
        why = "its parity-aware interval reaches 0"
    elif delta.curvature > BOOTSTRAP_MAX_CURVATURE:
        why = f"REO's curvature ratio (second-order bias ÷ SE) is {delta.curvature:.2g}"
    else:
        return None
    return (
        f"near parity ({why}): the bootstrap is not valid at REO's kink, so REO's interval is the "
        "parity-aware one; ΔU's stay bootstrap"
    )


def _undefined_delta(K: int, clustered: bool) -> DeltaIntervals:
    """The delta method's result when it cannot run (Q_k = 0, or a cluster
    note): every interval NaN; the design effect 1 without clustering."""
    nan = float("nan")
    return DeltaIntervals(np.full(K, np.nan), nan, nan, nan, (nan, 0, nan), nan, 1.0 if not clustered else nan, ())


def _closing_reasons(
    groups: tuple[str, ...],
    reo: float,
    ci_high: float,
    reo_bc: float,
    small: tuple[bool, ...],
    min_expected_positives: float,
    known: bool = False,
) -> list[str]:
    """Reasons that read the finished interval: a plug-in REO above its upper
    bound (many groups: tr Σ / K, the plug-in's bias, exceeds the interval's
    reach, DESIGN §4.1), and small groups, which cap the verdict at inconclusive."""
    out = []
    if reo > ci_high and known:
        out.append(f"the plug-in RSP {reo:.4g} lies above its interval (its upward bias exceeds the width)")
    elif reo > ci_high:
        out.append(
            f"the plug-in REO {reo:.4g} lies above its interval: its upward bias (tr Var(ΔÛ)/K in REO²) "
            f"is larger than the interval's width; reo_bc {reo_bc:.4g} is the bias-corrected estimate"
        )
    if any(small):
        names = [gr for gr, f in zip(groups, small) if f]
        out.append(
            f"small {named_groups(names)} (< {min_expected_positives:g} positives in default or random "
            "traffic): intervals may under-cover, verdict inconclusive at best"
        )
    return out


def naive_reo_recommended_only(n_pos_rec: np.ndarray, n_group_rec: np.ndarray) -> float:
    """Diagnostic only: REO of per-group positive rates inside default traffic.

    Uses the recommended subset alone, U_k^naive = #{Y=1,S=k in D_rec}/#{S=k in D_rec},
    i.e. P(Y=1 | R=1, S=k), which is not the RTPR P(R=1 | Y=1, S=k) of eq. 4:
    the preferences of unshown items never enter. Seed 001 §1 warns against it.
    Shapes (K,). NaN when a group has no default rows.
    """
    a = np.asarray(n_pos_rec, dtype=float)
    n = np.asarray(n_group_rec, dtype=float)
    if (n <= 0).any():
        return float("nan")
    return reo_of_utilities(a / n)


def naive_reo_missing_as_negative(n_pos_rec: np.ndarray, n_rec: int, n_group_rand: np.ndarray, n_rand: int) -> float:
    """Diagnostic only: REO when labels of unshown pairs are taken as negative.

    The only known positives are those default traffic revealed, so group k's
    positive mass is replaced by its exposure share in the candidate pool
    (random traffic), U_k^naive = Q_k / (#{S=k in D_rand}/|D_rand|). This is the
    estimator of eq. 4 with every group's unknown positive rate set equal,
    which seed 001 §1 shows can deviate far from the truth. Shapes (K,).
    """
    a = np.asarray(n_pos_rec, dtype=float)
    m = np.asarray(n_group_rand, dtype=float)
    if n_rec <= 0 or n_rand <= 0 or (m <= 0).any():
        return float("nan")
    return reo_of_utilities((a / n_rec) / (m / n_rand))
