"""RSP with a known candidate pool (seed 001 App. H.1, eqs. 24–26): the pool
table ([estimation] rsp_pool), its validation, and the delta variance without
the pool share's term, checked by hand, by a numerical delta method, by a
hand-written cluster sandwich and by Monte Carlo at known truth."""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl
import pytest

from fairmon.transforms.contract import InputContractError
from fairmon.transforms.reo.cluster import BucketSums
from fairmon.transforms.reo.estimate import estimate_reo, reo_of_utilities
from fairmon.transforms.reo.rsp_pool import pool_item_counts
from fairmon.transforms.reo.stage import rsp_table


def _known(groups, n_k, n_rec, pool_k, pool_total, **kw):
    """RSP with a known pool as rsp_table computes it: default-traffic rows n_k of n_rec, the pool's items."""
    return estimate_reo(groups, n_k, n_rec, pool_k, pool_total, min_expected_positives=0, known_pool=True, **kw)


DS = dt.date(2026, 1, 1)
COLS = ["ds", "source", "traffic", "arm", "attribute", "group", "n", "n_pos", "window_start", "window_end"]


def _counts(spec: dict, attribute: str = "s") -> pl.DataFrame:
    """spec: {(traffic, arm): {group: n}}; n_pos is irrelevant to RSP (set to 0)."""
    rows = [
        (DS, "impressions", traffic, arm, attribute, g, n, 0, DS, DS)
        for (traffic, arm), per in spec.items()
        for g, n in per.items()
    ]
    return pl.DataFrame(rows, schema=COLS, orient="row")


def _pool(text: str, **kw) -> pl.DataFrame:
    raw = pl.read_csv(text.encode(), infer_schema=False)
    return pool_item_counts(raw, file="pool.csv", **({"attributes": ["s"]} | kw))


def _rsp_of_shares(q: np.ndarray, pi: np.ndarray) -> float:
    return reo_of_utilities(q / pi)


def test_known_pool_drops_the_pool_term_by_hand():
    """K = 2: RSP = (r − 1)/(r + 1) with r = U_a/U_b, so SE = 2r/(1 + r)² · sd(log r̂) and
    Var(log r̂) = 1/n_a + 1/n_b (+ 1/m_a + 1/m_b when the pool share comes from m random rows)."""
    counts = _counts({("default", "c"): {"a": 600, "b": 400}, ("random", "all"): {"a": 500, "b": 500}})
    pool = _pool("s,n_items\na,300\nb,500\na,200\n")  # 500 items each: the same shares as random traffic
    known, est = rsp_table(counts, DS, pool=pool), rsp_table(counts, DS)
    r = 1.5
    k = 2 * r / (1 + r) ** 2
    assert known["share_pool"].to_list() == [0.5, 0.5] and known["rsp"][0] == pytest.approx(0.2)
    assert known["se"][0] == pytest.approx(k * np.sqrt(1 / 600 + 1 / 400), rel=1e-12)
    assert est["se"][0] ** 2 - known["se"][0] ** 2 == pytest.approx(k**2 * (1 / 500 + 1 / 500), rel=1e-10)
    assert known["se_delta_U"][0] == pytest.approx(k * np.sqrt(1 / 600 + 1 / 400), rel=1e-12)  # K = 2: ΔU_a = RSP
    assert (
        known["reason"][0] == "pool shares known from the pool table pool.csv (not estimated: no pool term in the SE)"
    )
    assert est["reason"].null_count() == 2  # without a pool table: as before
    # an attribute the pool table does not describe keeps random traffic's shares
    other = rsp_table(counts.with_columns(attribute=pl.lit("t")), DS, pool=pool)
    assert other.equals(est.with_columns(attribute=pl.lit("t")))


