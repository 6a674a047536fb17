"""fairmon's library face (issue 36 item 6; DESIGN §1 "A library first"):
``import fairmon`` offers the estimators on pandas, Polars and PyArrow frames.
Expected values are computed here from the formulas (DESIGN §4.1–4.3, §4.7),
by hand, or by the pipeline's own SQL count stage on the same rows."""

from __future__ import annotations

import datetime as dt
import math
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from scipy import stats

import fairmon
from fairmon.pipelines.ingest.adapters import read_coat
from fairmon.pipelines.ingest.range_counts import count_statements, group_totals
from fairmon.pipelines.storage import db
from fairmon.transforms.contract import InputContractError, normalize_impressions
from fairmon.transforms.reo.reo_tables import reo_tables

D = dt.date(2026, 3, 10)
KINDS = {
    "polars": (lambda f: f, pl.DataFrame),
    "pandas": (lambda f: f.to_pandas(), pd.DataFrame),
    "pyarrow": (lambda f: f.to_arrow(), pa.Table),
}


def _native(frame):
    """Any result as Polars, for comparisons."""
    if isinstance(frame, pd.DataFrame):
        return pl.from_pandas(frame)
    if isinstance(frame, pa.Table):
        return pl.from_arrow(frame)
    return frame


# --- import stays light -----------------------------------------------------------------------------


