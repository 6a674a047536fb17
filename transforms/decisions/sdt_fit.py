"""The ``sdt_fit`` table: does one d′ per labeler fit all its groups? (seed 002 §5.3, §5.3.1)

With one binary label and a gold label per item, each (labeler, group)
cell's two error rates fix its own criterion t and separation d′ exactly
(seed 002 §5.3: t = Φ⁻¹(1 − FPR), d′ = t − Φ⁻¹(FNR)): the equal-variance
model is saturated cell by cell, and nothing in such counts can show that its
Gaussian shape is wrong (that needs graded labels, a zROC). What such counts
can test is an extra hypothesis, not the paper's: that a labeler is one
detector, the same d′ for every group's content, only the criterion moving.
§5.3 computes t and d′ per group and eq. 12's implied threshold per group
either way; a d′ that differs between groups is a finding in itself (the
labeler sees one group's content less clearly). This module tests the
hypothesis per labeler and attribute by the likelihood ratio of the
shared-d′ model (G criteria and one d′) against the saturated one (G
criteria and G d′'s), χ² with G − 1 degrees of freedom (Wilks).
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl

from fairmon.transforms.decisions.decision_tables import ALL, WIN_END, WIN_START
from fairmon.transforms.decisions.sdt_tables import has_labels
from fairmon.transforms.registry import (
    ATTR,
    DS,
    REASON,
    B,
    Column,
    F,
    I,
    S,
    Table,
    declares,
    non_negative,
    polars_schema,
    probability,
)

#: p-values below this flag a labeler whose one d′ does not fit its groups.
FIT_ALPHA = 0.01
#: A shared d′ this large has every group (nearly) perfect: its maximum is at infinity, nothing to test.
D_PRIME_MAX = 8.0

SDT_FIT = Table(
    "sdt_fit",
    "Per labeler and attribute: whether one d′ fits all its groups (criteria free), by likelihood ratio.",
    "seed 002 §5.3, §5.3.1; Wilks (1938)",
    ("ds", "attribute", "labeler_id"),
    (
        DS,
        ATTR,
        Column("labeler_id", S, "-", "Labeler (the pooled `*` rows are left out: a pool is not one detector)."),
        WIN_START,
        WIN_END,
        Column(
            "groups",
            I,
            "groups",
            "Groups with at least `min_pos` gold positives and `min_neg` negatives (config `labels`).",
            bounds=non_negative("groups_non_negative"),
        ),
        Column("d_prime_shared", F, "standard deviations", "d′ of the shared-d′ model (maximum likelihood)."),
        Column(
            "lr_statistic",
            F,
            "-",
            "2·(log-likelihood of one d′ per group − of one d′ for all), χ² on `df` under one d′.",
            bounds=non_negative("lr_statistic_non_negative"),
        ),
        Column("df", I, "-", "Degrees of freedom: groups − 1.", bounds=non_negative("df_non_negative")),
        Column("p_value", F, "probability", "P(χ²_df ≥ lr_statistic).", bounds=probability("p_value_is_probability")),
        Column("fits", B, "-", f"One d′ fits the labeler's groups (p_value ≥ {FIT_ALPHA}); null when not tested."),
        REASON,
    ),
    None,
)


def log_likelihood(t: np.ndarray, d: np.ndarray, counts: np.ndarray) -> float:
    """Σ over groups of the binomial log-likelihood of (tp, fn, fp, tn) rows of ``counts`` (G, 4)
    under criteria ``t`` (G,) and separations ``d`` (G,), in standard deviations of the signal:
    P(say 1 | gold 0) = 1 − Φ(t), P(say 1 | gold 1) = 1 − Φ(t − d) (seed 002 §5.3, Fig. 2).
    Computed with log Φ, so no rate underflows. Raises nothing."""
    from scipy.special import log_ndtr

    tp, fn, fp, tn = counts.T
    return float(np.sum(tp * log_ndtr(d - t) + fn * log_ndtr(t - d) + fp * log_ndtr(-t) + tn * log_ndtr(t)))


def log_likelihood_gradient(t: np.ndarray, d: float, counts: np.ndarray) -> np.ndarray:
    """The gradient (G + 1,) over (t_1..t_G, d′) of :func:`log_likelihood` at one d′ for all groups
    (``t`` (G,), ``d`` a float, ``counts`` (G, 4)), so the fit needs no numerical differences. With
    λ(x) = φ(x)/Φ(x) (the inverse Mills ratio): ∂ℓ_g/∂a = tp·λ(a) − fn·λ(−a) at a = d′ − t_g,
    ∂ℓ_g/∂t_g = −∂ℓ_g/∂a + tn·λ(t_g) − fp·λ(−t_g), ∂ℓ/∂d′ = Σ_g ∂ℓ_g/∂a. Raises nothing.
    Source: seed 002 §5.3 (the model)."""
    from scipy.special import log_ndtr

    def mills(x: np.ndarray) -> np.ndarray:
        return np.exp(-0.5 * x**2 - 0.5 * np.log(2 * np.pi) - log_ndtr(x))

    tp, fn, fp, tn = counts.T
    a = d - t
    d_a = tp * mills(a) - fn * mills(-a)
    return np.append(-d_a + tn * mills(t) - fp * mills(-t), d_a.sum())


def _saturated(counts: np.ndarray) -> float:
    """The log-likelihood at every cell's own rates (0·log 0 = 0)."""
    from scipy.special import xlogy

    tp, fn, fp, tn = counts.T.astype(float)
    pos, neg = tp + fn, fp + tn
    return float(np.sum(xlogy(tp, tp / pos) + xlogy(fn, fn / pos) + xlogy(fp, fp / neg) + xlogy(tn, tn / neg)))


