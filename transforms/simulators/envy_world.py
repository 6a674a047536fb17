"""A recommender with known preferences, for the envy-freeness audit (seed 004 §5.1, App. C.2; DESIGN §4.7).

Pure: returns arrays and frames, writes nothing.

* Truth: M users, A items, preferences ρ[m, a] = sigmoid(1.5·⟨p_m, q_a⟩ +
  c_a − 0.5) from Gaussian user and item factors of rank ``true_rank`` and a
  Gaussian item popularity c_a; rewards are Bernoulli(ρ). 30 % of the users
  form group "1" (the minority), the rest group "0".
* The recommender: a softmax policy π^m = softmax(β · score_m) over the
  items (one item per round, no context, as seed 004 App. C.2).
* Scenarios (seed 004 §5.1 and App. C.1): ``envy-free`` scores with the
  true logits and β = 50 (near-argmax), so each user's own policy shows
  their favourite item and nobody can do better (OPT policies are
  envy-free); ``envious`` has measurement bias: the minority's scores carry
  no information about them (pure noise, β = 15), so a minority user gains
  from most majority users' policies, which show popular items. About 21 %
  of the users are then (0.1, 0.3)-envious.

The exact utilities u^m(π^n) follow from ρ and π (seed 004 eq. 1,
:func:`fairmon.transforms.envy.certify.utilities`), hence each user's envy
Δ^m = max_n u^m(π^n) − u^m(π^m) and the group utilities U(g, g') of eq. 6.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
import polars as pl

from fairmon.transforms.envy.certify import utilities

SCENARIOS = ("envious", "envy-free")


@dataclass(frozen=True)
class EnvySpec:
    """Parameters of one simulated system (see the module docstring)."""

    scenario: str = "envy-free"
    users: int = 400
    items: int = 60
    true_rank: int = 4
    minority: float = 0.3
    seed: int = 0

    def __post_init__(self):
        if self.scenario not in SCENARIOS:
            raise ValueError(f"scenario must be one of {SCENARIOS}, got {self.scenario!r}")
        if self.users < 2 or self.items < 2:
            raise ValueError("need at least 2 users and 2 items")


@dataclass(frozen=True)
class EnvySystem:
    """A simulated system: preferences ρ (M × A), policies π (M × A), the
    users' groups, and the exact utilities U[m, n] = u^m(π^n)."""

    rho: np.ndarray
    pi: np.ndarray
    group: np.ndarray
    utility: np.ndarray

    @property
    def envy(self) -> np.ndarray:
        """Δ^m = max_n u^m(π^n) − u^m(π^m) (≥ 0), shape (M,) (seed 004 §5.1)."""
        return np.maximum(self.utility.max(axis=1) - np.diag(self.utility), 0.0)

    def envious_share(self, epsilon: float, gamma: float) -> float:
        """Share of (ε, γ)-envious users (seed 004 Def. 3.2): those for whom more
        than a γ share of the other users' policies give more than ε above their own.
        The system is (ε, γ, λ)-envy-free when this share is at most λ."""
        gain = self.utility - np.diag(self.utility)[:, None]
        np.fill_diagonal(gain, -np.inf)
        share = (gain > epsilon).sum(axis=1) / (len(gain) - 1)
        return float((share > gamma).mean())

    def own_utility_by_group(self) -> dict[str, float]:
        """Mean of u^m(π^m) over each group's users: what its own-policy (default) traffic measures."""
        own = np.diag(self.utility)
        return {str(g): float(own[self.group == g].mean()) for g in np.unique(self.group)}

    def group_utility(self) -> dict[tuple[str, str], float]:
        """U(g, g') of seed 004 eq. 6: mean over m ∈ g of u^m(mean policy of g')."""
        out = {}
        for g in np.unique(self.group):
            for h in np.unique(self.group):
                out[(str(g), str(h))] = float(self.utility[np.ix_(self.group == g, self.group == h)].mean())
        return out


