"""Per-cluster sums when clusters are few, cluster counts, and the joint
cluster bootstrap (issue 38 item 5; sql/impressions_bucket.sql,
sql/group_counts.sql, transforms/reo/cluster.py).

Expected values are computed here from the rows themselves: the joint
sandwich over users written out with NumPy (no fairmon code), the keys from
hashlib (conftest.reference_key), and the bootstrap's variance against the
sandwich it must approximate.
"""

from __future__ import annotations

import datetime as dt
import hashlib

import duckdb
import numpy as np
import polars as pl
import pytest

import fairmon
from fairmon.pipelines.ingest.range_counts import count_statements
from fairmon.transforms.reo.bootstrap import single_arm_bootstrap
from fairmon.transforms.reo.cluster import BucketSums, cluster_units
from fairmon.transforms.reo.estimate import estimate_reo

# u0 and u7 share a hash bucket modulo 16 (sha1 prefix 10 mod 16 both): hashed sums merge them
USERS = ["u0", "u7", "u1", "u2", "u3", "u4"]


def _h(user: str) -> int:
    return int(hashlib.sha1(user.encode()).hexdigest()[:8], 16)


def _rows() -> pl.DataFrame:
    """Each user has rows of both groups in default and in random traffic;
    a user's positives are correlated across traffics (a propensity)."""
    rng = np.random.default_rng(38)
    out = []
    for u in USERS:
        theta = rng.uniform(0.2, 0.8)
        for traffic, mult in (("default", {"a": 1.0, "b": 0.4}), ("random", {"a": 0.5, "b": 0.5})):
            for g in ("a", "b"):
                n = int(rng.integers(20, 60))
                pos = rng.random(n) < theta * mult[g]
                out += [{"traffic": traffic, "user_id": u, "g": g, "y": bool(v)} for v in pos]
    return pl.DataFrame(out)


def _hand_se(rows: pl.DataFrame, unit) -> float:
    """REO's delta SE by the joint sandwich over ``unit(user)`` clusters, written out:
    z^Q_{c,k} = (a_{c,k} − Q̂_k n_c)/(n Q̂_k), the same for P̂ on random rows, h_c = z^Q_c − z^P_c,
    Cov(log Û) = C/(C−1) Σ_c h_c h_cᵀ, SE = √(gᵀ Cov g) with g_k = U_k ∂REO/∂U_k."""
    units = sorted({unit(u) for u in rows.get_column("user_id")})
    idx = {c: i for i, c in enumerate(units)}
    C, K = len(units), 2
    z = {}
    share = {}
    for traffic in ("default", "random"):
        t = rows.filter(pl.col("traffic") == traffic)
        pos, n_c = np.zeros((C, K)), np.zeros(C)
        for u, g, y in t.select("user_id", "g", "y").iter_rows():
            n_c[idx[unit(u)]] += 1
            pos[idx[unit(u)], "ab".index(g)] += y
        n = n_c.sum()
        q = pos.sum(axis=0) / n
        z[traffic] = (pos - np.outer(n_c, q)) / (n * q)
        share[traffic] = q
    h = z["default"] - z["random"]
    cov = C / (C - 1) * h.T @ h
    U = share["default"] / share["random"]
    m, s = U.mean(), U.std()
    g = U * ((U - m) / (K * s * m) - s / (K * m**2))
    return float(np.sqrt(g @ cov @ g))