def shared_d_prime_test(counts: np.ndarray) -> tuple[float, float, int, float]:
    """(d′ of the shared model, LR statistic, df, p-value) for one labeler's groups.

    ``counts`` (G, 4): tp, fn, fp, tn per group against gold labels, every
    group with gold positives and negatives. Maximises the shared-d′
    likelihood over (t_1..t_G, d′) (L-BFGS from the pooled d′ and each
    group's own criterion, weighted by its items) and compares with the
    saturated likelihood (each group its own rates): LR = 2(ℓ_sat −
    ℓ_shared) ≥ 0, χ²_{G−1}. NaNs when the optimiser does not converge or d′
    runs off beyond :data:`D_PRIME_MAX` (every group perfect: no finite
    maximum). Raises ValueError for fewer than 2 groups or a group without
    gold positives or negatives. Source: seed 002 §5.3; Wilks (1938)."""
    from scipy import optimize, stats

    counts = np.asarray(counts, dtype=float)
    G = counts.shape[0]
    if G < 2:
        raise ValueError("the test needs at least 2 groups")
    if ((counts[:, 0] + counts[:, 1]) <= 0).any() or ((counts[:, 2] + counts[:, 3]) <= 0).any():
        raise ValueError("every group needs gold positives and gold negatives")
    # start: each group's own (log-linear corrected) criterion, the pooled separation
    fpr = (counts[:, 2] + 0.5) / (counts[:, 2] + counts[:, 3] + 1)
    fnr = (counts[:, 1] + 0.5) / (counts[:, 0] + counts[:, 1] + 1)
    t0 = stats.norm.ppf(1 - fpr)
    d0 = float(np.average(t0 - stats.norm.ppf(fnr), weights=counts.sum(axis=1)))

    def negative(x: np.ndarray) -> tuple[float, np.ndarray]:
        return -log_likelihood(x[:G], np.full(G, x[G]), counts), -log_likelihood_gradient(x[:G], x[G], counts)

    fit = optimize.minimize(
        negative, np.append(t0, d0), jac=True, method="L-BFGS-B", options={"ftol": 1e-15, "gtol": 1e-8, "maxiter": 1000}
    )
    if not fit.success or not abs(fit.x[G]) < D_PRIME_MAX:
        nan = float("nan")
        return nan, nan, G - 1, nan
    lr = max(0.0, 2 * (_saturated(counts) + fit.fun))
    return float(fit.x[G]), lr, G - 1, float(stats.chi2.sf(lr, G - 1))


def sdt_fit_options(cfg) -> dict:
    """The keyword arguments of :func:`sdt_fit_table` from ``[labels]``: the gold minimums ``sdt`` uses."""
    return {"min_pos": cfg.labels.min_pos, "min_neg": cfg.labels.min_neg}


@declares(SDT_FIT, stage="labels", inputs=("confusion", "ds", "window"), enabled=has_labels, options=sdt_fit_options)
def sdt_fit_table(
    confusion: pl.DataFrame, ds: dt.date, window: tuple[dt.date, dt.date], *, min_pos: int = 10, min_neg: int = 10
) -> pl.DataFrame:
    """Rows of ``sdt_fit`` for day ``ds``: :func:`shared_d_prime_test` per
    attribute and labeler (not the pooled ``*``) over its groups with at
    least ``min_pos`` gold positives and ``min_neg`` negatives (``sdt``'s
    minimums). ``confusion``: attribute, group, labeler_id, tp, fn, fp, tn.
    A labeler with fewer than 2 such groups, or whose fit has no finite
    maximum, is not tested (NaN, ``fits`` null, the reason says so).
    Returns the registry schema. Raises nothing on valid counts."""
    rows = []
    per = confusion.filter(pl.col("labeler_id") != ALL).sort("attribute", "labeler_id", "group")
    for (attribute, labeler), part in per.group_by("attribute", "labeler_id", maintain_order=True):
        counts = part.select("tp", "fn", "fp", "tn").to_numpy()
        usable = counts[
            ((counts[:, 0] + counts[:, 1]) >= max(min_pos, 1)) & ((counts[:, 2] + counts[:, 3]) >= max(min_neg, 1))
        ]
        row = {
            "ds": ds,
            "attribute": attribute,
            "labeler_id": labeler,
            "window_start": window[0],
            "window_end": window[1],
            "groups": len(usable),
        }
        if len(usable) < 2:
            why = f"{len(usable)} group(s) with {min_pos} gold positives and {min_neg} negatives: nothing to compare"
            rows.append({**row, "df": 0, "fits": None, "reason": why})
            continue
        d, lr, df, p = shared_d_prime_test(usable)
        if not np.isfinite(p):
            why = "the shared-d′ fit has no finite maximum (every group nearly perfect) or did not converge"
            rows.append({**row, "df": df, "fits": None, "reason": why})
            continue
        rows.append({**row, "d_prime_shared": d, "lr_statistic": lr, "df": df, "p_value": p, "fits": p >= FIT_ALPHA})
    nan = float("nan")
    filled = [{"d_prime_shared": nan, "lr_statistic": nan, "p_value": nan, "reason": None, **r} for r in rows]
    return pl.DataFrame(filled, schema=polars_schema("sdt_fit"))