def test_import_fairmon_is_light_and_exports_documented_functions():
    code = (
        "import sys, fairmon\n"
        "heavy = [m for m in ('prefect', 'great_expectations', 'duckdb', 'polars', 'narwhals', 'scipy') "
        "if m in sys.modules]\n"
        "print(heavy, sorted(m for m in sys.modules if m.startswith('fairmon.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[] []"
    names = ["group_counts", "reo", "reo_groups", "reo_ab", "threshold_prevalence", "threshold_prevalence_diff"]
    names += ["sdt", "envy_users", "envy_audit", "read_table", "run_day", "plot_reo"]
    assert fairmon.__all__ == ["__version__", *names]
    for name in names:
        doc = getattr(fairmon, name).__doc__
        assert "Raises" in doc and ("Source" in doc or name in ("read_table", "run_day")), name
    with pytest.raises(AttributeError, match="run_days"):
        fairmon.run_days  # noqa: B018 (a range of days is the CLI's backfill)


@pytest.mark.parametrize(("given", "expected"), [(None, "4"), ("12", "12")])
def test_import_fairmon_lets_openblas_idle_threads_sleep_unless_the_caller_chose(given, expected):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    if given is not None:
        env["OPENBLAS_THREAD_TIMEOUT"] = given
    code = "import os, fairmon; print(os.environ['OPENBLAS_THREAD_TIMEOUT'])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == expected


# --- Coat: REO and SE against the delta method written out here (DESIGN §4.1) ---------------------


def _delta_reo(a: np.ndarray, n_rec: int, b: np.ndarray, n_rand: int) -> tuple[float, float]:
    """REO and its delta-method SE, DESIGN §4.1 (Algorithm 1 with the full multinomial Γ)."""
    Q, P = a / n_rec, b / n_rand
    U = Q / P
    K, S = len(U), U.sum()
    dU = K * U / S - 1  # eq. 3, 7
    reo = np.std(U, ddof=0) / np.mean(U)  # eq. 19
    assert reo == pytest.approx(np.sqrt(np.mean(dU**2)), rel=1e-12)
    G = K * (np.eye(K) * S - U[None, :]) / S**2  # G[j, k] = dΔU_k/dU_j
    H = dU / (K * reo)
    Gamma = np.diag(U**2 * (1 / (Q * n_rec) + 1 / (P * n_rand)))
    return float(reo), float(np.sqrt(H @ (G.T @ Gamma @ G) @ H))


@pytest.fixture(scope="module")
def coat(coat_dir):
    """Coat rows built here from the matrices (train = default, test = random traffic; label rating >= 4;
    item gender and colour from item_features), and per attribute: groups, a, n_rec, b, n_rand."""
    train, test = np.loadtxt(coat_dir / "train.ascii"), np.loadtxt(coat_dir / "test.ascii")
    feat_dir = coat_dir / "user_item_features" if (coat_dir / "user_item_features").is_dir() else coat_dir
    feat = np.loadtxt(feat_dir / "item_features.ascii")
    names = (feat_dir / "item_features_map.txt").read_text().split()
    cols = {fam: [j for j, n in enumerate(names) if n.startswith(fam + ":")] for fam in ("gender", "color")}
    item = {}
    for fam, js in cols.items():
        assert (feat[:, js].sum(axis=1) == 1).all()  # one value per item
        item[fam] = np.array([names[js[k]].split(":")[1] for k in feat[:, js].argmax(axis=1)])
    frames = []
    for traffic, mat in (("default", train), ("random", test)):
        u, i = np.nonzero(mat)
        frames.append(
            pl.DataFrame(
                {
                    "traffic": traffic,
                    "user": u,
                    "gender": item["gender"][i],
                    "color": item["color"][i],
                    "liked": mat[u, i] >= 4,
                }
            )
        )
    truth = {}
    for fam in cols:
        groups = sorted(set(item[fam]))
        a = np.array([((train >= 4) & (item[fam] == g)[None, :]).sum() for g in groups])
        b = np.array([((test >= 4) & (item[fam] == g)[None, :]).sum() for g in groups])
        truth[fam] = (groups, a, int((train > 0).sum()), b, int((test > 0).sum()))
    return pl.concat(frames), truth


@pytest.mark.parametrize("kind", list(KINDS))
def test_coat_reo_and_se_equal_the_delta_method_from_the_matrices(coat, kind):
    rows, truth = coat
    convert, cls = KINDS[kind]
    out = fairmon.reo(convert(rows), group=["gender", "color"], label="liked")
    assert isinstance(out, cls)
    got = {r["attribute"]: r for r in _native(out).iter_rows(named=True)}
    for fam, (groups, a, n_rec, b, n_rand) in truth.items():
        reo, se = _delta_reo(a, n_rec, b, n_rand)
        row = got[fam]
        assert (row["arm"], row["K"], row["n_rec"], row["n_rand"]) == ("all", len(groups), n_rec, n_rand)
        assert row["reo"] == pytest.approx(reo, rel=1e-10, abs=0)
        assert row["se"] == pytest.approx(se, rel=1e-10, abs=0)
    # the Coat figures the docs quote (independent rows: cluster_by = "none"); its "REO 0.125" is 0.1245
    g = got["gender"]
    assert truth["gender"][2] == 6960 and truth["gender"][4] == 4640
    assert round(g["reo"], 4) == 0.1245 and (round(g["ci_low"], 3), round(g["ci_high"], 3)) == (0.045, 0.204)
    assert g["verdict_80pct"] == "inconclusive"
    c = got["color"]
    assert c["K"] == 13 and c["ci_low"] == 0.0 and round(c["parity_p_value"], 1) == 0.1


def test_coat_clustered_by_user_equals_the_sandwich_by_hand(coat):
    """cluster="user": the exact cluster-robust SE with one cluster per user, written out here for K = 2
    without fairmon's cluster keys. A user has rows in both traffics, so user c's influence on
    log r = log(Q_0/Q_1) − log(P_0/P_1) is h_c = cᵀ(z^Q_c − z^P_c), z_{c,k} = e_{c,k}/(n share_k),
    e_{c,k} = a_{c,k} − share_k n_c, and Var(log r) = C/(C−1) Σ_c h_c² over the C users with rows in either
    traffic. The same rows with the ids spelled otherwise give the same SE."""
    rows, truth = coat
    groups, a, n_rec, b, n_rand = truth["gender"]
    Q, P = a / n_rec, b / n_rand
    r = (Q[0] / Q[1]) / (P[0] / P[1])
    users = rows.get_column("user").unique().sort().to_list()

    def influence(traffic, share):
        part = rows.filter(pl.col("traffic") == traffic)
        e = np.zeros((len(users), 2))
        n_c = np.zeros(len(users))
        for u, liked, g in part.select("user", "liked", "gender").iter_rows():
            n_c[users.index(u)] += 1
            e[users.index(u), groups.index(g)] += liked
        e -= np.outer(n_c, share)
        return e / (n_c.sum() * share), n_c > 0

    (zq, in_q), (zp, in_p) = influence("default", Q), influence("random", P)
    C = int((in_q | in_p).sum())
    h = (zq - zp) @ np.array([1.0, -1.0])
    se = 2 * r / (1 + r) ** 2 * np.sqrt(C / (C - 1) * np.sum(h * h))
    c = np.array([1.0, -1.0])
    parts = ((zq, in_q.sum()), (zp, in_p.sum()))
    independent = 2 * r / (1 + r) ** 2 * np.sqrt(sum(C_s / (C_s - 1) * np.sum((z @ c) ** 2) for z, C_s in parts))
    assert se < 0.9 * independent  # Coat's users like both traffics alike: the cross-covariance is positive
    se_mult = _delta_reo(a, n_rec, b, n_rand)[1]
    for spelled in (pl.col("user"), "u" + pl.col("user").cast(pl.String), pl.col("user") * 7 + 3):
        out = fairmon.reo(rows.with_columns(spelled.alias("id")).to_pandas(), group="gender", label="liked",
                          cluster="id").iloc[0]  # fmt: skip
        assert out["reo"] == pytest.approx(abs(r - 1) / (r + 1), rel=1e-12)
        assert out["se"] == pytest.approx(se, rel=1e-9) and out["n_clusters"] == C == 290
        assert out["cluster_sums"] == "exact"
        assert out["design_effect"] == pytest.approx((se / se_mult) ** 2, rel=1e-9) and out["design_effect"] > 1.5
        assert out["cluster_by"] == "id" and out["verdict_80pct"] == "inconclusive"


def _pipeline_counts(raw: pl.DataFrame, signals, attributes, tmp_path) -> pl.DataFrame:
    """The pipeline's count stage: the input contract, DuckDB staging and sql/group_counts.sql for day D."""
    staged = normalize_impressions(raw, file="day.parquet", signals=signals, attributes=attributes, ds=D)
    with db.connect(tmp_path / "t.duckdb") as con:
        con.register("staged", staged)
        con.execute("CREATE TABLE impressions AS SELECT * FROM staged")  # the staged layout, as staging writes it
        con.unregister("staged")
        con.register("day_files", pl.DataFrame({"day": [D], "file": ["day.parquet"]}))
        by_key, spans = count_statements(con, 128, 1, "contained")
    assert by_key.get_column("cbucket").null_count() == by_key.height  # independent rows: no cluster buckets
    return group_totals(by_key, spans)


def test_coat_reo_equals_the_pipeline_on_the_same_rows(coat_dir, tmp_path):
    """fairmon's own Coat reader, then the pipeline's count SQL and reo table (what `fairmon run` publishes for
    Coat with [estimation] cluster_by = "none"), against the facade on the same rows with cluster="none"."""
    raw = read_coat(coat_dir, 4)
    counts = _pipeline_counts(raw, ["liked"], ["gender", "color"], tmp_path)
    _, published = reo_tables(counts, D)
    out = fairmon.reo(raw.to_pandas(), group=["gender", "color"], label="liked", cluster="none")
    mine = pl.from_pandas(out).sort("attribute")
    theirs = published.sort("attribute").select(mine.columns)
    for c in mine.columns:
        a, b = mine.get_column(c).to_list(), theirs.get_column(c).to_list()
        assert a == b or a == pytest.approx(b, rel=1e-15, nan_ok=True), c


@pytest.mark.parametrize("clustering", ["default", "none"])
def test_coat_reo_equals_what_the_pipeline_publishes(coat_dir, tmp_path, prefect_harness, clustering):
    """`fairmon run` on Coat, read back with fairmon.read_table, against fairmon.reo on the same rows (fairmon's
    Coat reader, whose request_id is the user): by default both cluster by request_id (one default: the config's
    cluster_by = "auto", the API's cluster="auto"), and with cluster_by = "none" / cluster="none" both treat the
    rows as independent. Each result's cluster_by says which."""
    from fairmon.pipelines.core.config import load_config
    from fairmon.pipelines.orchestration.runner import run_days

    cfg = tmp_path / "coat.toml"
    cfg.write_text(
        f'warehouse = "wh"\nduckdb = "c.duckdb"\n[impressions]\nformat = "coat"\npath = "{coat_dir}"\n'
        'ds = 2016-06-19\nmin_rating = 4\nsignals = ["liked"]\nattributes = ["gender", "color"]\n'
        "random_window_days = 1\n" + ('[estimation]\ncluster_by = "none"\n' if clustering == "none" else "")
    )
    day = dt.date(2016, 6, 19)
    assert [r["status"] for r in run_days(load_config(cfg), [day], config_path=str(cfg))] == ["published"]
    published = fairmon.read_table(cfg, "reo", day, day).sort("attribute")
    rows = read_coat(coat_dir, 4)
    args = {} if clustering == "default" else {"cluster": "none"}
    mine = fairmon.reo(rows, group=["gender", "color"], label="liked", **args).sort("attribute")
    by = "request_id" if clustering == "default" else "none"
    assert published.get_column("cluster_by").to_list() == mine.get_column("cluster_by").to_list() == [by, by]
    for c in ("reo", "se", "ci_low", "ci_high", "reo_bc", "parity_p_value", "design_effect"):
        assert mine.get_column(c).to_list() == pytest.approx(
            published.get_column(c).to_list(), rel=1e-12, nan_ok=True
        ), c
    assert mine.get_column("n_clusters").to_list() == published.get_column("n_clusters").to_list()
    assert mine.get_column("verdict_80pct").to_list() == published.get_column("verdict_80pct").to_list()
    gender = mine.row(by_predicate=pl.col("attribute") == "gender", named=True)
    groups = fairmon.reo_groups(rows, group="gender", label="liked", **args)
    assert groups.get_column("cluster_by").to_list() == [by, by]
    if clustering == "default":  # the figures the docs quote: the exact sandwich over Coat's 290 users
        assert (gender["ci_low"], round(gender["ci_high"], 4)) == (0.0, 0.2455)  # docs: [0, 0.246]
        assert gender["n_clusters"] == 290 and round(gender["design_effect"], 2) == 2.30
    else:
        assert (round(gender["ci_low"], 3), round(gender["ci_high"], 3)) == (0.045, 0.204)
        assert gender["n_clusters"] is None


def test_one_clustering_default_request_id_when_present_else_independent_rows():
    """cluster="auto" (the default of reo, reo_groups and reo_ab, as the pipeline's cluster_by = "auto"):
    rows with a request_id column are clustered by it, rows without one are independent, and every result's
    cluster_by says which; per-group counts carry no ids, so auto is independent there too."""
    rng = np.random.default_rng(11)
    rows = _simulated_rows(seed=4).with_columns(pl.Series("request_id", rng.integers(0, 300, 4000).astype(str)))
    calls = {
        "reo": lambda r, **k: fairmon.reo(r, group="region", label="like", **k),
        "reo_groups": lambda r, **k: fairmon.reo_groups(r, group="region", label="like", **k),
        "reo_ab": lambda r, **k: fairmon.reo_ab(r, group="region", label="like", control="ctl", **k),
    }
    for name, call in calls.items():
        auto, explicit, plain = call(rows), call(rows, cluster="request_id"), call(rows, cluster="none")
        assert auto.equals(explicit), name
        assert set(auto.get_column("cluster_by")) == {"request_id"}, name
        assert set(plain.get_column("cluster_by")) == {"none"}, name
        assert call(rows.drop("request_id")).equals(plain), name
        assert call(rows, cluster=None).equals(plain), name
        se = "se_delta_U" if name == "reo_groups" else "se"
        assert not np.allclose(auto.get_column(se).to_numpy(), plain.get_column(se).to_numpy()), name
    reo = calls["reo"](rows).row(0, named=True)
    assert reo["n_clusters"] == 300 and reo["cluster_sums"] == "exact"
    counts = fairmon.group_counts(rows, group="region", label="like").filter(pl.col("arm") != "trt")
    by_counts = fairmon.reo(counts.drop("arm"), group="group")
    assert by_counts.get_column("cluster_by").to_list() == ["none"]
    with pytest.raises(ValueError, match="cluster needs rows"):
        fairmon.reo(counts.drop("arm"), group="group", cluster="request_id")


# --- group_counts: the facade against the pipeline's SQL ------------------------------------------


def _simulated_rows(seed: int = 3, n: int = 4000) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    traffic = rng.choice(["default", "random"], n, p=[0.7, 0.3])
    return pl.DataFrame(
        {
            "traffic": traffic,
            "arm": rng.choice(["ctl", "trt"], n),  # random rows too: they are shared by every arm
            "like": rng.integers(0, 2, n),
            "share": (rng.random(n) < 0.1).astype(int),
            "region": [x or None for x in rng.choice(["n", "s", "e", ""], n, p=[0.3, 0.3, 0.35, 0.05]).tolist()],
            "young": rng.random(n) < 0.4,
        }
    )


@pytest.mark.parametrize("kind", list(KINDS))
def test_group_counts_equal_the_pipeline_sql(kind, tmp_path):
    rows = _simulated_rows()
    sql = _pipeline_counts(rows, ["like", "share"], ["region", "young"], tmp_path)
    convert, cls = KINDS[kind]
    out = fairmon.group_counts(convert(rows), group=["region", "young"], label=["like", "share"])
    assert isinstance(out, cls)
    keys = ["traffic", "arm", "attribute", "group", "n", "n_pos"]
    assert _native(out).columns == keys
    assert _native(out).sort(keys[:4]).equals(sql.select(keys).sort(keys[:4]))
    # conventions, checked by hand: null region is '(missing)', random rows are arm 'all', label = any signal
    got = _native(out)
    rand = rows.filter(pl.col("traffic") == "random")
    miss = got.filter((pl.col("traffic") == "random") & (pl.col("group") == "(missing)")).row(0, named=True)
    assert miss["arm"] == "all" and miss["n"] == rand.get_column("region").null_count()
    y = (rand.get_column("like") == 1) | (rand.get_column("share") == 1)
    assert miss["n_pos"] == int((y & rand.get_column("region").is_null()).sum())
    assert set(got.filter(pl.col("attribute") == "young").get_column("group")) == {"true", "false"}


def test_reo_from_counts_equals_reo_from_rows():
    rows = _simulated_rows(seed=5)
    from_rows = fairmon.reo(rows, group="region", label="like", arm="arm")
    counts = fairmon.group_counts(rows, group="region", label="like")
    from_counts = fairmon.reo(counts, group="group")
    assert from_counts.equals(from_rows)
    assert from_rows.get_column("arm").to_list() == ["ctl", "trt"]
    # counts per day: one row per day and arm, ds first
    dated = pl.concat([counts.with_columns(pl.lit(d).alias("ds")) for d in (D, D.replace(day=11))])
    per_day = fairmon.reo(dated, group="group")
    assert per_day.columns[0] == "ds" and per_day.height == 4
    assert per_day.get_column("reo").to_list() == from_rows.get_column("reo").to_list() * 2


def test_a_counts_day_is_read_as_the_pipeline_reads_it():
    """ds on counts: text, a naive timestamp and a UTC midnight are the same day (one row per arm); Tokyo's
    midnight (15:00 UTC the day before), which the pipeline refuses, is refused naming its row, not labelled
    the day before (a plain cast to a date took its UTC day)."""
    counts = fairmon.group_counts(_simulated_rows(seed=5), group="region", label="like")
    one = fairmon.reo(counts.with_columns(pl.lit(D).alias("ds")), group="group")
    stamp = pl.lit(dt.datetime(D.year, D.month, D.day))
    for ds in (pl.lit(D.isoformat()), stamp, stamp.dt.replace_time_zone("UTC")):
        got = fairmon.reo(counts.with_columns(ds.alias("ds")), group="group")
        assert got.equals(one) and got.get_column("ds").to_list() == [D, D]
    with pytest.raises(ValueError, match=r"counts, column 'ds', row 1: a timestamp with a time zone is a day only"):
        fairmon.reo(counts.with_columns(stamp.dt.replace_time_zone("Asia/Tokyo").alias("ds")), group="group")


# --- helpful errors ----------------------------------------------------------------------------------


def test_errors_name_the_problem():
    rows = pl.DataFrame({"traffic": ["default", "random"] * 3, "g": list("aabbab"), "y": [1, 0, 1, 1, 0, 1]})
    with pytest.raises(ValueError, match=r"no column 'gender'; columns present: 'traffic', 'g', 'y'"):
        fairmon.reo(rows, group="gender", label="y")
    with pytest.raises(InputContractError, match=r"column 'g', row 1: expected a boolean"):
        fairmon.reo(rows, group="y", label="g")
    with pytest.raises(InputContractError, match=r"column 'y', row 2: expected a boolean \(0/1\), got 2"):
        fairmon.group_counts(rows.with_columns(pl.Series("y", [1, 2, 0, 0, 1, 1])), group="g", label="y")
    bad = rows.with_columns(pl.Series("traffic", ["default", "explore"] * 3))
    with pytest.raises(ValueError, match=r"unknown traffic value 'explore'; allowed: default, random"):
        fairmon.reo(bad.to_pandas(), group="g", label="y")
    with pytest.raises(ValueError, match="no random traffic"):
        fairmon.reo(rows.filter(pl.col("traffic") == "default"), group="g", label="y")
    counts = pl.DataFrame({"traffic": ["default", "explore"], "group": ["a", "a"], "n": [5, 5], "n_pos": [1, 1]})
    with pytest.raises(ValueError, match="unknown traffic value 'explore'"):
        fairmon.reo(counts, group="group")
    with pytest.raises(ValueError, match="'n_pos' exceeds 'n'"):
        fairmon.reo(counts.with_columns(pl.lit("random").alias("traffic"), pl.lit(9).alias("n_pos")), group="group")
    with pytest.raises(TypeError, match="expected a pandas, Polars or PyArrow data frame"):
        fairmon.reo({"traffic": ["default"]}, group="g", label="y")
    with pytest.raises(ValueError, match=r"arm\(s\) \['nope'\] have no default traffic; arms present: all"):
        fairmon.reo_ab(rows, group="g", label="y", control="nope")


# --- A/B: the joint delta method by hand (DESIGN §4.1, Algorithm 2) ---------------------------------


def test_reo_ab_delta_equals_the_joint_delta_method_by_hand():
    n_C, n_T, n_rand = 20_000, 20_000, 10_000
    # both arms far from parity (their parity-aware intervals exclude 0): the delta row, not the projection
    a_C, a_T, b = np.array([700, 1300]), np.array([1000, 1000]), np.array([400, 500])
    counts = pl.DataFrame(
        {
            "traffic": ["default"] * 4 + ["random"] * 2,
            "arm": ["ctl", "ctl", "trt", "trt", "all", "all"],
            "group": ["a", "b"] * 3,
            "n": [n_C // 2] * 2 + [n_T // 2] * 2 + [n_rand // 2] * 2,
            "n_pos": [*a_C, *a_T, *b],
        }
    )

    def reo_and_gradient(a, n):  # K = 2: REO = |r - 1|/(r + 1), r = U_a/U_b; g = dREO/dlog U
        Q, P = a / n, b / n_rand
        r = (Q[0] / P[0]) / (Q[1] / P[1])
        return abs(r - 1) / (r + 1), np.sign(r - 1) * 2 * r / (1 + r) ** 2 * np.array([1.0, -1.0]), Q, P

    reo_T, g_T, Q_T, P = reo_and_gradient(a_T, n_T)
    reo_C, g_C, Q_C, _ = reo_and_gradient(a_C, n_C)
    var = np.sum(g_T**2 / (Q_T * n_T)) + np.sum(g_C**2 / (Q_C * n_C)) + np.sum((g_T - g_C) ** 2 / (P * n_rand))
    out = fairmon.reo_ab(counts.to_pandas(), group="group", control="ctl")
    assert isinstance(out, pd.DataFrame)
    row = out[(out["metric"] == "reo") & (out["method"] == "delta")].iloc[0]
    assert (row["control"], row["treatment"]) == ("ctl", "trt")
    assert row["diff"] == pytest.approx(reo_T - reo_C, rel=1e-12)
    assert row["se"] == pytest.approx(math.sqrt(var), rel=1e-10)
    z = stats.norm.ppf(0.975)
    assert row["ci_low"] == pytest.approx(row["diff"] - z * row["se"], rel=1e-9)
    assert row["p_value"] == pytest.approx(2 * stats.norm.sf(abs(row["diff"]) / row["se"]), rel=1e-9)
    assert set(out["metric"]) == {"reo", "delta_U:a", "delta_U:b"}


# --- prevalence at the threshold: weighted least squares by hand, and the simulation's truth ------------


def test_threshold_prevalence_is_the_tricube_wls_intercept():
    rng = np.random.default_rng(7)
    n, t, d = 8000, 0.3, 0.1
    s = rng.random(n)
    g = rng.choice(["a", "b"], n)
    truth = {"a": 0.0, "b": 0.1}  # E[Y | s] = s (+ 0.1 for b): at s = t the truth is 0.3 and 0.4
    y = rng.random(n) < s + np.where(g == "b", 0.1, 0.0)
    rows = pa.table({"score": s, "outcome": y, "grp": g})
    out = fairmon.threshold_prevalence(rows, score="score", outcome="outcome", group="grp", t=t, d=d)
    assert isinstance(out, pa.Table)
    got = {r["group"]: r for r in pl.from_arrow(out).iter_rows(named=True)}
    assert set(got) == {"*", "a", "b"}
    for grp, shift in truth.items():
        m = (g == grp) & (np.abs(s - t) < d)
        x, w = s[m] - t, (1 - (np.abs(s[m] - t) / d) ** 3) ** 3  # tricube weights (DESIGN §4.2)
        X = np.column_stack([np.ones(x.size), x])
        beta = np.linalg.solve(X.T @ (w[:, None] * X), X.T @ (w * y[m]))
        row = got[grp]
        assert row["n_window"] == m.sum()
        assert row["prevalence_at_threshold"] == pytest.approx(beta[0], rel=1e-10)
        assert row["implied_cost_ratio"] == pytest.approx((1 - beta[0]) / beta[0], rel=1e-10)  # eq. 6
        assert abs(row["prevalence_at_threshold"] - (t + shift)) < 4 * row["se"]  # the simulation's truth
        assert row["ci_low"] <= row["prevalence_at_threshold"] <= row["ci_high"]
    diff = pl.from_arrow(
        fairmon.threshold_prevalence_diff(rows, score="score", outcome="outcome", group="grp", t=t, d=d)
    ).row(0, named=True)
    assert (diff["group_a"], diff["group_b"]) == ("a", "b")
    assert diff["diff"] == pytest.approx(got["a"]["prevalence_at_threshold"] - got["b"]["prevalence_at_threshold"])
    assert abs(diff["diff"] - (-0.1)) < 4 * diff["se"]
    # seed 002 eqs. 5-6: the ratio of the groups' implied cost ratios (truth (0.7/0.3)/(0.6/0.4) = 1.56);
    # a's lower threshold weighs its false negatives more: both intervals say so
    c_a, c_b = got["a"]["implied_cost_ratio"], got["b"]["implied_cost_ratio"]
    assert diff["cost_ratio_ratio"] == pytest.approx(c_a / c_b, rel=1e-12)
    assert diff["ci_high"] < 0 and 1 < diff["cost_ratio_ratio_ci_low"] < diff["cost_ratio_ratio_ci_high"]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), None])