def test_known_pool_variance_matches_a_numerical_delta_method():
    """K = 3 with '(missing)' rows in default traffic and items in the pool: the SEs of RSP and
    ΔU against ∇fᵀ Σ ∇f, f by central differences over the multinomial shares (the missing cell
    included), Σ = (diag q − q qᵀ)/n, and π = N_k/N fixed."""
    n_k = np.array([300, 200, 150])
    n = int(n_k.sum()) + 50  # 50 default rows of '(missing)'
    items = np.array([40, 35, 15])
    N = int(items.sum()) + 10  # 10 items without a value
    spec = {("default", "c"): dict(zip("abc", n_k.tolist())) | {"(missing)": 50}}
    pool = _pool("s,n_items\na,40\nb,35\nc,15\n,10\n")
    t = rsp_table(_counts(spec), DS, pool=pool).sort("group")
    np.testing.assert_allclose(t["share_pool"], items / N, rtol=1e-15)
    q = np.append(n_k, n - n_k.sum()) / n
    pi = items / N

    def stats(x: np.ndarray) -> np.ndarray:
        U = x[:3] / pi
        return np.append(U / U.mean() - 1, reo_of_utilities(U))

    h = 1e-7
    J = np.array([(stats(q + h * e) - stats(q - h * e)) / (2 * h) for e in np.eye(4)]).T  # (4 stats, 4 cells)
    cov = (np.diag(q) - np.outer(q, q)) / n
    se = np.sqrt(np.diag(J @ cov @ J.T))
    assert t["rsp"][0] == pytest.approx(stats(q)[3], rel=1e-12)
    assert t["se"][0] == pytest.approx(se[3], rel=1e-6)
    np.testing.assert_allclose(t["se_delta_U"], se[:3], rtol=1e-6)


def test_clustered_known_pool_is_the_default_sandwich_alone():
    """Buckets of several rows: SE² = G/(G − 1) Σ_g h_g², h_g = Σ_k g_k (x_gk/X_k − r_g/n), the
    sandwich of log Q̂ alone (a hand-written ratio linearisation), g = ∂RSP/∂log U numerically."""
    rng = np.random.default_rng(3)
    G, K = 40, 3
    x = rng.integers(0, 30, size=(G, K)).astype(float)  # rows of group k in bucket g
    r = x.sum(axis=1) + rng.integers(0, 5, size=G)  # plus rows of no listed group
    pi = np.array([0.5, 0.3, 0.2])
    e = _known(["a", "b", "c"], x.sum(0), int(r.sum()), pi * 1000, 1000, clusters_rec=BucketSums(x, r))
    X, n = x.sum(0), r.sum()
    U = X / n / pi
    hh = 1e-7
    g = np.array(
        [(reo_of_utilities(U * np.exp(hh * d)) - reo_of_utilities(U * np.exp(-hh * d))) / (2 * hh) for d in np.eye(K)]
    )
    infl = (x / X - r[:, None] / n) @ g
    assert e.se == pytest.approx(np.sqrt(G / (G - 1) * np.sum(infl**2)), rel=1e-6)
    assert e.reason is None
    one = _known(["a", "b", "c"], X, int(n), pi * 1000, 1000, clusters_rec=BucketSums(X[None, :], [n]))
    assert np.isnan(one.se) and "cluster-robust variance is undefined" in one.reason


def test_a_known_pool_is_no_sample_to_resample_or_cluster():
    """estimate_reo(known_pool=True) refuses what would treat the pool table as a sample."""
    args = (["a", "b"], np.array([60, 40]), 100, np.array([5, 5]), 10)
    with pytest.raises(ValueError, match="known_pool: the pool's shares are constants"):
        estimate_reo(*args, ci_method="bootstrap_percentile", known_pool=True)
    with pytest.raises(ValueError, match="no clusters_rand"):
        estimate_reo(*args, clusters_rand=BucketSums(np.array([[3.0, 2.0], [2.0, 3.0]]), [5, 5]), known_pool=True)
    r = 1.5  # K = 2 by hand: SE = 2r/(1 + r)² · sqrt(1/60 + 1/40), no pool term
    assert estimate_reo(*args, known_pool=True).se == pytest.approx(2 * r / (1 + r) ** 2 * np.sqrt(1 / 60 + 1 / 40))


@pytest.mark.slow  # 2,000 draws
def test_known_pool_interval_covers_at_known_truth():
    """Default traffic drawn 2,000 times from known shares q (a '(missing)' cell too) with a known
    pool π: RSP's interval covers the truth at about its level, and the delta SE matches the
    draws' sd of RSP̂ (ΔU_a's interval too)."""
    rng = np.random.default_rng(11)
    q = np.array([0.30, 0.25, 0.25, 0.20])  # groups a, b, c and '(missing)'
    pi, N = np.array([0.45, 0.35, 0.20]), 10_000
    n = 3_000
    U = q[:3] / pi
    truth, truth_dU = reo_of_utilities(U), U[0] / U.mean() - 1
    draws = rng.multinomial(n, q, size=2_000)
    hits = hits_dU = 0
    est, ses = [], []
    for d in draws:
        e = _known(["a", "b", "c"], d[:3], n, pi * N, N)
        hits += e.ci_low <= truth <= e.ci_high
        hits_dU += e.ci_low_delta_U[0] <= truth_dU <= e.ci_high_delta_U[0]
        est.append(e.reo)
        ses.append(e.se)
    assert 0.935 <= hits / 2_000 <= 0.965, hits / 2_000
    assert 0.935 <= hits_dU / 2_000 <= 0.965, hits_dU / 2_000
    assert np.mean(ses) == pytest.approx(np.std(est), rel=0.06)