def build_system(spec: EnvySpec) -> EnvySystem:
    """Draw preferences and the policies of ``spec`` (module docstring). Deterministic in ``spec.seed``."""
    rng = np.random.default_rng(spec.seed)
    M, A, r = spec.users, spec.items, spec.true_rank
    minority = rng.random(M) < spec.minority
    P = rng.normal(size=(M, r))
    Q = rng.normal(size=(A, r)) / np.sqrt(r)
    logits = 1.5 * P @ Q.T + rng.normal(size=A) - 0.5
    rho = 1.0 / (1.0 + np.exp(-logits))
    scores = logits.copy()
    if spec.scenario == "envious":  # measurement bias: nothing about the minority reaches the model
        scores[minority] = 3.0 * rng.normal(size=(int(minority.sum()), A))
    beta = 50.0 if spec.scenario == "envy-free" else 15.0
    z = beta * (scores - scores.max(axis=1, keepdims=True))
    pi = np.exp(z)
    pi /= pi.sum(axis=1, keepdims=True)
    return EnvySystem(rho=rho, pi=pi, group=np.where(minority, "1", "0"), utility=utilities(rho, pi))


def audit_design(
    system: EnvySystem, *, delta: float, lam: float, gamma: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """AUDIT's sample (seed 004 Alg. 2 lines 1 and 3): M̃ target users drawn
    uniformly without replacement and, for each, K donors drawn uniformly
    from the other users. Returns (targets (M̃,), donors (M̃, K)) as user indices."""
    from fairmon.transforms.envy.certify import audit_sizes

    m_tilde, k = audit_sizes(delta, lam, gamma)
    M = system.utility.shape[0]
    if m_tilde > M or k > M - 1:
        raise ValueError(f"AUDIT needs {m_tilde} targets with {k} donors each; the system has {M} users")
    targets = rng.choice(M, size=m_tilde, replace=False)
    donors = np.stack([rng.choice(np.delete(np.arange(M), m), size=k, replace=False) for m in targets])
    return targets, donors


def simulate_envy_day(
    system: EnvySystem,
    *,
    ds: dt.date,
    targets: np.ndarray,
    donors: np.ndarray,
    pulls_own: int,
    pulls_per_donor: int,
    rng: np.random.Generator,
    default_rows: int = 0,
    random_rows: int = 0,
) -> pl.DataFrame:
    """One day of logs for the audit, in the contract layout (DESIGN §2).

    For every target user: ``pulls_own`` rows of their own policy (traffic
    ``default``) and ``pulls_per_donor`` rows for each of their donors
    (traffic ``swap``, ``policy_user_id`` the donor). Besides: ``default_rows``
    default-traffic rows of users drawn uniformly (each served by their own
    policy) and ``random_rows`` random-traffic rows (items uniform), so the
    day also has the traffic REO needs. ``targets``: (T,) user indices;
    ``donors``: (T, K). Each row draws an item from the serving policy and a
    Bernoulli(ρ) reward, the ``like`` signal. Returns ds, traffic, arm,
    request_id, item_id, user_id, policy_user_id, like, user_group.
    """
    M, A = system.pi.shape
    K = donors.shape[1] if len(targets) else 0
    user = np.concatenate(
        [
            np.repeat(targets, pulls_own + K * pulls_per_donor),
            rng.integers(0, M, size=default_rows),
            rng.integers(0, M, size=random_rows),
        ]
    )
    per_target = [
        np.concatenate([np.full(pulls_own, m), np.repeat(d, pulls_per_donor)])
        for m, d in zip(targets, donors, strict=True)
    ]
    policy = np.concatenate([*per_target, user[len(user) - default_rows - random_rows :]]).astype(np.int64)
    traffic = np.concatenate(
        [
            np.tile(
                np.r_[np.zeros(pulls_own, dtype=np.int8), np.ones(K * pulls_per_donor, dtype=np.int8)], len(targets)
            ),
            np.zeros(default_rows, dtype=np.int8),
            np.full(random_rows, 2, dtype=np.int8),
        ]
    )
    n = len(user)
    item = np.empty(n, dtype=np.int64)
    served = traffic != 2
    # an item from each row's serving policy (inverse CDF, one user's policy at a time), uniform for random traffic
    u = rng.random(n)
    for p in np.unique(policy[served]):
        rows = np.flatnonzero(served & (policy == p))
        item[rows] = np.searchsorted(np.cumsum(system.pi[p]), u[rows], side="right").clip(max=A - 1)
    item[~served] = rng.integers(0, A, size=int((~served).sum()))
    reward = rng.random(n) < system.rho[user, item]
    frame = pl.DataFrame(
        {
            "i": np.arange(n),
            "t": traffic,
            "user": user,
            "policy": policy,
            "item": item,
            "like": reward,
            "user_group": system.group[user],
        }
    )
    return frame.select(
        pl.lit(ds).alias("ds"),
        pl.col("t").replace_strict({0: "default", 1: "swap", 2: "random"}, return_dtype=pl.String).alias("traffic"),
        pl.lit("all").alias("arm"),
        (pl.lit(f"{ds:%Y%m%d}-") + pl.col("i").cast(pl.String)).alias("request_id"),
        (pl.lit("i") + pl.col("item").cast(pl.String)).alias("item_id"),
        (pl.lit("u") + pl.col("user").cast(pl.String)).alias("user_id"),
        pl.when(pl.col("t") == 1).then(pl.lit("u") + pl.col("policy").cast(pl.String)).alias("policy_user_id"),
        "like",
        "user_group",
    )


def simulate_audit(
    system: EnvySystem,
    *,
    days: int,
    delta: float,
    lam: float,
    gamma: float,
    epsilon: float,
    pulls_own: int,
    pulls_per_donor: int,
    rng: np.random.Generator,
) -> list[dict]:
    """AUDIT run day by day on a simulated system (seed 004 Alg. 2 over accumulated logs).

    Draws M̃ target users uniformly and K donors for each uniformly from the
    other users (:func:`fairmon.transforms.envy.certify.audit_sizes`), then each day
    adds ``pulls_own`` own-policy rows and ``pulls_per_donor`` rows per donor
    for every target (their positives are Binomial(n, u^m(π^n)): a row's
    item is drawn from the serving policy and its reward from the target's
    preference), and applies :func:`ocef_decisions` at δ/(3M̃) and
    :func:`audit_verdict` to everything so far. Returns one dict per day:
    ``day`` (1-based), ``verdict``, the decision counts and ``wrong_users``
    (users whose decision the exact utilities contradict).
    """
    from fairmon.transforms.envy.certify import audit_verdict, ocef_decisions

    targets, donors = audit_design(system, delta=delta, lam=lam, gamma=gamma, rng=rng)
    m_tilde = len(targets)
    mu = system.utility[targets[:, None], np.concatenate([targets[:, None], donors], axis=1)]
    truth_envy = (mu[:, 1:] > mu[:, [0]]).any(axis=1)
    truth_free = (mu[:, 1:] <= mu[:, [0]] + epsilon).all(axis=1)
    out = []
    for day, counts in enumerate(audit_counts(system, targets, donors, days, pulls_own, pulls_per_donor, rng), 1):
        users = ocef_decisions(counts, delta=delta / (3 * m_tilde), epsilon=epsilon)
        v = audit_verdict(users, delta=delta, lam=lam, gamma=gamma)
        idx = np.searchsorted(np.sort(targets), users["user_id"].to_numpy())
        order = np.argsort(targets)
        te, tf = truth_envy[order][idx], truth_free[order][idx]
        dec = users["decision"].to_numpy()
        wrong = int(((dec == "envy") & ~te).sum() + ((dec == "eps_no_envy") & ~tf).sum())
        out.append({"day": day, **v, "wrong_users": wrong})
    return out


def audit_counts(
    system: EnvySystem,
    targets: np.ndarray,
    donors: np.ndarray,
    days: int,
    pulls_own: int,
    pulls_per_donor: int,
    rng: np.random.Generator,
):
    """The accumulated counts of AUDIT's logs day by day, as the count stage
    gives them (sql/envy_user_counts.sql: ``user_id``, ``donor`` (null for
    the own policy), ``n``, ``reward_sum``): each day adds ``pulls_own``
    own-policy rows and ``pulls_per_donor`` rows per donor for every target
    of ``targets`` (T,) with ``donors`` (T, K), positives Binomial(n,
    u^m(π^n)) from the exact utilities. Yields one frame per day."""
    arms = np.concatenate([targets[:, None], donors], axis=1)  # arm 0 = own policy
    mu = system.utility[targets[:, None], arms]
    per = np.full(mu.shape, pulls_per_donor)
    per[:, 0] = pulls_own
    n, pos = np.zeros(mu.shape, dtype=np.int64), np.zeros(mu.shape, dtype=np.int64)
    own = pl.Series(np.tile(np.arange(arms.shape[1]), len(targets)) == 0)
    for _ in range(days):
        n, pos = n + per, pos + rng.binomial(per, mu)  # new arrays: a yielded frame keeps its day's counts
        yield pl.DataFrame(
            {
                "user_id": np.repeat(targets, arms.shape[1]),
                "donor": pl.Series(arms.ravel().astype(str)).set(own, None),
                "n": n.ravel(),
                "reward_sum": pos.ravel(),
            }
        )


def online_audit(
    system: EnvySystem,
    *,
    delta: float,
    alpha: float,
    lam: float,
    gamma: float,
    epsilon: float,
    rng: np.random.Generator,
    max_steps: int = 200_000,
) -> dict:
    """AUDIT run interactively (seed 004 Alg. 2 with Alg. 1 per target):
    draws M̃ targets and K donors each (:func:`audit_design`), then runs OCEF
    for every target with arms = (own policy, donors' policies), Bernoulli
    rewards with the exact means u^m(π^n), the conservative-exploration
    check at ``alpha`` and confidence δ/(3M̃)
    (:func:`fairmon.transforms.envy.certify.ocef_online`).

    Returns ``verdict`` (``not_envy_free`` if any target ends ``envy``,
    ``envy_free`` if all end ``eps_no_envy``, else ``undecided``), per target
    ``decision``, ``duration`` and ``cost`` arrays, ``violated`` (the
    conservative constraint (3) broken with the true means) and
    ``wrong_users`` (decisions the exact utilities contradict).
    """
    from fairmon.transforms.envy.certify import ocef_online

    targets, donors = audit_design(system, delta=delta, lam=lam, gamma=gamma, rng=rng)
    m_tilde = len(targets)
    mu = system.utility[targets[:, None], np.concatenate([targets[:, None], donors], axis=1)]
    r = ocef_online(
        mu, delta=delta / (3 * m_tilde), alpha=alpha, epsilon=epsilon, runs=m_tilde, rng=rng, max_steps=max_steps
    )
    decision = r["decision"]
    wrong = int(
        ((decision == "envy") & ~(mu[:, 1:] > mu[:, [0]]).any(axis=1)).sum()
        + ((decision == "eps_no_envy") & ~(mu[:, 1:] <= mu[:, [0]] + epsilon).all(axis=1)).sum()
    )
    verdict = (
        "not_envy_free"
        if (decision == "envy").any()
        else "envy_free"
        if (decision == "eps_no_envy").all()
        else "undecided"
    )
    return {
        "verdict": verdict,
        "decision": decision,
        "duration": r["duration"],
        "cost": r["cost"],
        "violated": r["violated"],
        "wrong_users": wrong,
    }
