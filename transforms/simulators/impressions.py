"""Simulated impressions with a known truth (pure: returns frames, writes nothing).

Model (one sensitive attribute with K groups, column ``young_adult`` in the
TikTok layout, values "0".."K-1"):

* default traffic of arm a: group S ~ Categorical(π^a), Y | S=k ~ Bernoulli(q_k),
  where π^a_k ∝ w^a_k π_k applies the arm's boosting weights w^a (seed 001
  §4.4: a weight > 1 boosts the group's exposure);
* random traffic (shared by all arms): S ~ Categorical(ρ), Y | S=k ~ Bernoulli(p_k).

Hence the truth: Q_k = π^a_k q_k, P_k = ρ_k p_k, U_k = Q_k/P_k (seed 001 eq. 4),
ΔU and REO from U (eqs. 3, 7, 19). When Y = 1 the six TikTok signals are a
uniformly drawn non-empty subset, so "Y = any signal" reproduces Y exactly.

The three regimes follow seed 001 §4.1 (DESIGN §5): the joint shares of
positives in random traffic are p = (0.01, 0.05), (0.001, 0.005) and
(0.0001, 0.0005), in default traffic q = (10·p_1, 5·p_2), so U ∝ (10, 5) and
REO = 1/3 in all three; the negatives take the complements
p̃_1 = P(Y=0, S=1) = 0.25·(1 − p_1 − p_2), p̃_2 = 0.75·(1 − p_1 − p_2) (the same
for q̃). Default and random traffic have the same volume n, as in the paper.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from fairmon.transforms.reo.estimate import relative_utilities, reo_of_utilities

TIKTOK_SIGNALS = ("like_video", "share", "follow", "finish", "download", "long_view")
TIKTOK_ATTRIBUTE = "young_adult"

#: Seed 001 §4.1 regimes: p = (P(Y=1, S=1), P(Y=1, S=2)) in random traffic;
#: each scales the first by 1/10 and 1/100 (DESIGN §5).
REGIMES: dict[str, dict] = {
    "dense": {"p": (0.01, 0.05)},
    "sparse": {"p": (0.001, 0.005)},
    "very_sparse": {"p": (0.0001, 0.0005)},
}
#: q = (10·p_1, 5·p_2) in default traffic (seed 001 §4.1), hence U ∝ (10, 5).
REGIME_Q_OVER_P = (10.0, 5.0)
#: Split of the negatives between the groups: p̃_k = share_k·(1 − p_1 − p_2) (seed 001 §4.1).
REGIME_NEGATIVE_SPLIT = (0.25, 0.75)


def regime_rates(p: tuple[float, ...]) -> dict[str, tuple[float, ...]]:
    """Group shares and positive rates of default and random traffic for the
    seed 001 §4.1 joint shares ``p`` (random) and q = (10·p_1, 5·p_2) (default):
    with the complements p̃_k = (0.25, 0.75)_k·(1 − Σp), the probability vector
    (p_1, p_2, p̃_1, p̃_2) gives share_k = p_k + p̃_k and rate_k = p_k / share_k
    (likewise for q). Returns {rec_share, rec_rate, rand_share, rand_rate}."""

    def split(joint: np.ndarray) -> tuple[tuple[float, ...], tuple[float, ...]]:
        neg = np.asarray(REGIME_NEGATIVE_SPLIT) * (1.0 - joint.sum())
        share = joint + neg
        return tuple(share.tolist()), tuple((joint / share).tolist())

    p = np.asarray(p, dtype=float)
    q = np.asarray(REGIME_Q_OVER_P) * p
    rec_share, rec_rate = split(q)
    rand_share, rand_rate = split(p)
    return {"rec_share": rec_share, "rec_rate": rec_rate, "rand_share": rand_share, "rand_rate": rand_rate}


@dataclass(frozen=True)
class SimulationSpec:
    """What to simulate. Shares and rates are per group (index = group value).

    Defaults give engagement rates of 25–36 % with the young-adult group (1)
    advantaged: U ∝ (1.08, 1.414), REO ≈ 0.134.
    """

    start: dt.date = dt.date(2026, 1, 1)
    days: int = 14
    rows_per_day: int = 50_000
    random_rows_per_day: int = 6_000
    rec_share: tuple[float, ...] = (0.45, 0.55)
    rec_rate: tuple[float, ...] = (0.30, 0.36)
    rand_share: tuple[float, ...] = (0.5, 0.5)
    rand_rate: tuple[float, ...] = (0.25, 0.28)
    arms: dict[str, dict[int, float]] = field(default_factory=lambda: {"all": {}})
    random_pool_days: int = 7
    seed: int = 0
    #: Forced-inserted post-recall traffic (seed 001 App. I.4): rows per day and
    #: arm (0 = none), group shares after the recall stage and positive rates.
    post_recall_rows_per_day: int = 0
    recall_share: tuple[float, ...] | None = None
    recall_rate: tuple[float, ...] | None = None
    #: Rows per request (consecutive rows share a request_id) and the
    #: intra-class correlation of the positive indicator within a request
    #: (same group): each row's uniform draw is, with probability √icc, the
    #: request's shared one (transforms/reo/cluster.py). Marginal rates, and so
    #: every truth, are unchanged. 1 and 0: independent rows.
    request_size: int = 1
    icc: float = 0.0
    #: One group per request (the group is the requesting user's attribute,
    #: e.g. young_adult) rather than per row (an item attribute).
    group_per_request: bool = False

    def __post_init__(self) -> None:
        K = len(self.rec_share)
        if not (len(self.rec_rate) == len(self.rand_share) == len(self.rand_rate) == K) or K < 1:
            raise ValueError("rec_share, rec_rate, rand_share and rand_rate must have the same length >= 1")
        for name in ("rec_share", "rand_share"):
            v = np.asarray(getattr(self, name))
            if (v < 0).any() or not np.isclose(v.sum(), 1.0):
                raise ValueError(f"{name} must be non-negative and sum to 1, got {tuple(v)}")
        for name in ("rec_rate", "rand_rate"):
            v = np.asarray(getattr(self, name))
            if (v < 0).any() or (v > 1).any():
                raise ValueError(f"{name} must be in [0, 1], got {tuple(v)}")
        if self.days < 1 or self.rows_per_day < 1 or self.random_rows_per_day < 1 or self.random_pool_days < 1:
            raise ValueError("days, rows_per_day, random_rows_per_day and random_pool_days must be >= 1")
        if self.request_size < 1 or not 0.0 <= self.icc < 1.0:
            raise ValueError("request_size must be >= 1 and icc in [0, 1)")
        if self.post_recall_rows_per_day < 0:
            raise ValueError("post_recall_rows_per_day must be >= 0")
        if self.post_recall_rows_per_day:
            if self.recall_share is None or self.recall_rate is None:
                raise ValueError("post_recall_rows_per_day > 0 needs recall_share and recall_rate")
            share, rate = np.asarray(self.recall_share), np.asarray(self.recall_rate)
            if len(share) != K or len(rate) != K:
                raise ValueError("recall_share and recall_rate must have one value per group")
            if (share < 0).any() or not np.isclose(share.sum(), 1.0) or (rate < 0).any() or (rate > 1).any():
                raise ValueError("recall_share must be a distribution and recall_rate in [0, 1]")
        for arm, w in self.arms.items():
            if any(k < 0 or k >= K or x <= 0 for k, x in w.items()):
                raise ValueError(f"arm {arm!r}: boosting weights need group indices in 0..{K - 1} and weights > 0")

    @property
    def K(self) -> int:
        return len(self.rec_share)

    def arm_share(self, arm: str) -> np.ndarray:
        """π^a: default-traffic group shares of ``arm`` after its boosting weights."""
        w = np.array([self.arms[arm].get(k, 1.0) for k in range(self.K)])
        s = w * np.asarray(self.rec_share)
        return s / s.sum()

    def true_QP(self, arm: str) -> tuple[np.ndarray, np.ndarray]:
        """(Q, P), shapes (K,): true joint shares of positives in default (arm) and random traffic."""
        Q = self.arm_share(arm) * np.asarray(self.rec_rate)
        P = np.asarray(self.rand_share) * np.asarray(self.rand_rate)
        return Q, P

    def true_stage_utilities(self, arm: str) -> dict[str, np.ndarray]:
        """True U per stage of seed 001 App. I.4, shapes (K,): recall
        Q^pr/P, ranking Q^rec/Q^pr and system Q^rec/P, with the joint
        post-recall share Q^pr_k = recall_share_k · recall_rate_k (the recall
        stage is shared by the arms; the arms' boosting acts at ranking).
        Raises ValueError when the spec has no post-recall stage."""
        if not self.post_recall_rows_per_day:
            raise ValueError("the spec has no post-recall stage (post_recall_rows_per_day = 0)")
        Q, P = self.true_QP(arm)
        Qpr = np.asarray(self.recall_share) * np.asarray(self.recall_rate)
        return {"recall": Qpr / P, "ranking": Q / Qpr, "system": Q / P}

    def pools(self) -> list[tuple[dt.date, dt.date]]:
        """Consecutive pooled random-traffic ranges covering the simulated days."""
        out = []
        for i in range(0, self.days, self.random_pool_days):
            a = self.start + dt.timedelta(days=i)
            b = self.start + dt.timedelta(days=min(i + self.random_pool_days, self.days) - 1)
            out.append((a, b))
        return out


def regime_spec(regime: str, **overrides) -> SimulationSpec:
    """A :class:`SimulationSpec` for one of the seed 001 §4.1 regimes (see
    :data:`REGIMES`, :func:`regime_rates`): the regime's p and q, and as much
    random as default traffic per day (``rows_per_day``, default 50,000; the
    paper draws both from one n). Other fields come from ``overrides``."""
    if regime not in REGIMES:
        raise ValueError(f"unknown regime {regime!r}; expected one of {sorted(REGIMES)}")
    rows = overrides.pop("rows_per_day", 50_000)
    rand_rows = overrides.pop("random_rows_per_day", rows)
    return SimulationSpec(
        rows_per_day=rows, random_rows_per_day=rand_rows, **regime_rates(REGIMES[regime]["p"]), **overrides
    )


def truth_tables(spec: SimulationSpec) -> tuple[pl.DataFrame, pl.DataFrame]:
    """True per-group values and true REO for every simulated day and arm.

    Returns (groups, reo): groups has ds, arm, attribute, group, Q, P, U,
    delta_U; reo has ds, arm, attribute, K, reo. Source: seed 001 eqs. 3, 4, 7, 19.
    """
    g_rows, r_rows = [], []
    for d in range(spec.days):
        ds = spec.start + dt.timedelta(days=d)
        for arm in spec.arms:
            Q, P = spec.true_QP(arm)
            U = Q / P
            dU = relative_utilities(U)
            for k in range(spec.K):
                g_rows.append(
                    {
                        "ds": ds,
                        "arm": arm,
                        "attribute": TIKTOK_ATTRIBUTE,
                        "group": str(k),
                        "Q": Q[k],
                        "P": P[k],
                        "U": U[k],
                        "delta_U": dU[k],
                    }
                )
            r_rows.append(
                {"ds": ds, "arm": arm, "attribute": TIKTOK_ATTRIBUTE, "K": spec.K, "reo": reo_of_utilities(U)}
            )
    return pl.DataFrame(g_rows), pl.DataFrame(r_rows)


def stage_truth_table(spec: SimulationSpec) -> pl.DataFrame:
    """True stage-wise values (seed 001 App. I.4) for every simulated day and
    arm: ds, arm, attribute, stage, group, U, delta_U, reo — the columns of
    ``reo_stage`` that have a truth. Empty when the spec has no post-recall
    stage. Source: seed 001 eqs. 3, 7 and App. I.4."""
    if not spec.post_recall_rows_per_day:
        return pl.DataFrame()
    rows = []
    for d in range(spec.days):
        ds = spec.start + dt.timedelta(days=d)
        for arm in spec.arms:
            for stage, U in spec.true_stage_utilities(arm).items():
                dU, reo = relative_utilities(U), reo_of_utilities(U)
                rows += [
                    {
                        "ds": ds,
                        "arm": arm,
                        "attribute": TIKTOK_ATTRIBUTE,
                        "stage": stage,
                        "group": str(k),
                        "U": U[k],
                        "delta_U": dU[k],
                        "reo": reo,
                    }
                    for k in range(spec.K)
                ]
    return pl.DataFrame(rows)


def simulate_counts(
    Q: np.ndarray, P: np.ndarray, n_rec: int, n_rand: int, size: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Draw the per-group positive counts of ``size`` independent days.

    The counts (#{Y=1,S=k}) of n i.i.d. rows are one multinomial draw over the
    K categories (Y=1, S=k) plus "everything else": exactly the distribution of
    aggregating the rows of :func:`simulate_rows`. Returns arrays of shape
    (size, K) for default and random traffic.
    """
    Q, P = np.asarray(Q, float), np.asarray(P, float)
    a = rng.multinomial(n_rec, np.append(Q, 1 - Q.sum()), size=size)[:, :-1]
    b = rng.multinomial(n_rand, np.append(P, 1 - P.sum()), size=size)[:, :-1]
    return a, b


def _rows(
    n: int,
    share: np.ndarray,
    rate: np.ndarray,
    rng: np.random.Generator,
    request_size: int = 1,
    icc: float = 0.0,
    group_per_request: bool = False,
) -> pl.DataFrame:
    req = np.arange(n) // request_size
    if request_size > 1 and group_per_request:
        group = rng.choice(len(share), size=int(req[-1]) + 1, p=share)[req]
    else:
        group = rng.choice(len(share), size=n, p=share)
    u = rng.random(n)
    if request_size > 1:  # consecutive rows form requests; a shared draw correlates their positives
        shared = rng.random(int(req[-1]) + 1)[req]
        u = np.where(rng.random(n) < np.sqrt(icc), shared, u)
    y = u < rate[group]
    mask = np.where(y, rng.integers(1, 64, size=n), 0)
    cols = {s: ((mask >> i) & 1).astype(np.int8) for i, s in enumerate(TIKTOK_SIGNALS)}
    # int8 as in the published data for few groups; wider when K would not fit (group values are 0..K-1)
    out = pl.DataFrame({TIKTOK_ATTRIBUTE: group.astype(np.int8 if len(share) <= 128 else np.int32), **cols})
    return out.with_columns(pl.Series("__req", np.arange(n) // request_size)) if request_size > 1 else out


def simulate_day(spec: SimulationSpec, day: int) -> pl.DataFrame:
    """Default-traffic rows of one day (all arms) in the TikTok layout.

    Columns: request_id, item_id, arm, young_adult, the six signals (0/1).
    Deterministic in (spec.seed, day).
    """
    rng = np.random.default_rng([spec.seed, day, 0])
    ds = spec.start + dt.timedelta(days=day)
    frames = []
    for arm in spec.arms:
        f = _rows(
            spec.rows_per_day,
            spec.arm_share(arm),
            np.asarray(spec.rec_rate),
            rng,
            spec.request_size,
            spec.icc,
            spec.group_per_request,
        )
        frames.append(f.with_columns(pl.lit(arm).alias("arm")))
    out = pl.concat(frames)
    return _with_ids(out, f"{ds}-d", rng)


def simulate_post_recall_day(spec: SimulationSpec, day: int) -> pl.DataFrame:
    """Forced-inserted post-recall rows of one day (seed 001 App. I.4), every
    arm, TikTok layout as :func:`simulate_day`: ``post_recall_rows_per_day``
    rows per arm with group shares ``recall_share`` and rates ``recall_rate``.
    Deterministic in (spec.seed, day). Raises ValueError without a post-recall stage."""
    if not spec.post_recall_rows_per_day:
        raise ValueError("the spec has no post-recall stage (post_recall_rows_per_day = 0)")
    rng = np.random.default_rng([spec.seed, day, 2])
    ds = spec.start + dt.timedelta(days=day)
    share, rate = np.asarray(spec.recall_share), np.asarray(spec.recall_rate)
    frames = [
        _rows(
            spec.post_recall_rows_per_day, share, rate, rng, spec.request_size, spec.icc, spec.group_per_request
        ).with_columns(pl.lit(arm).alias("arm"))
        for arm in spec.arms
    ]
    return _with_ids(pl.concat(frames), f"{ds}-p", rng)


def simulate_random_pool(spec: SimulationSpec, start: dt.date, end: dt.date) -> pl.DataFrame:
    """Random-traffic rows of the pooled range start..end (TikTok layout, no arm).

    ``random_rows_per_day`` rows for each day of the range. Deterministic in
    (spec.seed, start).
    """
    n_days = (end - start).days + 1
    rng = np.random.default_rng([spec.seed, (start - spec.start).days, 1])
    out = _rows(
        spec.random_rows_per_day * n_days,
        np.asarray(spec.rand_share),
        np.asarray(spec.rand_rate),
        rng,
        spec.request_size,
        spec.icc,
        spec.group_per_request,
    )
    return _with_ids(out, f"{start}-r", rng)


def _with_ids(frame: pl.DataFrame, prefix: str, rng: np.random.Generator) -> pl.DataFrame:
    n = frame.height
    if "__req" in frame.columns:  # requests of several rows: the id names the request (and arm); items differ within it
        arm = (pl.col("arm") + "-") if "arm" in frame.columns else pl.lit("")
        size = int(frame.group_by("__req", *(["arm"] if "arm" in frame.columns else [])).len().get_column("len").max())
        pos = pl.int_range(0, pl.len()).over("__req", *(["arm"] if "arm" in frame.columns else []))
        base = pl.Series(rng.integers(0, 1_000_000 // size, size=n)) * size
        return (
            frame.with_columns(
                (pl.lit(prefix + "-") + arm + pl.col("__req").cast(pl.String)).alias("request_id"),
                (pl.lit("v") + (base + pos).cast(pl.String)).alias("item_id"),
            )
            .drop("__req")
            .select("request_id", "item_id", *[c for c in frame.columns if c != "__req"])
        )
    ids = pl.int_range(0, n, eager=True).cast(pl.String)
    items = pl.Series(rng.integers(0, 1_000_000, size=n)).cast(pl.String)
    return frame.with_columns(
        (pl.lit(prefix + "-") + ids).alias("request_id"), (pl.lit("v") + items).alias("item_id")
    ).select("request_id", "item_id", *[c for c in frame.columns])