def test_undefined_cases_carry_reasons():
    pool = _pool("s,n_items\na,10\nb,0\n")
    t = rsp_table(_counts({("default", "c"): {"a": 5, "b": 5}}), DS, pool=pool)
    assert t["rsp"].is_nan().all() and "no items in the pool table for group(s) b" in t["reason"][0]
    # a pool group without default rows: U_b = 0, the point is defined, the SE is not
    t = rsp_table(_counts({("default", "c"): {"a": 5}}), DS, pool=_pool("s\na\nb\n"))
    assert t["group"].to_list() == ["a", "b"] and t["rsp"][0] == pytest.approx(1.0)
    assert np.isnan(t["se"][0]) and "Q_k = 0 for group(s) b" in t["reason"][0]


def test_pool_table_rows_and_intersections():
    """One row per item (no n_items), an item_id, a missing value, an intersection a×b counted
    as the count stage spells it ('(missing)' when a part is missing)."""
    raw = pl.DataFrame({"item_id": ["i1", "i2", "i3", "i4"], "s": ["x", "y", "x", None], "t": ["1", "1", "2", "2"]})
    got = pool_item_counts(raw, file="p.csv", attributes=["s", "t", "u"], intersections=[["s", "t"], ["s", "u"]])
    rows = {(r["attribute"], r["group"]): r["n_items"] for r in got.iter_rows(named=True)}
    assert rows == {
        ("s", "x"): 2, ("s", "y"): 1, ("s", "(missing)"): 1, ("t", "1"): 2, ("t", "2"): 2,
        ("s×t", "x×1"): 1, ("s×t", "y×1"): 1, ("s×t", "x×2"): 1, ("s×t", "(missing)"): 1,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("s,n_items\na,3\nb,-1\n", "pool.csv, column 'n_items', row 2: expected a non-negative whole number"),
        ("s,n_items\na,2.5\n", "pool.csv, column 'n_items', row 1: expected a non-negative whole number"),
        ("s,n_items\na,3\nb,\n", "pool.csv, column 'n_items', row 2: expected a non-negative whole number"),
        ("s,n_items\na,x\n", "pool.csv, column 'n_items', row 1: expected a number"),
        ("s,colour\na,red\n", "pool.csv, column 'colour': not a pool-table column"),
        ("item_id,s\ni1,a\ni2,b\ni1,a\n", "pool.csv, column 'item_id', row 3: item_id repeated"),
        ("item_id,s\ni1,a\n,b\n", "pool.csv, column 'item_id', row 2: item_id is empty"),
        ("n_items\n3\n", "pool.csv: no item attribute column"),
        ("s,n_items\na,0\n", "pool.csv, column 's': the pool table counts no items"),
        ("s,t\na×b,1\n", "pool.csv, column 's', row 1: value contains '×'"),
    ],
)
def test_bad_pool_tables_name_file_column_and_row(text, match):
    with pytest.raises(InputContractError, match=match):
        _pool(text, attributes=["s", "t"], intersections=[["s", "t"]])


def _cfg(tmp_path, estimation: str):
    from fairmon.pipelines.core.config import load_config

    text = (
        'warehouse = "wh"\nduckdb = "f.duckdb"\n[impressions]\nformat = "contract"\npath = "d/{ds}.csv"\n'
        f'signals = ["click"]\nattributes = ["s", "u"]\n[estimation]\nuser_attributes = ["u"]\n{estimation}\n'
    )
    (tmp_path / "f.toml").write_text(text)
    return load_config(tmp_path / "f.toml")