def test_threshold_prevalence_refuses_a_score_that_is_not_a_finite_number(bad):
    """Such rows were left out silently, where the pipeline refuses the file (score required, a number)."""
    rows = pl.DataFrame({"score": [0.2, 0.4, bad, 0.3], "outcome": [True, False, True, False], "grp": ["a"] * 4})
    for call in (fairmon.threshold_prevalence, fairmon.threshold_prevalence_diff):
        with pytest.raises(ValueError, match="column 'score', row 3: a score must be a finite number"):
            call(rows, score="score", outcome="outcome", group="grp", t=0.3, d=0.1)


# --- SDT: a hand-computed confusion table (DESIGN §4.3, eq. 12) --------------------------------------


def _labels(labeler: str, tp: int, fn: int, fp: int, tn: int) -> list[dict]:
    cells = [(True, True, tp), (False, True, fn), (True, False, fp), (False, False, tn)]
    return [{"who": labeler, "lab": lab, "gold": gold, "grp": "g1"} for lab, gold, k in cells for _ in range(k)]


def test_sdt_equals_the_hand_computed_criterion_and_cost_ratio():
    rows = _labels("x", 40, 10, 20, 80) + _labels("y", 45, 5, 10, 90)
    rows += [{"who": "x", "lab": True, "gold": None, "grp": "g1"}] * 7  # not reviewed: in no cell
    rows += [{"who": "y", "lab": None, "gold": True, "grp": "g1"}] * 3  # no decision: dropped
    out = fairmon.sdt(pd.DataFrame(rows), label="lab", gold_label="gold", labeler="who", group="grp")
    assert isinstance(out, pd.DataFrame)
    got = {r["labeler_id"]: r for r in out.to_dict("records")}
    # FPR = FNR makes t = d'/2, so exp(-t d' + d'^2/2) = 1 and c = (1 - φ)/φ = 100/50 = 2 (eq. 12)
    for lab, (fpr, n_pos, n_neg) in {"x": (0.2, 50, 100), "y": (0.1, 50, 100), "*": (0.15, 100, 200)}.items():
        r = got[lab]
        t = stats.norm.ppf(1 - fpr)
        assert (r["n_pos"], r["n_neg"]) == (n_pos, n_neg)
        assert r["fpr"] == pytest.approx(fpr, rel=1e-12) and r["fnr"] == pytest.approx(fpr, rel=1e-12)
        assert r["criterion_t"] == pytest.approx(t, rel=1e-12)
        assert r["d_prime"] == pytest.approx(2 * t, rel=1e-12)
        assert r["prevalence"] == pytest.approx(1 / 3, rel=1e-12)
        assert r["cost_ratio"] == pytest.approx(2.0, rel=1e-12)
        assert r["implied_threshold"] == pytest.approx(1 / 3, rel=1e-12)
        assert r["cost_ratio_ci_low"] < 2.0 < r["cost_ratio_ci_high"]
    assert not got["x"]["corrected"]