def test_few_clusters_are_summed_one_by_one_and_counted():
    rows = _rows()
    exact = fairmon.reo(rows, group="g", label="y", cluster="user_id", cluster_buckets=16)
    assert exact.get_column("n_clusters").to_list() == [6]
    assert exact.get_column("cluster_sums").to_list() == ["exact"]
    np.testing.assert_allclose(exact.get_column("se")[0], _hand_se(rows, lambda u: u), rtol=1e-10)
    # the hashed sums (16 buckets) would merge u0 and u7: 5 units and another SE
    merged = _hand_se(rows, lambda u: _h(u) % 16)
    assert abs(merged - exact.get_column("se")[0]) > 1e-3
    # more ids than cluster_exact_max: hash buckets of whole clusters, counted as non-empty buckets
    hashed = fairmon.reo(rows, group="g", label="y", cluster="user_id", cluster_buckets=4, cluster_exact_max=4)
    units = {_h(u) % 4 for u in USERS}
    assert hashed.get_column("n_clusters").to_list() == [len(units)] and len(units) < 6
    assert hashed.get_column("cluster_sums").to_list() == ["hashed"]
    np.testing.assert_allclose(hashed.get_column("se")[0], _hand_se(rows, lambda u: _h(u) % 4), rtol=1e-10)
    plain = fairmon.reo(rows, group="g", label="y")
    assert plain.get_column("n_clusters").to_list() == [None] and plain.get_column("cluster_sums")[0] == "none"


def _day_keys(keys_by_file: dict[str, list[int]], buckets: int) -> set[int]:
    """The cbucket values sql/group_counts.sql gives one day whose staged files hold ``keys_by_file``
    (file "d…" default traffic, "r…" random), one row per key, with ``buckets`` both the hash buckets and
    ``cluster_exact_max``."""
    return set(_day_rows(keys_by_file, buckets).get_column("cbucket").to_list())


def _day_rows(keys_by_file: dict[str, list[int]], buckets: int) -> pl.DataFrame:
    """The per-key rows (sql/group_counts.sql, sql/group_counts_pooled.sql) for the day of
    :func:`_day_keys` (one staged row, n = 1, per key)."""
    day = dt.date(2026, 3, 1)
    rows = [
        {"ds": day, "ds_start": day, "traffic": "default" if f[0] == "d" else "random", "arm": "a", "y": True,
         "attr__g": "x", "cbucket": k, "n": 1, "src_file": f}
        for f, keys in keys_by_file.items() for k in keys
    ]  # fmt: skip
    con = duckdb.connect()
    con.register("impressions", pl.DataFrame(rows).with_columns(pl.col("cbucket").cast(pl.Int32)))
    con.register("day_files", pl.DataFrame({"day": [day] * len(keys_by_file), "file": list(keys_by_file)}))
    return count_statements(con, buckets, 1, "contained", exact=buckets)[0]


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_a_day_keeps_per_cluster_keys_only_when_all_its_rows_have_them_and_they_are_few():
    # per-cluster keys k = −1 − h % span; their bucket is (−1 − k) % G
    assert _day_keys({"d1": [-5, -21], "r1": [-5, -40]}, 16) == {-5, -21, -40}  # 3 clusters, one in both traffics
    # a random file of many ids was hashed: the day's per-cluster keys become buckets, the shared id joins its own
    assert _day_keys({"d1": [-5, -21], "r1": [4, 9]}, 16) == {4, 9}  # (−1 + 5) % 16 = 4, (−1 + 21) % 16 = 4
    # every file had few ids, but the day has more clusters than buckets: buckets
    keys = list(range(-1, -20, -1))
    assert _day_keys({"d1": keys[:10], "r1": keys[10:]}, 16) == {(-1 - k) % 16 for k in keys}
    assert _day_keys({"d1": keys[:10], "r1": keys[10:]}, 32) == set(keys)


def test_hashed_keys_meeting_a_days_own_bucket_are_one_row_with_their_sums():
    # −5 and −21 hash to bucket 4 ((−1 + 5) % 16, (−1 + 21) % 16), where a row already has key 4
    out = _day_rows({"d1": [-5, -21, 4, 9]}, 16)
    assert sorted(out.select("cbucket", "n", "n_pos").iter_rows()) == [(4, 3, 3), (9, 1, 1)]