def test_config_and_reading_the_day_s_pool_table(tmp_path):
    from fairmon.pipelines.core.config import ConfigError
    from fairmon.pipelines.ingest.adapters import rsp_pool_counts

    with pytest.raises(ConfigError, match="rsp_pool is the pool table of the rsp table: set rsp = true"):
        _cfg(tmp_path, 'rsp_pool = "pool.csv"')
    with pytest.raises(ConfigError, match=r"rsp_pool 'pool_\{day\}.csv' has the field \{day\}"):
        _cfg(tmp_path, 'rsp = true\nrsp_pool = "pool_{day}.csv"')
    assert rsp_pool_counts(_cfg(tmp_path, "rsp = true"), DS) is None
    cfg = _cfg(tmp_path, 'rsp = true\nrsp_pool = "pool/{ds}.csv"')
    with pytest.raises(InputContractError, match=r"pool/2026-01-01.csv: no such file \(config estimation.rsp_pool\)"):
        rsp_pool_counts(cfg, DS)
    (tmp_path / "pool").mkdir()
    (tmp_path / "pool" / "2026-01-01.csv").write_text("s,n_items\na,4\nb,6\n")
    got = rsp_pool_counts(cfg, DS)
    assert got.select("attribute", "group", "n_items").rows() == [("s", "a", 4), ("s", "b", 6)]
    # a user attribute is no pool-table column
    (tmp_path / "pool" / "2026-01-01.csv").write_text("s,u\na,x\n")
    with pytest.raises(InputContractError, match="column 'u': not a pool-table column"):
        rsp_pool_counts(cfg, DS)


def test_the_pool_table_is_a_recorded_input_and_spells_groups_as_the_logs_do(tmp_path):
    """A corrected pool file changes the day's recorded inputs (so the day turns stale), and a value with a
    trailing space stays that group, as the count stage reads the logs' value (no stripping)."""

    from fairmon.pipelines.ingest.adapters import rsp_pool_counts
    from fairmon.pipelines.ingest.sources import current_inputs

    cfg = _cfg(tmp_path, 'rsp = true\nrsp_pool = "pool/{ds}.csv"')
    assert [i for i in current_inputs(cfg, DS) if i["source"] == "estimation.rsp_pool"] == []  # no file yet
    (tmp_path / "pool").mkdir()
    pool = tmp_path / "pool" / "2026-01-01.csv"
    pool.write_text("s,n_items\nnorth ,4\nsouth,6\n")
    assert rsp_pool_counts(cfg, DS).select("group", "n_items").rows() == [("north ", 4), ("south", 6)]
    (before,) = [i for i in current_inputs(cfg, DS) if i["source"] == "estimation.rsp_pool"]
    assert (before["file"], before["size"]) == ("pool/2026-01-01.csv", pool.stat().st_size)
    pool.write_text("s,n_items\nnorth ,5\nsouth,6\n")
    (after,) = [i for i in current_inputs(cfg, DS) if i["source"] == "estimation.rsp_pool"]
    assert after["size"] == before["size"] and after["digest"] != before["digest"]


@pytest.mark.slow  # runs a simulated day twice
def test_a_day_uses_the_pool_table_and_a_bad_one_fails_the_day_naming_it(tmp_path):
    """End to end: `[estimation] rsp_pool` reaches the published rsp table (shares = the
    table's, the reason names it); a bad row fails the day naming the file, column and row."""
    from fairmon.pipelines.core.config import load_config
    from fairmon.pipelines.executor.days import run_day
    from fairmon.pipelines.simulation.simulated import write_simulation
    from fairmon.pipelines.storage.warehouse import query_warehouse
    from fairmon.transforms.simulators.impressions import SimulationSpec

    spec = SimulationSpec(days=2, rows_per_day=1200, random_rows_per_day=600, random_pool_days=2, seed=5)
    day = spec.start + dt.timedelta(days=1)
    cfg_path = write_simulation(spec, tmp_path / "sim", "csv")["config"]
    cfg_path.write_text(cfg_path.read_text() + 'rsp = true\nrsp_pool = "pool.csv"\n')
    pool = cfg_path.parent / "pool.csv"
    pool.write_text("young_adult,n_items\n0,300\n1,100\n")
    assert run_day(str(cfg_path), day)["status"] == "published"
    cfg = load_config(cfg_path)
    rsp, _ = query_warehouse(cfg.duckdb_path, cfg.warehouse_path, 'select * from rsp_published order by "group"')
    assert rsp["share_pool"].to_list() == [0.75, 0.25]
    assert rsp["reason"][0].startswith(f"pool shares known from the pool table {pool}")
    pool.write_text("young_adult,n_items\n0,300\n1,many\n")
    out = run_day(str(cfg_path), day)
    assert out["status"] == "failed" and f"{pool}, column 'n_items', row 2: expected a number" in out["error"]