# --- envy audit: Lemma 4's bounds by hand (DESIGN §4.7) ----------------------------------------------


def test_envy_audit_decisions_and_bounds_by_hand():
    rows = pl.DataFrame(
        {
            "user": ["a"] * 400 + ["c"] * 400 + ["e"] * 50,
            "donor": [None] * 200 + ["b"] * 200 + ["c"] * 200 + ["d"] * 200 + [None] * 50,
            "reward": [1] * 200 + [0] * 200 + [0] * 200 + [1] * 200 + [1] * 50,
        }
    )
    eps, delta, lam, gamma = 0.05, 0.05, 0.5, 0.5
    kw = dict(user="user", donor="donor", reward="reward", epsilon=eps, delta=delta, lam=lam, gamma=gamma)
    users = fairmon.envy_users(rows, **kw)
    audit = fairmon.envy_audit(rows, **kw).row(0, named=True)
    m_tilde = math.ceil(math.log(3 / delta) / lam)  # Alg. 2: 9
    k = math.ceil(math.log(3 * m_tilde / delta) / math.log(1 / (1 - gamma)))
    d_user = delta / (3 * max(m_tilde, 2))  # two targets: a and c (e has no donor row)
    omega, sigma = 0.01, 0.5
    theta = math.log(1 + omega) * (omega * d_user / (2 * (2 + omega))) ** (1 / (1 + omega))
    beta = math.sqrt(2 * sigma**2 * (1 + math.sqrt(omega)) ** 2 * (1 + omega) / 200) * math.sqrt(
        math.log(2 * 2 / theta * math.log((1 + omega) * 200))
    )
    got = {r["user_id"]: r for r in users.iter_rows(named=True)}
    assert set(got) == {"a", "c"}
    assert got["a"]["delta_user"] == pytest.approx(d_user, rel=1e-12)
    assert got["a"]["mean_own"] == 1.0 and got["a"]["best_donor_mean"] == 0.0
    assert got["a"]["max_donor_upper"] == pytest.approx(beta, rel=1e-10)
    assert got["a"]["lower_own"] == pytest.approx(1 - beta, rel=1e-10)
    assert got["a"]["decision"] == "eps_no_envy" and got["c"]["decision"] == "envy"
    assert (audit["M_tilde"], audit["K"], audit["targets"]) == (m_tilde, k, 2)
    assert audit["n_envy"] == 1 and audit["verdict"] == "not_envy_free" and not audit["design_ok"]


