"""Envy-freeness audit of a recommender (seed 004; DESIGN §4.7).

User m envies user n when m would get more reward from n's recommendation
policy than from their own (seed 004 eq. 1, Def. 3.1). Nothing in the logs of
ordinary traffic shows that: it takes *swap traffic*, rows where m was served
what n's policy would have chosen. This module holds the estimators; it does
no I/O.

* :func:`utilities` — u^m(π^n) for known preferences and policies (eq. 1).
* :func:`lil_beta`, :func:`confidence_bounds` — the anytime confidence
  sequence of Lemma 4 (law of the iterated logarithm, σ-subgaussian rewards).
* :func:`freedman_phi` — the martingale bound φ of Lemma 5 in Freedman's form
  (DESIGN §4.7 explains why not the printed one).
* :func:`ocef_decisions` — OCEF's stopping rules (Alg. 1 lines 7–9) applied to
  accumulated per-user × arm counts, vectorised over users.
* :func:`ocef_online` — OCEF as the interactive bandit loop with the
  conservative-exploration check (eq. 4), vectorised over independent runs.
* :func:`audit_sizes`, :func:`audit_verdict` — AUDIT (Alg. 2, Th. 2).
* Group envy (App. B, eq. 6, Def. B.1) is in :mod:`fairmon.transforms.envy.group`.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from fairmon.transforms.envy.envy_bounds import (
    OMEGA,
    SIGMA,
    check_delta,
    confidence_bounds,
    freedman_phi,
    lil_beta,
    utilities,
)

__all__ = [
    "DECISIONS",
    "OMEGA",
    "SIGMA",
    "audit_sizes",
    "audit_verdict",
    "bandit_problem",
    "check_delta",
    "confidence_bounds",
    "freedman_phi",
    "lil_beta",
    "ocef_decisions",
    "ocef_online",
    "utilities",
]

DECISIONS = ("envy", "eps_no_envy", "undecided")


def ocef_decisions(counts: pl.DataFrame, *, delta: float, epsilon: float, omega: float = OMEGA) -> pl.DataFrame:
    """OCEF's decisions on accumulated logs, one row per target user (seed 004 Alg. 1 lines 7–9).

    ``counts``: one row per (user_id, donor) with columns ``user_id``,
    ``donor`` (whose policy served the rows: null, or the user's own id, for
    the user's own policy; another user's id for a swap donor), ``n``
    (pulls) and ``reward_sum`` (sum of rewards in [0, 1]). ``delta`` is
    the δ each user's certificate is run at (AUDIT passes δ/(3M̃)), and the
    union bound of Lemma 4 covers that user's arms: its donors plus 1.
    Because Lemma 4's bounds hold at every t at once, the stopping rules may
    be applied to whatever has accumulated (an offline reading of the
    interactive loop): ``envy`` when some donor's lower bound exceeds the
    own policy's upper bound; ``eps_no_envy`` when every donor's upper bound
    is ≤ own lower bound + ε; otherwise ``undecided``. A user without own
    pulls or without donors is ``undecided`` (reason says which).

    Returns user_id, n_donors, n_own, mean_own, lower_own, upper_own,
    best_donor_mean, max_donor_lower, max_donor_upper, decision, reason.
    Raises ValueError on missing columns, negative counts or sums outside [0, n],
    or ε outside (0, 1] (seed 004 Th. 1; a NaN margin read as no margin).
    """
    need = {"user_id", "donor", "n", "reward_sum"}
    if missing := need - set(counts.columns):
        raise ValueError(f"counts: missing columns {sorted(missing)}")
    if counts.height and (
        (counts["n"] < 0).any() or (counts["reward_sum"] < 0).any() or (counts["reward_sum"] > counts["n"]).any()
    ):
        raise ValueError("counts: n must be >= 0 and 0 <= reward_sum <= n")
    check_delta(delta)
    if not 0 < epsilon <= 1:  # NaN too: every comparison with it is False, and "≤ own lower + NaN" certified nothing
        raise ValueError(f"epsilon must lie in (0, 1] (seed 004 Th. 1), got {epsilon}")
    own = pl.col("donor").is_null() | (pl.col("donor").cast(pl.String) == pl.col("user_id").cast(pl.String))
    c = (
        counts.with_columns(pl.when(own).then(None).otherwise(pl.col("donor").cast(pl.String)).alias("donor"))
        .group_by("user_id", "donor")
        .agg(pl.col("n").sum(), pl.col("reward_sum").sum())
        .with_columns(pl.col("donor").is_not_null().alias("is_donor"))
    )
    c = c.with_columns(pl.col("is_donor").sum().over("user_id").alias("n_donors"))
    n, s = c["n"].to_numpy(), c["reward_sum"].to_numpy()
    mean, lo, hi = confidence_bounds(n, s, c["n_donors"].to_numpy() + 1, delta, omega=omega)
    c = c.with_columns(pl.Series("mean", mean), pl.Series("lower", lo), pl.Series("upper", hi))
    own = c.filter(~pl.col("is_donor")).select(
        "user_id",
        pl.col("n").alias("n_own"),
        pl.col("mean").alias("mean_own"),
        pl.col("lower").alias("lower_own"),
        pl.col("upper").alias("upper_own"),
    )
    don = (
        c.filter(pl.col("is_donor"))
        .group_by("user_id")
        .agg(
            pl.len().alias("n_donors"),
            pl.col("mean").max().alias("best_donor_mean"),
            pl.col("lower").max().alias("max_donor_lower"),
            pl.col("upper").max().alias("max_donor_upper"),
        )
    )
    out = own.join(don, on="user_id", how="full", coalesce=True).with_columns(
        pl.col("n_donors").fill_null(0), pl.col("n_own").fill_null(0)
    )
    out = out.with_columns(
        pl.when(pl.col("n_own") == 0)
        .then(pl.lit("undecided"))
        .when(pl.col("n_donors") == 0)
        .then(pl.lit("undecided"))
        .when(pl.col("max_donor_lower") > pl.col("upper_own"))
        .then(pl.lit("envy"))
        .when(pl.col("max_donor_upper") <= pl.col("lower_own") + epsilon)
        .then(pl.lit("eps_no_envy"))
        .otherwise(pl.lit("undecided"))
        .alias("decision"),
        pl.when(pl.col("n_own") == 0)
        .then(pl.lit("no rows from the user's own policy"))
        .when(pl.col("n_donors") == 0)
        .then(pl.lit("no swap rows (no donor policy)"))
        .when(pl.col("max_donor_lower") > pl.col("upper_own"))
        .then(pl.lit("a donor's lower bound exceeds the own upper bound"))
        .when(pl.col("max_donor_upper") <= pl.col("lower_own") + epsilon)
        .then(pl.lit("every donor's upper bound is within epsilon of the own lower bound"))
        .otherwise(pl.lit("bounds still overlap"))
        .alias("reason"),
    )
    cols = [
        "user_id",
        "n_donors",
        "n_own",
        "mean_own",
        "lower_own",
        "upper_own",
        "best_donor_mean",
        "max_donor_lower",
        "max_donor_upper",
        "decision",
        "reason",
    ]
    return out.select(cols).sort("user_id")


def audit_sizes(delta: float, lam: float, gamma: float) -> tuple[int, int]:
    """(M̃, K) of AUDIT: target users to sample and donors per target (seed 004 Alg. 2, Th. 2).

    M̃ = ⌈log(3/δ)/λ⌉ and K = ⌈log(3M̃/δ)/log(1/(1−γ))⌉. ``delta`` in (0, 1/2)
    (Th. 2 as App. E.5 states it, the range its proof holds on), ``lam`` (λ,
    the share of users allowed to be envious) and ``gamma`` (γ, the share of
    other users one may envy) in (0, 1). Raises ValueError outside those ranges.
    """
    if not 0 < delta < 0.5:
        raise ValueError(f"delta must lie in (0, 1/2) (seed 004 Th. 2), got {delta}")
    for name, v in (("lambda", lam), ("gamma", gamma)):
        if not 0 < v < 1:
            raise ValueError(f"{name} must lie in (0, 1), got {v}")
    m = math.ceil(math.log(3 / delta) / lam)
    k = math.ceil(math.log(3 * m / delta) / math.log(1 / (1 - gamma)))
    return m, k


def audit_verdict(users: pl.DataFrame, *, delta: float, lam: float, gamma: float) -> dict:
    """AUDIT's system verdict from per-user certificates (seed 004 Alg. 2, Th. 2).

    ``users``: :func:`ocef_decisions` output, computed at δ/(3·targets) where
    targets = max(M̃, users logged) (more targets and donors than M̃ and K
    only strengthen both halves of Th. 2's argument). Returns a dict with
    ``M_tilde``, ``K``, ``targets``, ``min_donors``, ``design_ok`` and its
    ``design_reason``, counts per decision, and ``verdict``:
    ``not_envy_free`` as soon as any target is ``envy`` (needs no design
    condition: that user's envy is certified on its own); ``envy_free``
    ((ε, γ, λ)-envy-free) only when the design holds and every target is
    ``eps_no_envy``; else ``undecided``. The design cannot show that targets
    and donors were drawn uniformly; it is checked for size (≥ M̃ targets,
    each with ≥ K donors) and is only as good as the logging that drew them.
    """
    m_tilde, k = audit_sizes(delta, lam, gamma)
    counts = {d: int((users["decision"] == d).sum()) for d in DECISIONS}
    targets = users.height
    min_donors = int(users["n_donors"].min()) if targets else 0
    reasons = []
    if targets < m_tilde:
        reasons.append(f"{targets} target users logged, AUDIT needs {m_tilde}")
    if targets and min_donors < k:
        reasons.append(f"a target has {min_donors} donors, AUDIT needs {k}")
    design_ok = not reasons
    if counts["envy"]:
        verdict = "not_envy_free"
    elif design_ok and counts["eps_no_envy"] == targets:
        verdict = "envy_free"
    else:
        verdict = "undecided"
    return {
        "M_tilde": m_tilde,
        "K": k,
        "targets": targets,
        "min_donors": min_donors,
        "design_ok": design_ok,
        "design_reason": "; ".join(reasons) if reasons else "targets and donors per target suffice",
        "n_envy": counts["envy"],
        "n_eps_no_envy": counts["eps_no_envy"],
        "n_undecided": counts["undecided"],
        "verdict": verdict,
    }


def ocef_online(
    mu: np.ndarray,
    *,
    delta: float,
    alpha: float,
    epsilon: float,
    runs: int,
    rng: np.random.Generator,
    max_steps: int = 200_000,
    omega: float = OMEGA,
) -> dict[str, np.ndarray]:
    """OCEF as the interactive loop on Bernoulli arms (seed 004 Alg. 1), ``runs`` independent runs at once.

    ``mu``: true means, shape (K+1,) shared by all runs or (runs, K+1) (one
    target user per run, as AUDIT runs OCEF for many users at once), arm 0
    the baseline (the user's own policy). Each round picks ℓ_t uniformly from the active set, pulls the
    baseline instead when β_0 > min_{k∈S} β_k or ξ_t < 0 (eq. 4 with
    Φ(t) = min(Σ_k β_k N_k, φ(t)), φ from :func:`freedman_phi`), updates the
    Lemma 4 bounds, drops arms whose upper bound is ≤ μ̲_0 + ε, and stops
    with ``envy`` (line 8) or ``eps_no_envy`` (line 9). Runs still going at
    ``max_steps`` end ``undecided``.

    Returns arrays of length ``runs``: ``decision`` (str), ``duration``
    (rounds), ``cost`` (τμ_0 − Σ μ_{k_s}, the reward lost against always
    showing the user's own policy; negative when there is envy), and
    ``violated`` (True if the conservative constraint (3), with the true
    means, failed at some round). Raises ValueError for means outside [0, 1]
    or α outside (0, 1].
    """
    mu = np.asarray(mu, dtype=float)
    if mu.ndim == 1:
        mu = np.broadcast_to(mu, (runs, mu.size))
    if mu.ndim != 2 or mu.shape[0] != runs or mu.shape[1] < 2 or ((mu < 0) | (mu > 1)).any():
        raise ValueError("mu must hold at least 2 means in [0, 1], shape (K+1,) or (runs, K+1)")
    if not 0 < alpha <= 1:
        raise ValueError(f"alpha must lie in (0, 1], got {alpha}")
    check_delta(delta)
    K = mu.shape[1] - 1
    R = runs
    N = np.zeros((R, K + 1))
    S = np.zeros((R, K + 1))
    active = np.ones((R, K), dtype=bool)
    sum_explore = np.zeros(R)  # Σ_{s∈A} r_s
    n_explore = np.zeros(R)  # |A|
    cum_mu = np.zeros(R)
    violated = np.zeros(R, dtype=bool)
    decision = np.full(R, "undecided", dtype=object)
    duration = np.full(R, max_steps)
    cost = np.full(R, np.nan)
    live = np.arange(R)
    rows = np.arange(R)
    # β depends on the pull count only (K and δ fixed): one table, looked up each round
    table = lil_beta(np.arange(max_steps + 1), K + 1, delta, omega=omega)
    for t in range(1, max_steps + 1):
        if live.size == 0:
            break
        n, s, act = N[live], S[live], active[live]
        r = live.size
        beta = table[n.astype(np.int64)]
        mean = np.divide(s, n, out=np.zeros_like(s), where=n > 0)
        lower, upper = mean - beta, mean + beta
        # ℓ_t uniform over the active set
        pick = np.where(act, rng.random((r, K)), -1.0).argmax(axis=1) + 1
        min_beta = np.where(act, beta[:, 1:], np.inf).min(axis=1)
        phi = np.minimum((beta[:, 1:] * n[:, 1:]).sum(axis=1), freedman_phi(n_explore[live], delta))
        xi = sum_explore[live] - phi + lower[rows[:r], pick] + (n[:, 0] - (1 - alpha) * t) * upper[:, 0]
        k_t = np.where((beta[:, 0] > min_beta) | (xi < 0), 0, pick)
        mu_t = mu[live, k_t]
        reward = (rng.random(r) < mu_t).astype(float)
        N[live, k_t] += 1
        S[live, k_t] += reward
        explore = k_t != 0
        sum_explore[live] += reward * explore
        n_explore[live] += explore
        cum_mu[live] += mu_t
        violated[live] |= cum_mu[live] < (1 - alpha) * t * mu[live, 0] - 1e-12
        n, s = N[live], S[live]
        mean = s / np.maximum(n, 1)
        beta = table[n.astype(np.int64)]
        lower, upper = mean - beta, mean + beta
        act = act & (upper[:, 1:] > lower[:, [0]] + epsilon)
        active[live] = act
        envy = (act & (lower[:, 1:] > upper[:, [0]])).any(axis=1)
        free = ~act.any(axis=1)
        stop = envy | free
        if stop.any():
            done = live[stop]
            decision[done] = np.where(envy[stop], "envy", "eps_no_envy")
            duration[done] = t
            cost[done] = t * mu[done, 0] - cum_mu[done]
            live = live[~stop]
    if live.size:
        cost[live] = max_steps * mu[live, 0] - cum_mu[live]
    return {"decision": decision, "duration": duration, "cost": cost, "violated": violated}


def bandit_problem(name: str, n_arms: int = 10) -> np.ndarray:
    """Means of seed 004's bandit problems P1–P4 (App. D.1; DESIGN §5), ``n_arms`` arms with arm 0 the baseline.

    P1: μ_0 = 0.6, others 0.3. P2: μ_0 = 0.3, μ_1 = 0.6, others 0.3.
    P3: μ_k = 0.7 − 0.7 (k/10)^0.6. P4: P3 with μ_0 and μ_1 swapped.
    Raises ValueError for another name.
    """
    k = np.arange(n_arms, dtype=float)
    if name == "P1":
        return np.where(k == 0, 0.6, 0.3)
    if name == "P2":
        return np.where(k == 1, 0.6, 0.3)
    p3 = 0.7 - 0.7 * (k / 10) ** 0.6
    if name == "P3":
        return p3
    if name == "P4":
        p4 = p3.copy()
        p4[[0, 1]] = p3[[1, 0]]
        return p4
    raise ValueError(f"unknown bandit problem {name!r}; P1, P2, P3 or P4")
