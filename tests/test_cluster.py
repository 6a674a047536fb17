"""Cluster-robust (sandwich) covariance, cluster bootstrap and folds (issue 20;
transforms/reo/cluster.py, DESIGN §4.1 "Clustered rows").

Every expected value here is derived by hand or from an independent formula:
the K = 2 sandwich written out entry by entry, the multinomial covariance
(diag(Q) − QQᵀ)/n that one-row clusters must reproduce exactly up to
n/(n−1), and simulated requests whose truth is known (transforms/simulators/impressions.py).
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl
import pytest
from scipy import stats

from fairmon.api.counting import cluster_bucket
from fairmon.transforms.reo.ab import ab_estimates
from fairmon.transforms.reo.cluster import BucketSums, keys_and_index, ratio_log_covariance, sums_from_rows
from fairmon.transforms.reo.estimate import (
    delta_u_covariance,
    estimate_reo,
    parity_test,
    relative_utilities,
    reo_bias_corrected,
    reo_interval_near_zero,
    reo_log_gradient,
    reo_of_utilities,
)
from fairmon.transforms.reo.stage import reo_stage_table, rsp_table, user_precision_table
from fairmon.transforms.simulators.impressions import SimulationSpec, simulate_day, simulate_random_pool


def test_k2_sandwich_by_hand():
    # Three buckets, K = 2. n = 6, Q̂ = (3/6, 2/6).
    # Residuals e_b = a_b − Q̂ n_b: (0, −2/3), (1/2, 0), (−1/2, 2/3).
    # Σ e eᵀ = [[1/2, −1/3], [−1/3, 8/9]]; × G/(G−1) = 3/2; ÷ n² = 36.
    s = BucketSums(np.array([[1, 0], [2, 1], [0, 1]]), np.array([2, 3, 1]))
    expected = np.array([[0.75, -0.5], [-0.5, 4 / 3]]) / 36
    np.testing.assert_allclose(s.share_covariance(), expected, rtol=1e-14)
    # Ĉov(log Q̂) = D⁻¹ Ĉov(Q̂) D⁻¹, D = diag(1/2, 1/3)
    D = np.diag([2.0, 3.0])
    np.testing.assert_allclose(s.log_share_covariance(), D @ expected @ D, rtol=1e-14)
    assert s.G == 3 and s.n == 6
    # the factor: Z = √(3/2) e / (n Q̂) = √(3/2) · [[0, −1/3], [1/6, 0], [−1/6, 1/3]], and Zᵀ Z is the same covariance
    Z = np.sqrt(1.5) * np.array([[0, -1 / 3], [1 / 6, 0], [-1 / 6, 1 / 3]])
    np.testing.assert_allclose(s.log_share_factor(), Z, rtol=1e-14, atol=1e-17)
    np.testing.assert_allclose(Z.T @ Z, D @ expected @ D, rtol=1e-14)


def test_empty_buckets_dropped_and_single_bucket_undefined():
    s = BucketSums(np.array([[1, 0], [0, 0], [2, 1]]), np.array([2, 0, 3]))
    assert s.G == 2
    one = BucketSums(np.array([[3, 2]]), np.array([9]))
    assert np.isnan(one.share_covariance()).all()
    with pytest.raises(ValueError):
        BucketSums(np.array([[3, 2]]), np.array([4]))  # more positives than rows
    with pytest.raises(ValueError):
        BucketSums(np.array([[1, 0]]), np.array([2, 2]))


def test_one_row_per_cluster_is_multinomial_times_n_over_n_minus_1():
    rng = np.random.default_rng(3)
    n, K = 400, 3
    group = rng.integers(-1, K, size=n)  # −1: a row of no listed group
    y = rng.random(n) < 0.4
    s = sums_from_rows(np.arange(n), group, y, K)
    Q = np.array([np.sum(y & (group == k)) for k in range(K)]) / n
    multinomial = (np.diag(Q) - np.outer(Q, Q)) / n
    np.testing.assert_allclose(s.share_covariance(), multinomial * n / (n - 1), rtol=1e-12)


def test_reo_with_singleton_clusters_scales_the_delta_se_exactly():
    # One row per cluster in both traffics with n_rec = n_rand: every log-share
    # covariance is the multinomial one × n/(n−1), so the robust SE of REO is
    # the multinomial SE × √(n/(n−1)) (the common −1/n term cancels in REO).
    rng = np.random.default_rng(7)
    n = 3000
    g_rec, g_rand = rng.integers(0, 2, n), rng.integers(0, 2, n)
    y_rec = rng.random(n) < np.where(g_rec == 0, 0.30, 0.40)
    y_rand = rng.random(n) < 0.2
    a = np.bincount(g_rec[y_rec], minlength=2)
    b = np.bincount(g_rand[y_rand], minlength=2)
    m = estimate_reo(["x", "y"], a, n, b, n)
    r = estimate_reo(
        ["x", "y"],
        a,
        n,
        b,
        n,
        clusters_rec=sums_from_rows(np.arange(n), g_rec, y_rec, 2),
        clusters_rand=sums_from_rows(np.arange(n, 2 * n), g_rand, y_rand, 2),  # clusters of its own
    )
    # the joint sandwich runs over the 2n clusters of both traffics: small-sample factor 2n/(2n − 1)
    f = 2 * n / (2 * n - 1)
    assert r.reo == pytest.approx(m.reo, abs=1e-15)
    assert r.se == pytest.approx(m.se * np.sqrt(f), rel=1e-10)
    np.testing.assert_allclose(r.se_delta_U, m.se_delta_U * np.sqrt(f), rtol=1e-10)
    assert r.design_effect == pytest.approx(f, rel=1e-10)
    assert m.design_effect == 1.0


def test_parity_test_needs_more_bucket_df_than_contrasts():
    # K = 40 groups: 39 contrasts. 16 buckets shared by both samples give a joint robust
    # covariance of rank ≤ 15, singular on the contrasts: the Wald test is undefined (a
    # solve would return garbage, p = 0 on real data), so it is NaN with a reason.
    # 64 buckets (rank ≤ 63) define it.
    rng = np.random.default_rng(40)
    n, K = 20_000, 40
    g_rec, g_rand = rng.integers(0, K, n), rng.integers(0, K, n)
    y_rec, y_rand = rng.random(n) < 0.3, rng.random(n) < 0.3
    a, b = np.bincount(g_rec[y_rec], minlength=K), np.bincount(g_rand[y_rand], minlength=K)
    groups = [str(k) for k in range(K)]

    def est(buckets: int):
        rows = np.arange(n) % buckets
        return estimate_reo(
            groups,
            a,
            n,
            b,
            n,
            clusters_rec=sums_from_rows(rows, g_rec, y_rec, K),
            clusters_rand=sums_from_rows(rows, g_rand, y_rand, K),
        )

    few, many = est(16), est(64)
    assert np.isnan(few.parity_p_value) and "rank at most 15" in few.reason and "K − 1 = 39" in few.reason
    assert np.isfinite(few.ci_high)  # the interval itself stays defined
    assert 0 < many.parity_p_value <= 1 and "parity test undefined" not in (many.reason or "")


@pytest.mark.parametrize("K, buckets", [(12, 16), (40, 8)])
def test_factored_robust_estimate_equals_the_dense_formulas(K, buckets):
    # Both samples bucketed: estimate_reo never forms Σ (K × K). Every figure must
    # equal the dense one written out here: Σ = A V Aᵀ with V the joint sandwich of
    # log Q̂ − log P̂ over the shared buckets (V = G/(G−1) Σ_g h_g h_gᵀ, h_g = z^Q_g − z^P_g,
    # z_{g,k} = e_{g,k}/(n share_k)), se = √(gᵀVg), reo_bc from tr Σ, the interval from Σ.
    # (12, 16): V of rank ≤ 15 spans the 11 contrasts; (40, 8): rank ≤ 7 < 39.
    rng = np.random.default_rng(K)
    n = 8000
    g_rec, g_rand = rng.integers(0, K, n), rng.integers(0, K, n)
    y_rec, y_rand = rng.random(n) < 0.25 + 0.01 * g_rec, rng.random(n) < 0.3
    rec = sums_from_rows(np.arange(n) % buckets, g_rec, y_rec, K)
    rand = sums_from_rows(rng.integers(0, buckets, n), g_rand, y_rand, K)
    a, b = rec.pos.sum(axis=0).astype(int), rand.pos.sum(axis=0).astype(int)
    e = estimate_reo([str(k) for k in range(K)], a, n, b, n, clusters_rec=rec, clusters_rand=rand)
    U = a / b

    def z(s):  # every bucket 0..buckets−1 is non-empty in both samples: rows align
        share = s.pos.sum(axis=0) / s.n
        return (s.pos - np.outer(s.rows, share)) / (s.n * share)

    h = z(rec) - z(rand)
    V = buckets / (buckets - 1) * h.T @ h
    S = delta_u_covariance(U, V)
    g = reo_log_gradient(U)
    np.testing.assert_allclose(e.se_delta_U, np.sqrt(np.diag(S)), rtol=1e-9)
    assert e.se == pytest.approx(np.sqrt(g @ V @ g), rel=1e-9)
    assert e.reo_bc == pytest.approx(reo_bias_corrected(e.reo, S), rel=1e-9)
    # the intervals take t with buckets − 1 df: Σ widened by (t_{G−1}/z)² (few-cluster correction)
    t_over_z = stats.t.ppf(0.975, buckets - 1) / stats.norm.ppf(0.975)
    lo, hi = reo_interval_near_zero(relative_utilities(U), S * t_over_z**2, 0.95)
    assert e.ci_high == pytest.approx(hi, rel=1e-6)
    dU = relative_utilities(U)
    t = stats.t.ppf(0.975, buckets - 1)
    np.testing.assert_allclose(e.ci_high_delta_U, dU + t * np.sqrt(np.diag(S)), rtol=1e-9)
    if K == 12:
        # the few-cluster Wald reference: W/(K − 1) against F(K − 1, G − 1)
        assert e.parity_p_value == pytest.approx(stats.f.sf(parity_test(U, V)[0] / 11, 11, buckets - 1), rel=1e-9)
        assert e.ci_low == (0.0 if e.parity_p_value >= 0.05 else pytest.approx(lo, rel=1e-6))
    else:
        assert np.isnan(e.parity_p_value) and e.ci_low == pytest.approx(lo, rel=1e-6)


@pytest.mark.coverage
def test_hashed_buckets_of_independent_rows_keep_the_multinomial_variance():
    # Rows are their own clusters, hashed into 128 buckets: the bucketed
    # sandwich is unbiased, so its variance of REO averages the multinomial one.
    rng = np.random.default_rng(11)
    n, deffs = 4000, []
    for _ in range(200):
        g = rng.integers(0, 2, (2, n))
        y = rng.random((2, n)) < np.array([[0.3], [0.2]]) * (1 + 0.3 * g)
        a, b = (np.bincount(g[i][y[i]], minlength=2) for i in (0, 1))
        c = [sums_from_rows(rng.integers(0, 128, n), g[i], y[i], 2) for i in (0, 1)]
        deffs.append(estimate_reo(["x", "y"], a, n, b, n, clusters_rec=c[0], clusters_rand=c[1]).design_effect)
    # a χ²_127-like ratio: mean 1, sd ≈ √(2/127) ≈ 0.125 per draw, 0.009 for the mean
    assert np.mean(deffs) == pytest.approx(1.0, abs=0.04)


def test_bucket_bootstrap_variance_matches_the_sandwich():
    # Resampling G buckets with replacement: Var*(Q̂*) → (G−1)/G × sandwich.
    rng = np.random.default_rng(5)
    G, K = 60, 2
    rows = rng.integers(5, 40, G).astype(float)
    pos = np.column_stack([rng.binomial(rows.astype(int), p) for p in (0.2, 0.1)]).astype(float)
    s = BucketSums(pos, rows)
    P, N = s.resample(40_000, rng)
    assert P.shape == (40_000, K) and N.shape == (40_000,)
    boot = np.cov((P / N[:, None]).T)
    np.testing.assert_allclose(boot, s.share_covariance() * (G - 1) / G, rtol=0.05)
    # each replicate is the sum of its drawn buckets, written out: the same draws, bucket by bucket
    idx = np.random.default_rng(9).integers(0, G, size=(3, G))
    P3, N3 = s.resample(3, np.random.default_rng(9))
    np.testing.assert_array_equal(P3, [pos[i].sum(axis=0) for i in idx])
    np.testing.assert_array_equal(N3, [rows[i].sum() for i in idx])


def test_folds_and_leave_one_out_keep_whole_buckets():
    s = BucketSums(np.arange(24, dtype=float).reshape(12, 2), np.full(12, 50.0))
    pos, rows = s.folds(4, np.random.default_rng(0))
    assert pos.shape == (4, 2) and (rows == 150).all()  # 3 whole buckets of 50 rows each
    np.testing.assert_allclose(pos.sum(axis=0), s.pos.sum(axis=0))
    with pytest.raises(ValueError, match="12 non-empty buckets cannot fill 13 folds"):
        s.folds(13, np.random.default_rng(0))
    lp, lr = s.leave_one_out()
    np.testing.assert_allclose(lp[3], s.pos.sum(axis=0) - s.pos[3])
    assert (lr == 550).all()


def test_ab_delta_with_singleton_clusters_scales_exactly():
    rng = np.random.default_rng(2)
    n = 2500
    frames = []
    for i, rate in enumerate(((0.30, 0.40), (0.32, 0.36), (0.2, 0.2))):  # treatment, control, random
        g = rng.integers(0, 2, n)
        y = rng.random(n) < np.asarray(rate)[g]
        frames.append((np.bincount(g[y], minlength=2), sums_from_rows(np.arange(n) + i * n, g, y, 2)))
    (aT, cT), (aC, cC), (b, cR) = frames
    m = ab_estimates(["x", "y"], aT, n, aC, n, b, n)
    r = ab_estimates(["x", "y"], aT, n, aC, n, b, n, clusters=(cT, cC, cR))
    f = 3 * n / (3 * n - 1)  # the joint sandwich over the 3n clusters of the three samples
    for em, er in zip(m, r, strict=True):
        assert er.diff == pytest.approx(em.diff, abs=1e-15)
        assert er.se == pytest.approx(em.se * np.sqrt(f), rel=1e-10)
        assert er.design_effect == pytest.approx(f, rel=1e-10)


def test_ab_clustered_methods_run_on_buckets_and_delta_paper_is_nan():
    rng = np.random.default_rng(4)
    sums, counts = [], []
    for rate in ((0.30, 0.40), (0.30, 0.40), (0.2, 0.2)):
        spec_rows = 6000
        req = np.arange(spec_rows) // 6
        g = rng.integers(0, 2, req[-1] + 1)[req]  # one group per request (a user attribute)
        shared = rng.random(req[-1] + 1)[req]
        u = np.where(rng.random(spec_rows) < 0.5, shared, rng.random(spec_rows))
        y = u < np.asarray(rate)[g]
        counts.append(np.bincount(g[y], minlength=2))
        sums.append(sums_from_rows(req % 64, g, y, 2))
    out = ab_estimates(
        ["x", "y"],
        counts[0],
        6000,
        counts[1],
        6000,
        counts[2],
        6000,
        methods=("delta", "delta_paper", "partition", "bootstrap"),
        n_boot=300,
        clusters=tuple(sums),
    )
    by = {(e.method, e.metric): e for e in out}
    assert np.isnan(by["delta_paper", "reo"].se) and "independent" in (by["delta_paper", "reo"].reason or "")
    for method in ("delta", "partition", "bootstrap"):
        e = by[method, "reo"]
        assert np.isfinite(e.se) and e.se > 0, method
        if method == "partition":  # no D_REO interval by partition (issue 38); its D_k rows stand
            assert np.isnan(e.ci_low) and e.reason.startswith("partition: no D_REO interval")
            d = by[method, "delta_U:x"]
            assert d.ci_low < d.diff < d.ci_high
        else:
            assert e.ci_low <= e.diff <= e.ci_high or "near parity" in (e.reason or ""), method
    # whole requests of 6 rows share group and, at ICC 0.25, positives: far above 1
    assert 1.5 < by["delta", "reo"].design_effect < 6.0


def _rep(spec: SimulationSpec, buckets: int) -> tuple[bool, bool, float]:
    Q, P = spec.true_QP("all")
    truth = reo_of_utilities(Q / P)
    sides = []
    for frame in (simulate_day(spec, 0), simulate_random_pool(spec, spec.start, spec.start)):
        y = frame.select(pl.max_horizontal(pl.exclude("request_id", "item_id", "young_adult", "arm")) > 0)
        y = y.to_series().to_numpy()
        g = frame.get_column("young_adult").to_numpy().astype(np.int64)
        b = cluster_bucket(frame.get_column("request_id"), buckets).to_numpy()
        sides.append((np.bincount(g[y], minlength=2), frame.height, sums_from_rows(b, g, y, 2)))
    (a, n_rec, c_rec), (b, n_rand, c_rand) = sides
    m = estimate_reo(["0", "1"], a, n_rec, b, n_rand)
    r = estimate_reo(["0", "1"], a, n_rec, b, n_rand, clusters_rec=c_rec, clusters_rand=c_rand)
    return m.ci_low <= truth <= m.ci_high, r.ci_low <= truth <= r.ci_high, r.design_effect


@pytest.mark.coverage
def test_correlated_requests_robust_covers_where_multinomial_does_not():
    # Requests of 8 rows, one group per request (a user attribute), ICC 0.3:
    # design effect ≈ 1 + 7·ρ for membership and positives alike. 200
    # replications: the Monte-Carlo SE of a 0.95 coverage is 0.015.
    res = [
        _rep(
            SimulationSpec(
                rows_per_day=8000, random_rows_per_day=8000, request_size=8, icc=0.3, group_per_request=True, seed=s
            ),
            128,
        )
        for s in range(200)
    ]
    m_cover, r_cover, deff = (np.mean([x[i] for x in res]) for i in range(3))
    assert r_cover >= 0.91
    assert m_cover <= 0.80
    assert deff > 2.0


def test_ratio_sandwich_of_singletons_is_binomial():
    rng = np.random.default_rng(8)
    n, K = 900, 3
    g = rng.integers(0, K, n)
    y = rng.random(n) < np.array([0.2, 0.5, 0.7])[g]
    onehot = np.eye(K)[g]
    V = ratio_log_covariance(onehot * y[:, None], onehot)
    n_k = onehot.sum(axis=0)
    p = (onehot * y[:, None]).sum(axis=0) / n_k
    np.testing.assert_allclose(V, np.diag((1 - p) / (p * n_k)) * n / (n - 1), rtol=1e-12, atol=1e-15)
    with pytest.raises(ValueError):
        ratio_log_covariance(np.ones((3, 2)), np.ones((3, 3)))


DS = dt.date(2026, 1, 1)


def _day_with_buckets(n: int, seed: int, missing: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """group_counts rows and per-bucket counts of one day in which every row is
    its own cluster (bucket = row index, the traffics' clusters distinct): default arm 'c', post_recall arm 'c'
    and random traffic, n rows each, attribute 's' with groups a, b (and
    ``missing`` default rows of the '(missing)' group)."""
    rng = np.random.default_rng(seed)
    frames = []
    for i, (traffic, arm, rates) in enumerate(
        (("default", "c", (0.12, 0.06)), ("post_recall", "c", (0.08, 0.06)), ("random", "all", (0.05, 0.05)))
    ):
        g = np.where(rng.random(n) < 0.5, "a", "b").astype(object)
        if traffic == "default" and missing:
            g[:missing] = "(missing)"
        p = np.where(g == "a", rates[0], np.where(g == "b", rates[1], 0.1))
        frames.append(
            pl.DataFrame(
                {
                    "traffic": traffic,
                    "arm": arm,
                    "group": g.astype(str),
                    "y": rng.random(n) < p,
                    "cbucket": np.arange(n) + i * n,
                }
            )
        )
    rows = pl.concat(frames).with_columns(attribute=pl.lit("s"), ds=pl.lit(DS))
    keys = ["ds", "traffic", "arm", "attribute", "group"]
    agg = [pl.len().cast(pl.Int64).alias("n"), pl.col("y").sum().cast(pl.Int64).alias("n_pos")]
    counts = rows.group_by(keys).agg(agg).with_columns(source=pl.lit("impressions"), window_start=DS, window_end=DS)
    buckets = rows.group_by([*keys, "cbucket"]).agg(agg).with_columns(pl.col("cbucket").cast(pl.Int32))
    return counts, buckets


def test_stage_rsp_and_user_precision_use_the_sandwich():
    # Singleton clusters and equal n in every traffic: every robust variance
    # is the multinomial/binomial one × G/(G−1), so each SE scales by √(G/(G−1)):
    # G = 2n for a stage's two traffics (the joint sandwich over both samples' clusters).
    n = 4000
    counts, buckets = _day_with_buckets(n, 1)
    f = np.sqrt(2 * n / (2 * n - 1))
    plain, robust = reo_stage_table(counts, DS), reo_stage_table(counts, DS, buckets=buckets)
    assert robust.height == 6
    np.testing.assert_allclose(robust["reo_se"], plain["reo_se"] * f, rtol=1e-10)
    np.testing.assert_allclose(robust["se_delta_U"], plain["se_delta_U"] * f, rtol=1e-10)
    plain, robust = rsp_table(counts, DS), rsp_table(counts, DS, buckets=buckets)
    np.testing.assert_allclose(robust["se"], plain["se"] * f, rtol=1e-10)
    # user precision: the '(missing)' rows are in the sample (all its buckets
    # are accepted) but in no group; the sandwich's G counts the 3700 buckets
    # with rows of a listed group
    counts, buckets = _day_with_buckets(n, 2, missing=300)
    f = np.sqrt(3700 / 3699)
    plain = user_precision_table(counts, DS, ["s"])
    robust = user_precision_table(counts, DS, ["s"], buckets=buckets)
    assert robust["reason"].null_count() == robust.height
    np.testing.assert_allclose(robust["disparity_se"], plain["disparity_se"] * f, rtol=1e-10)
    np.testing.assert_allclose(robust["se"], plain["se"] * f, rtol=1e-10)
    t = stats.t.ppf(0.975, 3699)  # the intervals take t with the sandwich's 3700 − 1 df
    np.testing.assert_allclose(robust["ci_high"] - robust["precision"], t * robust["se"], rtol=1e-9)


def test_partly_clustered_samples_give_nan_with_a_reason():
    counts, buckets = _day_with_buckets(500, 3)
    partial = buckets.filter(~((pl.col("traffic") == "random") & (pl.col("cbucket") < 1010)))  # random ids from 1000
    t = rsp_table(counts, DS, buckets=partial)
    assert t["se"].is_nan().all()
    assert "carry a cluster id" in t["reason"][0]
    up = user_precision_table(counts, DS, ["s"], buckets=buckets.filter(pl.col("cbucket") >= 10))
    assert up["disparity_se"].is_nan().all() and "carry a cluster id" in up["reason"][0]


def test_run_summary_states_how_intervals_treat_rows():
    from fairmon.pipelines.faces.views import interval_note

    assert interval_note([]) == ""
    assert interval_note([{"cluster_by": "none", "design_effect": 1.0}]) == (
        "intervals: rows independent (cluster_by = none)"
    )
    rows = [{"cluster_by": "request_id", "design_effect": d} for d in (1.31, float("nan"), 3.2)]
    assert interval_note(rows) == "intervals: cluster-robust by request_id, design effect 1.31–3.20"
    units = [dict(r, n_clusters=n, cluster_sums=k) for r, n, k in zip(rows, (40, 40, 12), ("exact",) * 3)]
    assert interval_note(units) == "intervals: cluster-robust by request_id, design effect 1.31–3.20, 12–40 clusters"
    hashed = [dict(rows[0], n_clusters=128, cluster_sums="hashed")]
    assert (
        interval_note(hashed) == "intervals: cluster-robust by request_id, design effect 1.31, 128 buckets of clusters"
    )
    close = [dict(rows[0], design_effect=d) for d in (1.0512, 1.0498)]  # both 1.05 as shown: one value, not a range
    assert interval_note(close) == "intervals: cluster-robust by request_id, design effect 1.05"


def test_keys_and_index_are_numpys_unique_and_inverse():
    """The bucket keys' distinct values and each row's position among them, by a count over
    the keys' range when it is narrow and by np.unique otherwise: the same arrays either way."""
    rng = np.random.default_rng(3)
    cases = [
        rng.integers(0, 128, 5000).astype(np.int32),  # hash buckets
        rng.choice([-7, -300, -(2**31) + 5], 40).astype(np.int32),  # per-cluster keys: a wide range
        -1 - rng.integers(0, 50, 300).astype(np.int32),  # per-cluster keys, a narrow range
        np.array([5], np.int32),
        np.array([-128, 127, 0, -128], np.int8),  # a narrow type spanning its range
        np.array([2**64 - 1, 3], np.uint64),
        np.array([], np.int32),
        rng.integers(0, 10, 20).astype(np.float64),  # not integers: np.unique
    ]
    for keys in cases:
        want_ids, want_inv = np.unique(keys, return_inverse=True)
        ids, inv = keys_and_index(keys)
        assert ids.dtype == want_ids.dtype and np.array_equal(ids, want_ids)
        assert inv.dtype == want_inv.dtype and np.array_equal(inv, want_inv)


def test_folds_add_each_folds_buckets_as_np_add_at_does():
    """BucketSums.folds sums a fold's buckets row by row in bucket order: the bits of np.add.at,
    also for sums that are not integers."""
    rng = np.random.default_rng(5)
    for trial in range(80):
        G, K = int(rng.integers(2, 150)), 1 if trial % 4 == 0 else int(rng.integers(1, 200))
        pos = rng.integers(0, 50, (G, K)).astype(float) if trial % 2 else rng.random((G, K)) * 10
        sums = BucketSums(pos, pos.sum(axis=1) + rng.random(G) * 7, np.arange(G))
        M = int(rng.integers(2, min(G, 12) + 1))
        got_pos, got_rows = sums.folds(M, np.random.default_rng(trial))
        fold = np.random.default_rng(trial).permutation(sums.G) % M
        want_pos, want_rows = np.zeros((M, K)), np.zeros(M)
        np.add.at(want_pos, fold, sums.pos)
        np.add.at(want_rows, fold, sums.rows)
        assert got_pos.tobytes() == want_pos.tobytes() and got_rows.tobytes() == want_rows.tobytes()