@pytest.mark.parametrize(
    ("epsilon", "delta", "message"),
    [
        (float("nan"), 0.05, "epsilon must lie in"),  # certified "envy_free" every user: NaN comparisons
        (0.0, 0.05, "epsilon must lie in"),
        (3.0, 0.05, "epsilon must lie in"),  # a margin wider than the reward's range certifies anything
        (0.05, 0.7, r"delta must lie in \(0, 1/2\)"),  # Th. 2 holds for δ < 1/2 (seed 004 App. E.5)
        (0.05, float("nan"), "delta must lie in"),
    ],
)
def test_envy_audit_refuses_a_margin_or_error_probability_its_theorem_excludes(epsilon, delta, message):
    """A user who truly envies (own reward 0.5, every donor's 0.6) was certified envy-free at ε = NaN."""
    rows = pl.DataFrame({"user": ["a"] * 4, "donor": [None, None, "b", "b"], "reward": [0, 1, 1, 1]})
    kw = dict(user="user", donor="donor", reward="reward", epsilon=epsilon, delta=delta, lam=0.2, gamma=0.3)
    for call in (fairmon.envy_users, fairmon.envy_audit):
        with pytest.raises(ValueError, match=message):
            call(rows, **kw)


# --- read_table: only days whose latest run published ------------------------------------------------


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_read_table_returns_only_published_days(tmp_path):
    cfg = tmp_path / "fairmon.toml"
    cfg.write_text(
        'warehouse = "wh"\nduckdb = "f.duckdb"\n[impressions]\nformat = "contract"\n'
        'path = "in/{ds}.parquet"\nsignals = ["sig"]\nattributes = ["grp"]\n'
    )
    days = [D + dt.timedelta(days=i) for i in range(4)]
    partition_run = {days[0]: "r0", days[1]: "r1", days[2]: "r2-old", days[3]: "r3"}
    for day, run in partition_run.items():
        part = tmp_path / "wh" / "reo" / f"ds={day}" / "part-0.parquet"
        part.parent.mkdir(parents=True)
        pl.DataFrame({"run_id": [run], "arm": ["all"], "attribute": ["grp"], "reo": [0.1 * day.day]}).write_parquet(
            part
        )
    runs = [  # (run, day, started, status): day 1's latest run was quarantined, day 2's rows are an older run's
        ("r0", days[0], 1, "published"),
        ("r1", days[1], 1, "published"),
        ("r1b", days[1], 2, "quarantined"),
        ("r2-old", days[2], 1, "published"),
        ("r2", days[2], 2, "published"),
        ("r3", days[3], 1, "published"),
    ]
    with pytest.raises(RuntimeError, match="cannot tell which days are published: .*f.duckdb does not exist yet"):
        fairmon.read_table(cfg, "reo")
    with db.connect(tmp_path / "f.duckdb") as con:
        db.execute(con, "runs_create")
        db.execute(con, "runs_migrate")
        for run, day, started, status in runs:
            params = dict(config_path="", config_fp="", params="{}", inputs="[]")
            db.execute(con, "runs_start", run_id=run, ds=day, started_at=dt.datetime(2026, 1, 1, started), **params)
            db.execute(
                con, "runs_finish", run_id=run, status=status, detail="", inputs="[]", outputs="{}", timings="{}"
            )
    out = fairmon.read_table(cfg, "reo")
    assert out.get_column("ds").to_list() == [days[0], days[3]]
    assert out.get_column("reo").to_list() == pytest.approx([1.0, 1.3])
    assert fairmon.read_table(str(cfg), "reo", start=str(days[1])).get_column("ds").to_list() == [days[3]]
    assert fairmon.read_table(cfg, "reo", end=days[2], backend="pandas")["ds"].tolist() == [days[0]]
    with pytest.raises(ValueError, match="no published table 'nope'; tables with published views: .*reo"):
        fairmon.read_table(cfg, "nope")