def _correlated_users(G: int = 80, seed: int = 3) -> tuple[BucketSums, BucketSums]:
    """G users with rows in both traffics and one taste per group in both (θ_{c,k}), so each
    user moves Q̂ and P̂ of a group together and the difference log Q̂ − log P̂ varies less jointly."""
    rng = np.random.default_rng(seed)
    theta = rng.beta(0.6, 2, (G, 2))
    samples = []
    for mult in ((1.0, 0.5), (0.6, 0.6)):
        n_k = rng.integers(20, 80, size=(G, 2))
        pos = rng.binomial(n_k, np.clip(theta * np.array(mult), 0, 1))
        samples.append(BucketSums(pos.astype(float), n_k.sum(axis=1).astype(float), np.arange(G) - 1000))
    return samples[0], samples[1]


def test_the_cluster_bootstrap_draws_a_shared_cluster_once_for_both_traffics():
    rec, rand = _correlated_users()
    a, n_rec, b, n_rand = rec.pos.sum(axis=0), rec.n, rand.pos.sum(axis=0), rand.n
    delta = estimate_reo(["x", "y"], a, n_rec, b, n_rand, clusters_rec=rec, clusters_rand=rand)
    G = 80
    target = delta.se_delta_U * np.sqrt((G - 1) / G)  # the bootstrap's variance is (G−1)/G × the sandwich's
    args = (a.astype(int), int(n_rec), b.astype(int), int(n_rand))
    boot = single_arm_bootstrap(
        *args, method="bootstrap_normal", level=0.95, B=6000, rng=np.random.default_rng(1), clusters=(rec, rand)
    )
    np.testing.assert_allclose([se for *_, se in boot["delta_U"]], target, rtol=0.04)
    # resampling each traffic alone ignores the covariance: here its SE is far off the joint sandwich
    alone = single_arm_bootstrap(
        *args, method="bootstrap_normal", level=0.95, B=6000, rng=np.random.default_rng(1),
        clusters=(BucketSums(rec.pos, rec.rows), BucketSums(rand.pos, rand.rows)),
    )  # fmt: skip
    assert np.all(np.array([se for *_, se in alone["delta_U"]]) / target > 1.5)  # 1.93 here
    assert cluster_units([rec, rand]) == (80, "exact") and cluster_units([None, None]) == (None, "none")
    assert cluster_units([BucketSums(rec.pos, rec.rows), None]) == (80, "hashed")


def test_replicate_sums_are_the_double_product_bit_for_bit():
    """The single-precision shortcut of the bootstrap's product is taken only
    where it is exact: integer sums below 2**24 give the double product's
    bits; a sum of 2**24 + 1 (not a float32) and fractional sums go the
    double way, and still equal it."""
    from fairmon.transforms.reo.cluster import replicate_sums

    rng = np.random.default_rng(3)
    times = rng.multinomial(50, np.full(50, 1 / 50), size=200)  # how often each unit is drawn
    counts = rng.poisson(40.0, size=(50, 300)).astype(float)
    assert np.array_equal(replicate_sums(times, counts), times @ counts)
    big = np.full((4, 3), 2.0**24 + 1)
    t4 = rng.multinomial(4, np.full(4, 1 / 4), size=5)
    assert np.array_equal(replicate_sums(t4, big), t4 @ big)
    assert (t4 @ big != (t4.astype(np.float32) @ big.astype(np.float32)).astype(float)).any()
    frac = counts / 7.0
    assert np.array_equal(replicate_sums(times, frac), times @ frac)
    heavy, units = np.array([[2**20, 1]]), np.array([[17.0], [1.0]])  # more draws than units: 17 * 2**20 + 1
    assert replicate_sums(heavy, units)[0, 0] == 17 * 2**20 + 1
    # single=True leaves an exact product in float32 (the same integers) and the others in float64
    kept = replicate_sums(times, counts, single=True)
    assert kept.dtype == np.float32 and np.array_equal(kept.astype(float), times @ counts)
    assert replicate_sums(t4, big, single=True).dtype == np.float64
    by = rng.random(200) + 0.5  # a float64 division reads float32 sums as their doubles
    assert np.array_equal(np.divide(kept, by[:, None], dtype=np.float64), (times @ counts) / by[:, None])