# --- run_day: a day in process, the partitions `fairmon run` publishes ---------------------------------

_RUN_DAY = """
import subprocess, sys
started = []
popen = subprocess.Popen
def recording(cmd, *args, **kwargs):
    started.append(" ".join(map(str, cmd)))
    return popen(cmd, *args, **kwargs)
subprocess.Popen = recording
import fairmon
summary = fairmon.run_day(sys.argv[1], sys.argv[2])
SERVER = "prefect.server" + ".api.server"
print(summary["status"], SERVER in sys.modules, [c for c in started if "uvicorn" in c or "prefect" in c])
"""


def _partitions(root) -> dict:
    """{table/ds=...: frame without run_id, ``root`` written <ROOT>} of every partition of ``root``/warehouse."""
    out = {}
    for p in sorted((root / "warehouse").glob("*/ds=*/part-0.parquet")):
        frame = pl.read_parquet(p).drop("run_id", strict=False)
        text = [c for c, t in frame.schema.items() if t == pl.String]
        frame = frame.with_columns(pl.col(c).str.replace_all(str(root), "<ROOT>", literal=True) for c in text)
        out[f"{p.parent.parent.name}/{p.parent.name}"] = frame
    return out


def test_run_day_publishes_what_fairmon_run_publishes_without_a_prefect_server(tmp_path, prefect_harness):
    """``fairmon.run_day`` in a fresh process with no Prefect API configured
    starts no server (nor imports Prefect's server package) and publishes
    the partitions ``fairmon run`` publishes through Prefect, run_id apart."""
    import os

    from typer.testing import CliRunner

    from fairmon.pipelines.faces.cli import app
    from fairmon.pipelines.simulation.simulated import write_simulation
    from fairmon.transforms.simulators.impressions import SimulationSpec

    spec = SimulationSpec(start=D, days=2, rows_per_day=3000, random_rows_per_day=1500, seed=11)
    for name in ("lib", "cli"):
        write_simulation(spec, tmp_path / name, "csv")
    ds = str(D + dt.timedelta(days=1))
    res = CliRunner().invoke(app, ["run", "-c", str(tmp_path / "cli" / "fairmon.toml"), "--date", ds, "--prefect"])
    assert res.exit_code == 0, res.output
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    run = subprocess.run(
        [sys.executable, "-c", _RUN_DAY, str(tmp_path / "lib" / "fairmon.toml"), ds],
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["published", "False", "[]"]
    lib, cli = _partitions(tmp_path / "lib"), _partitions(tmp_path / "cli")
    assert sorted(lib) == sorted(cli) and any(k.startswith("reo/") for k in lib)
    for key, frame in cli.items():
        assert lib[key].equals(frame, null_equal=True), key


def test_group_columns_with_any_name_are_counted_under_that_name():
    """Group columns named with a space or differing only in case (any name a frame may have) are counted each
    under its own name, as the pipeline's count statement counts attributes: the counts by hand."""
    rows = pl.DataFrame(
        {
            "traffic": ["default", "default", "random", "random"],
            "age band": ["a", "b", "a", None],
            "G": ["x", "y", "x", "y"],
            "g": ["p", "p", "q", "q"],
            "y": [True, False, True, True],
        }
    )
    out = fairmon.group_counts(rows, group=["age band", "G", "g"], label="y")
    got = {(r["traffic"], r["attribute"], r["group"]): (r["n"], r["n_pos"]) for r in out.iter_rows(named=True)}
    assert got == {
        ("default", "G", "x"): (1, 1),
        ("default", "G", "y"): (1, 0),
        ("default", "age band", "a"): (1, 1),
        ("default", "age band", "b"): (1, 0),
        ("default", "g", "p"): (2, 1),
        ("random", "G", "x"): (1, 1),
        ("random", "G", "y"): (1, 1),
        ("random", "age band", "(missing)"): (1, 1),
        ("random", "age band", "a"): (1, 1),
        ("random", "g", "q"): (2, 2),
    }