def test_bucket_sums_of_a_day_are_formed_once_per_sample():
    """Hand counts of two buckets: the sums are the hand sums; asking again
    for the same sample of the same day's frame gives the sums already
    formed (REO per arm and the A/B pairs ask for the same samples), and a
    copy of the frame, or another sample, forms its own."""
    from fairmon.transforms.reo.cluster import bucket_sums

    frame = pl.DataFrame(
        {
            "traffic": ["default"] * 4 + ["random"] * 2,
            "arm": ["all"] * 6,
            "attribute": ["g"] * 6,
            "group": ["a", "b", "a", "b", "a", "b"],
            "cbucket": [3, 3, 9, 9, 3, 9],
            "n": [5, 4, 2, 6, 7, 8],
            "n_pos": [1, 2, 0, 3, 2, 2],
        }
    )
    s1, note = bucket_sums(frame, "default", "all", "g", ["a", "b"], 17)
    assert note is None and s1.ids.tolist() == [3, 9] and s1.rows.tolist() == [9.0, 8.0]
    assert s1.pos.tolist() == [[1.0, 2.0], [0.0, 3.0]]
    assert bucket_sums(frame, "default", "all", "g", ["a", "b"], 17)[0] is s1
    again = bucket_sums(frame.clone(), "default", "all", "g", ["a", "b"], 17)[0]
    assert again is not s1 and np.array_equal(again.pos, s1.pos)
    rand = bucket_sums(frame, "random", "all", "g", ["a", "b"], 15)[0]
    assert rand.pos.tolist() == [[2.0, 0.0], [0.0, 2.0]]


def test_group_arrays_and_bucket_sums_place_each_row_at_its_groups_position():
    # Random samples with unlisted and empty names: group_arrays' n and positives as a dict lookup gives;
    # bucket_sums' per-bucket positives likewise (a repeated group in its list takes the last position).
    import polars as pl

    from fairmon.transforms.reo.cluster import bucket_sums, group_arrays

    rng = np.random.default_rng(1)
    for trial in range(20):
        vocab = [f"g{i}" for i in range(rng.integers(1, 40))] + ["", "(missing)"]
        names = [str(v) for v in rng.permutation(vocab)[: rng.integers(1, len(vocab) + 1)]]
        frame = pl.DataFrame({"group": names, "n": rng.integers(1, 99, len(names)), "n_pos": 0})
        frame = frame.with_columns(n_pos=pl.col("n") // 2)
        groups = [str(v) for v in rng.permutation([v for v in vocab if rng.random() < 0.7])]
        groups += ["zz"] if trial % 3 == 0 else []
        n, pos, total = group_arrays(frame, groups)
        at = dict(zip(frame["group"].to_list(), zip(frame["n"].to_list(), frame["n_pos"].to_list())))
        assert n.tolist() == [at.get(g, (0, 0))[0] for g in groups] and total == frame["n"].sum()
        assert pos.tolist() == [at.get(g, (0, 0))[1] for g in groups] and n.dtype == np.int64
    rows = pl.DataFrame(
        {
            "traffic": "default",
            "arm": "a",
            "attribute": "x",
            "group": ["b", "a", None, "c", "b"],
            "cbucket": [0, 0, 1, 1, 1],
            "n": [3, 4, 5, 6, 7],
            "n_pos": [1, 2, 3, 4, 5],
        }
    )
    sums, note = bucket_sums(rows, "default", "a", "x", ["a", "b", "a"], 25)
    assert note is None and sums.pos.tolist() == [[0.0, 1.0, 2.0], [0.0, 5.0, 0.0]]
    sums, _ = bucket_sums(rows, "default", "a", "x", ["c", "b"], 25)
    assert sums.pos.tolist() == [[0.0, 1.0], [4.0, 5.0]] and sums.rows.tolist() == [7.0, 18.0]
