"""End to end through the Prefect flows: simulated TikTok-format files and Coat.

Every expected number is recomputed here independently from the raw files.
"""

import datetime as dt
import shutil

import duckdb
import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from fairmon.api.counting import cluster_bucket
from fairmon.pipelines.core.config import load_config
from fairmon.pipelines.faces.cli import app
from fairmon.pipelines.orchestration.flows import DayQuarantined, daily
from fairmon.pipelines.report.report import build_report
from fairmon.pipelines.simulation.simulated import write_simulation
from fairmon.pipelines.storage.warehouse import partition_path, read_table
from fairmon.transforms.reo.cluster import BucketSums, sums_from_rows
from fairmon.transforms.reo.estimate import estimate_reo
from fairmon.transforms.simulators.impressions import TIKTOK_SIGNALS, SimulationSpec

pytestmark = pytest.mark.usefixtures("prefect_harness")

SPEC = SimulationSpec(
    start=dt.date(2026, 2, 1),
    days=4,
    rows_per_day=4000,
    random_rows_per_day=1500,
    arms={"control": {}, "treatment": {0: 1.25}},
    random_pool_days=2,
    seed=9,
)
DAY3 = SPEC.start + dt.timedelta(days=2)


@pytest.fixture()
def sim(tmp_path):
    paths = write_simulation(SPEC, tmp_path / "sim", "csv")
    return tmp_path / "sim", paths["config"]


def _sums(frame: pl.DataFrame, y: pl.Expr, buckets: int = 128) -> BucketSums:
    """Per-bucket sums of the rows: request ids hashed as sql/impressions_bucket.sql says, from the CSV rows
    (``exact=0``: the hash buckets, as for a day of more than cluster_exact_max clusters)."""
    b = cluster_bucket(frame.get_column("request_id"), buckets, exact=0).to_numpy()
    return sums_from_rows(b, frame.get_column("young_adult").to_numpy(), frame.select(y).to_series().to_numpy(), 2)


def independent_reo(sim_dir, ds, arm, clustered=True):
    """REO for one day/arm straight from the CSV files (no fairmon SQL); by
    default with the cluster-robust variance of ``cluster_by = auto``
    (request_id is present: every row is its own request here)."""
    y = pl.any_horizontal([pl.col(s) == 1 for s in TIKTOK_SIGNALS])
    rec = pl.read_csv(sim_dir / "default" / f"{ds}.csv").filter(pl.col("arm") == arm)
    w0 = ds - dt.timedelta(days=1)  # window of 2 days (random_pool_days)
    pools = [
        p
        for p in sorted((sim_dir / "random").glob("random_*.csv"))
        if dt.date.fromisoformat(p.stem.split("_")[1]) <= ds and dt.date.fromisoformat(p.stem.split("_")[2]) >= w0
    ]
    rand = pl.concat([pl.read_csv(p) for p in pools])
    a = [rec.filter(y & (pl.col("young_adult") == k)).height for k in (0, 1)]
    b = [rand.filter(y & (pl.col("young_adult") == k)).height for k in (0, 1)]
    # the day's own rows of every arm and its random window hold more than 4,096 (cluster_exact_max) requests,
    # so the pipeline's day is summed per hash bucket
    day_ids = pl.read_csv(sim_dir / "default" / f"{ds}.csv").get_column("request_id").n_unique()
    assert day_ids + rand.get_column("request_id").n_unique() > 4096 or not clustered
    clusters = {"clusters_rec": _sums(rec, y), "clusters_rand": _sums(rand, y)} if clustered else {}
    return estimate_reo(["0", "1"], np.array(a), rec.height, np.array(b), rand.height, **clusters), len(pools)


def test_daily_flow_matches_independent_computation(sim):
    sim_dir, cfg = sim
    out = daily(str(cfg), DAY3)
    reo = {r["arm"]: r for r in out["reo"]}
    assert set(reo) == {"control", "treatment"}
    for arm, row in reo.items():
        e, n_pools = independent_reo(sim_dir, DAY3, arm)
        assert n_pools == 2
        assert row["reo"] == pytest.approx(e.reo, rel=1e-12)
        assert row["se"] == pytest.approx(e.se, rel=1e-12)
        assert row["ci_low"] == pytest.approx(e.ci_low, rel=1e-12)
        assert row["cluster_by"] == "request_id" and row["design_effect"] == pytest.approx(e.design_effect, rel=1e-9)
        # one row per request: robust and multinomial variances agree within the 127-df sandwich's noise
        multinomial, _ = independent_reo(sim_dir, DAY3, arm, clustered=False)
        assert 0.6 < (e.se / multinomial.se) ** 2 < 1.5
        assert row["n_rec"] == SPEC.rows_per_day and row["n_rand"] == 4 * SPEC.random_rows_per_day
        assert row["rand_window_start"] == SPEC.start and row["rand_window_end"] == SPEC.start + dt.timedelta(3)
    wh = sim_dir / "warehouse"
    for t in ("group_counts", "reo_group", "reo"):
        assert partition_path(wh, t, DAY3).is_file()
    published = read_table(wh, "reo")
    assert published.height == 2 and published.get_column("ds").to_list() == [DAY3, DAY3]
    con = duckdb.connect(str(sim_dir / "fairmon.duckdb"), read_only=True)
    try:
        rows = con.sql("SELECT arm, reo FROM reo WHERE ds = $ds ORDER BY arm", params={"ds": DAY3}).fetchall()
    finally:
        con.close()
    assert rows == [(a, pytest.approx(reo[a]["reo"], rel=1e-12)) for a in ("control", "treatment")]
    # the simulator's config compares every arm with "control" by all four A/B methods
    ab = read_table(wh, "reo_ab").filter(pl.col("metric") == "reo")
    assert sorted(ab.get_column("method").to_list()) == ["bootstrap", "delta", "delta_paper", "partition"]
    d = ab.filter(pl.col("method") == "delta").row(0, named=True)
    assert d["diff"] == pytest.approx(reo["treatment"]["reo"] - reo["control"]["reo"], rel=1e-12)
    report = build_report(load_config(cfg), DAY3, DAY3).read_text()
    assert "A/B tests: change in REO by treatment" in report and report.count("<svg") == 3


def test_rerun_is_idempotent_and_reingest_replaces(sim):
    sim_dir, cfg = sim
    first = daily(str(cfg), DAY3)
    second = daily(str(cfg), DAY3, force_ingest=True)
    assert second["reo"] == first["reo"]
    wh = sim_dir / "warehouse"
    assert [p.name for p in (wh / "reo" / f"ds={DAY3}").iterdir()] == ["part-0.parquet"]
    assert read_table(wh, "reo").height == 2
    # a changed file for the day replaces the day's staged rows (not appended)
    f = sim_dir / "default" / f"{DAY3}.csv"
    pl.read_csv(f).filter(pl.int_range(pl.len()) % 8 == 0).write_csv(f)  # 1000 rows, 500 per arm
    third = daily(str(cfg), DAY3)
    assert {r["arm"]: r["n_rec"] for r in third["reo"]} == {"control": 500, "treatment": 500}
    con = duckdb.connect(str(sim_dir / "fairmon.duckdb"), read_only=True)
    try:
        staged = con.sql(
            "SELECT sum(n) FROM impressions WHERE ds = $ds AND traffic = 'default'", params={"ds": DAY3}
        ).fetchall()[0][0]
        n_reo = con.sql("SELECT count(*) FROM reo WHERE ds = $ds", params={"ds": DAY3}).fetchall()[0][0]
    finally:
        con.close()
    assert staged == 1000 and n_reo == 2


@pytest.mark.parametrize(
    "defect,expect",
    [
        ("missing_column", "column_exists[share]"),
        ("wrong_type", "signal_is_boolean[follow] (1 unexpected, rows 3: ['often'])"),
        ("empty_file", "has_rows"),
    ],
)
def test_bad_input_stops_the_day_and_keeps_the_old_partition(sim, defect, expect):
    sim_dir, cfg = sim
    daily(str(cfg), DAY3)
    part = partition_path(sim_dir / "warehouse", "reo", DAY3)
    before = pl.read_parquet(part)
    f = sim_dir / "default" / f"{DAY3}.csv"
    good = pl.read_csv(f)
    if defect == "missing_column":
        good.drop("share").write_csv(f)
    elif defect == "wrong_type":
        good.with_columns(pl.col("follow").cast(pl.String)).with_columns(
            pl.when(pl.int_range(pl.len()) == 2).then(pl.lit("often")).otherwise(pl.col("follow")).alias("follow")
        ).write_csv(f)
    else:
        f.write_text("")
    with pytest.raises(DayQuarantined) as e:
        daily(str(cfg), DAY3)
    assert str(f) in str(e.value) and expect in str(e.value) and str(DAY3) in str(e.value)
    assert pl.read_parquet(part).equals(before)  # previous publication intact
    assert not list((sim_dir / "warehouse" / "_tmp").glob("*"))  # nothing half-written


def test_bad_day_without_previous_run_leaves_no_partition(sim):
    sim_dir, cfg = sim
    day4 = SPEC.start + dt.timedelta(days=3)
    f = sim_dir / "default" / f"{day4}.csv"
    pl.read_csv(f).drop("young_adult").write_csv(f)
    with pytest.raises(DayQuarantined, match=r"column_exists\[young_adult\]"):
        daily(str(cfg), day4)
    assert not (sim_dir / "warehouse" / "reo" / f"ds={day4}").exists()


def test_contract_format_unknown_traffic(tmp_path):
    d = dt.date(2026, 5, 1)
    day = tmp_path / "in" / f"{d}.parquet"
    day.parent.mkdir()
    pl.DataFrame(
        {
            "ds": [d] * 4,
            "traffic": ["default", "random", "explore", "default"],
            "sig": [1, 0, 1, 1],
            "grp": ["a", "b", "a", "b"],
        }
    ).write_parquet(day)
    cfg = tmp_path / "f.toml"
    cfg.write_text(
        'warehouse = "wh"\nduckdb = "f.duckdb"\n[impressions]\nformat = "contract"\n'
        'path = "in/{ds}.parquet"\nsignals = ["sig"]\nattributes = ["grp"]\n'
    )
    with pytest.raises(DayQuarantined) as e:
        daily(str(cfg), d)
    assert str(day) in str(e.value) and "traffic_known (1 unexpected, rows 3: ['explore'])" in str(e.value)
    assert not (tmp_path / "wh" / "reo").exists()


def test_coat_gender_matches_independent_computation(tmp_path, coat_dir):
    cfg = tmp_path / "coat.toml"
    cfg.write_text(
        f'warehouse = "wh"\nduckdb = "c.duckdb"\n[impressions]\nformat = "coat"\npath = "{coat_dir}"\n'
        'ds = 2016-06-19\nmin_rating = 4\nsignals = ["liked"]\nattributes = ["gender"]\n'
        "random_window_days = 1\n"
    )
    out = daily(str(cfg), dt.date(2016, 6, 19))
    row = out["reo"][0]
    # independent: straight from the matrices; item gender = which of the first two one-hot columns is set
    train = np.loadtxt(coat_dir / "train.ascii")
    test = np.loadtxt(coat_dir / "test.ascii")
    feat_dir = coat_dir / "user_item_features" if (coat_dir / "user_item_features").is_dir() else coat_dir
    men = np.loadtxt(feat_dir / "item_features.ascii")[:, 0] == 1
    n_rec, n_rand = (train > 0).sum(), (test > 0).sum()
    Q = np.array([((train >= 4) & men).sum(), ((train >= 4) & ~men).sum()]) / n_rec
    P = np.array([((test >= 4) & men).sum(), ((test >= 4) & ~men).sum()]) / n_rand
    U = Q / P
    r = U[0] / U[1]
    reo = abs(r - 1) / (r + 1)  # K = 2 closed form of std/mean
    se_mult = 2 * r / (1 + r) ** 2 * np.sqrt(np.sum(1 / (Q * n_rec) + 1 / (P * n_rand)))

    # Coat's request_id is the user: cluster_by = auto clusters a user's ratings. The exact sandwich by hand,
    # one cluster per user, K = 2: a user rates in both traffics, so h_c = cᵀ(z^Q_c − z^P_c), z_{c,k} =
    # e_{c,k}/(n share_k), e_{c,k} = a_{c,k} − share_k n_c, c = (1, −1), Var(log r) = C/(C−1) Σ_c h_c², C the
    # users with rows in either traffic.
    def influence(mat, share):
        liked = mat >= 4
        e = np.stack([liked[:, cols].sum(axis=1) for cols in (men, ~men)], axis=1).astype(float)
        rows = (mat > 0).sum(axis=1).astype(float)
        e -= np.outer(rows, share)
        return e / (rows.sum() * share), rows > 0

    (zq, in_q), (zp, in_p) = influence(train, Q), influence(test, P)
    C = int((in_q | in_p).sum())
    h = (zq - zp) @ np.array([1.0, -1.0])
    se = 2 * r / (1 + r) ** 2 * np.sqrt(C / (C - 1) * np.sum(h * h))
    assert C == 290 and row["n_clusters"] == C and row["cluster_sums"] == "exact"
    assert row["attribute"] == "gender" and row["K"] == 2
    assert row["n_rec"] == n_rec == 6960 and row["n_rand"] == n_rand == 4640
    assert row["reo"] == pytest.approx(reo, rel=1e-12)
    assert row["cluster_by"] == "request_id"
    assert row["se"] == pytest.approx(se, rel=1e-9)
    assert row["design_effect"] == pytest.approx((se / se_mult) ** 2, rel=1e-9)
    assert row["design_effect"] > 1.5  # a user's ratings are far from independent draws
    # K = 2: the interval is the folded-normal inversion, near REO ± z·SE
    assert row["ci_high"] == pytest.approx(reo + 1.959963984540054 * se, abs=1e-2)
    assert row["reo"] == pytest.approx(0.1245, abs=1e-4)
    assert row["ci_low"] < 1 / 9 < row["ci_high"] and row["verdict_80pct"] == "inconclusive"


def test_cli_backfill_and_errors(sim):
    sim_dir, cfg = sim
    runner = CliRunner()
    res = runner.invoke(
        app, ["backfill", "-c", str(cfg), "--start", str(SPEC.start), "--end", str(SPEC.start + dt.timedelta(days=3))]
    )
    assert res.exit_code == 0, res.output
    assert _summary_count(res.output, "published") == 4
    assert read_table(sim_dir / "warehouse", "reo").height == 8
    # one bad day: reported, the others still publish, exit code 1
    f = sim_dir / "default" / f"{SPEC.start + dt.timedelta(days=1)}.csv"
    f.write_text("")
    res = runner.invoke(
        app, ["backfill", "-c", str(cfg), "--start", str(SPEC.start), "--end", str(SPEC.start + dt.timedelta(days=3))]
    )
    assert res.exit_code == 1
    assert _summary_count(res.output, "published") == 3 and _summary_count(res.output, "quarantined") == 1
    assert "has_rows" in res.output
    res = runner.invoke(app, ["run", "-c", str(sim_dir / "nope.toml"), "--date", "2026-02-01"])
    assert res.exit_code == 2 and "not found" in res.output


def _summary_count(output: str, status: str) -> int:
    """Rows of the closing summary table with this status."""
    return sum(status in ln for ln in output.splitlines() if ln.startswith("│ 20"))


def test_cli_help():
    runner = CliRunner()
    res = runner.invoke(app, ["--help"])
    assert res.exit_code == 0
    for cmd in ("run", "backfill", "simulate", "demo"):
        assert cmd in res.output
        sub = runner.invoke(app, [cmd, "--help"])
        assert sub.exit_code == 0 and "Usage" in sub.output
    sim_help = runner.invoke(app, ["simulate", "--help"]).output
    assert "--arm" in sim_help and "--regime" in sim_help


def test_cli_simulate_writes_truth(tmp_path):
    res = CliRunner().invoke(
        app,
        [
            "simulate",
            "-o",
            str(tmp_path / "s"),
            "--days",
            "2",
            "--rows-per-day",
            "500",
            "--random-rows-per-day",
            "100",
            "--arm",
            "control",
            "--arm",
            "deboost=0:2",
        ],
    )
    assert res.exit_code == 0, res.output
    truth = pl.read_csv(tmp_path / "s" / "truth_reo.csv")
    assert truth.height == 4 and set(truth.get_column("arm")) == {"control", "deboost"}
    shutil.rmtree(tmp_path / "s")


def test_cli_ingest_stages_without_computing(sim):
    sim_dir, cfg = sim
    res = CliRunner().invoke(app, ["ingest", "-c", str(cfg), "--date", str(DAY3)])
    assert res.exit_code == 0, res.output
    assert res.output.count(": staged") == 3  # the day's default file and the two pools its window overlaps
    assert not (sim_dir / "warehouse" / "reo").exists()
    con = duckdb.connect(str(sim_dir / "fairmon.duckdb"), read_only=True)
    try:
        n = con.sql(
            "SELECT sum(n) FROM impressions WHERE ds = $d AND traffic = 'default'", params={"d": DAY3}
        ).fetchall()[0][0]
    finally:
        con.close()
    assert n == 2 * SPEC.rows_per_day


def test_backfill_days_are_task_runs_of_the_parent_flow_run(sim, monkeypatch):
    """A backfill's days are task runs (backfill_day) inside its parent flow
    run fairmon-backfill/<start>..<end>, not flow runs of their own (a flow
    run per day waited on Prefect's server: 0.15-1.8 s a day); a day alone
    is the flow run fairmon-daily/<ds>. Same results either way."""
    from prefect.context import FlowRunContext

    from fairmon.pipelines.orchestration import runner

    seen = []

    def recording(name, real):
        def call(cfg, ds, *args, **kwargs):
            ctx = FlowRunContext.get()
            seen.append((name, ds, ctx.flow_run.name if ctx else None))
            return real(cfg, ds, *args, **kwargs)

        return call

    monkeypatch.setattr(runner, "daily", recording("flow", runner.daily))
    monkeypatch.setattr(runner, "backfill_day", recording("task", runner.backfill_day))
    _, cfg_path = sim
    cfg = load_config(cfg_path)
    days = [SPEC.start, SPEC.start + dt.timedelta(days=1)]
    both = runner.run_days(cfg, days)
    assert [r["status"] for r in both] == ["published"] * 2
    parent = f"fairmon-backfill/{days[0]}..{days[1]}"
    assert seen == [("task", days[0], parent), ("task", days[1], parent)]
    seen.clear()
    (alone,) = runner.run_days(cfg, [days[1]])
    assert alone["status"] == "published" and seen == [("flow", days[1], None)]
    assert alone["reo"] == both[1]["reo"]  # the same day, the same numbers


def _gx_runs(monkeypatch) -> list[str]:
    """The suites of every GX checkpoint run from now on, in order (QualityGate.run_checkpoint recorded)."""
    from fairmon.pipelines.checks.gate import QualityGate

    runs = []
    real = QualityGate.run_checkpoint

    def counting(self, suite, *args, **kwargs):
        runs.append(suite)
        return real(self, suite, *args, **kwargs)

    monkeypatch.setattr(QualityGate, "run_checkpoint", counting)
    return runs


def test_a_batch_checks_its_days_together_and_publishes_what_days_alone_publish(sim, monkeypatch):
    """A batch's days go through each stage together: one GX run per suite
    for all their counts, outputs and dq_results, each day estimated once.
    What is published is what days run alone publish."""
    from fairmon.pipelines.executor import batch
    from fairmon.pipelines.orchestration import runner

    runs = _gx_runs(monkeypatch)
    estimated = []
    real = batch.estimate

    def estimate(cfg, counts, ds, *args):
        estimated.append(ds)
        return real(cfg, counts, ds, *args)

    monkeypatch.setattr(batch, "estimate", estimate)
    sim_dir, cfg_path = sim
    cfg = load_config(cfg_path)
    days = [SPEC.start + dt.timedelta(days=i) for i in range(3)]
    assert [r["status"] for r in runner.run_days(cfg, days)] == ["published"] * 3
    assert estimated == days  # each day once: nothing computed twice
    assert {s: runs.count(s) for s in ("impressions_day", "reo", "group_counts", "dq_results")} == dict.fromkeys(
        ("impressions_day", "reo", "group_counts", "dq_results"), 1
    )  # three days' frames, one GX run a suite
    wh = sim_dir / "warehouse"
    together = read_table(wh, "dq_results").drop("run_id").sort("ds", "suite", "subject")
    reo = read_table(wh, "reo").drop("run_id").sort("ds", "arm", "attribute")
    runs.clear()
    for d in days:  # each day alone: its own dq_results run, the same rows
        assert runner.run_days(cfg, [d])[0]["status"] == "published"
    assert runs.count("dq_results") == 3
    alone = read_table(wh, "dq_results").drop("run_id").sort("ds", "suite", "subject")
    assert set(together.get_column("ds")) == set(days) and together.height > 3 * 5  # files, day, outputs
    assert together.equals(alone)
    assert reo.equals(read_table(wh, "reo").drop("run_id").sort("ds", "arm", "attribute"))


def test_a_day_that_raises_stops_alone_and_the_batch_goes_on(sim, monkeypatch):
    """A day whose estimator raises fails with that error (its run recorded
    failed); the batch's other days are checked together and publish."""
    from fairmon.pipelines.executor import batch
    from fairmon.pipelines.orchestration import runner

    days = [SPEC.start + dt.timedelta(days=i) for i in range(3)]
    real = batch.estimate

    def estimate(cfg, counts, ds, *args):
        if ds == days[1]:
            raise RuntimeError("estimator crashed")
        return real(cfg, counts, ds, *args)

    monkeypatch.setattr(batch, "estimate", estimate)
    runs = _gx_runs(monkeypatch)
    _, cfg_path = sim
    cfg = load_config(cfg_path)
    out = runner.run_days(cfg, days, prefect=False)
    assert [r["status"] for r in out] == ["published", "failed", "published"]
    assert out[1]["error"] == "RuntimeError: estimator crashed"
    assert runs.count("dq_results") == 1 and runs.count("reo") == 1  # the two other days, together
    con = duckdb.connect(str(cfg.duckdb_path), read_only=True)
    try:
        rows = con.sql("SELECT ds, status, detail FROM runs ORDER BY ds").fetchall()
    finally:
        con.close()
    assert rows == [
        (days[0], "published", ""),
        (days[1], "failed", "RuntimeError: estimator crashed"),
        (days[2], "published", ""),
    ]


def test_a_days_unchanged_files_take_their_recorded_results_in_one_lookup(sim):
    """ingest_days takes the recorded raw-suite results of a day's staged,
    unchanged files from the ingest log (none is read again, a touched one
    neither); a file whose bytes changed, even with its size and time kept,
    is read, checked and staged again, alone."""
    import os

    from fairmon.pipelines.ingest import staging

    sim_dir, cfg_path = sim
    cfg = load_config(cfg_path)
    assert daily(str(cfg_path), DAY3)["dq"]
    units = staging.units_for(cfg, "impressions", DAY3)
    got = staging.ingest_days(cfg, [DAY3], "impressions")
    assert len(units) >= 2 and (got.files, got.staged) == (0, 0)  # the day's file and its random pools
    known = got.days[DAY3]
    assert [r.subject for r in known] == [str(u.file) for u in units]
    assert all(r.success and r.n_expectations > 0 for r in known)

    touched = units[0].file
    st = os.stat(touched)
    os.utime(touched, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a new time, the same bytes: nothing to read
    assert (lambda g: (g.files, g.staged))(staging.ingest_days(cfg, [DAY3], "impressions")) == (0, 0)
    header, *rows = touched.read_text().splitlines()
    like = header.split(",").index("like_video")
    i = next(i for i, r in enumerate(rows) if r.split(",")[like] == "0")
    cells = rows[i].split(",")
    rows[i] = ",".join([*cells[:like], "1", *cells[like + 1 :]])
    touched.write_text("\n".join([header, *rows]) + "\n")
    os.utime(touched, ns=(st.st_atime_ns, st.st_mtime_ns))  # a like added, the size and time kept (cp -p, rsync -a)
    assert os.stat(touched).st_size == st.st_size
    again = staging.ingest_days(cfg, [DAY3], "impressions")
    assert (again.files, again.staged) == (1, 1)
    assert again.days[DAY3] == known  # the same results, the changed file's checked anew


def test_a_days_result_is_one_value_to_prefect():
    """Prefect's engine walks a flow's returned dicts and lists object by object
    (looking for futures): the day's rows, thousands with many groups, took
    about 2 s a day at K = 4096. daily returns a mapping it takes whole."""
    from prefect.utilities.collections import visit_collection

    from fairmon.pipelines.orchestration.flows import DayResult

    rows = [{"metric": f"delta_U:{k}", "diff": 0.01 * k} for k in range(1000)]
    result = DayResult({"ds": DAY3, "reo_ab": rows})
    seen: list = []
    visit_collection(result, visit_fn=seen.append, return_data=False)
    assert seen == [result]
    seen.clear()
    visit_collection({"ds": DAY3, "reo_ab": rows}, visit_fn=seen.append, return_data=False)
    assert len(seen) > 3000  # a plain dict: every key and value of every row
    assert result["reo_ab"][7]["diff"] == pytest.approx(0.07) and len(result) == 2
    assert {**result} == dict(result) == {"ds": DAY3, "reo_ab": rows} and result == {"ds": DAY3, "reo_ab": rows}


def test_runner_flows_send_their_own_heartbeat_and_end_without_waiting(sim, monkeypatch):
    """Prefect's heartbeat thread sleeps in 1 s steps and every flow run waited
    for it at its end; the runner's flow runs (a lone day, a backfill's parent)
    run with it off and send Prefect's heartbeat event themselves, from a thread
    that stops at once: one event now (and one per configured period), with
    Prefect's resource and related flow."""
    import threading

    import prefect.events
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, get_current_settings, temporary_settings

    from fairmon.pipelines.orchestration import flows, runner

    events, inside = [], []
    monkeypatch.setattr(prefect.events, "emit_event", lambda **kw: events.append(kw))
    real = flows.daily_body

    def recording(*args, **kwargs):  # the body of the day's flow: the settings its flow run sees
        inside.append(get_current_settings().flows.heartbeat_frequency)
        return real(*args, **kwargs)

    monkeypatch.setattr(flows, "daily_body", recording)
    _, cfg_path = sim
    cfg = load_config(cfg_path)
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: 60}):
        (alone,) = runner.run_days(cfg, [SPEC.start])
        assert alone["status"] == "published"
        assert inside == [None]  # Prefect's own heartbeat off in the flow run
        (beat,) = events
        assert beat["event"] == "prefect.flow-run.heartbeat"
        assert beat["resource"]["prefect.resource.name"] == f"fairmon-daily/{SPEC.start}"
        assert beat["resource"]["prefect.resource.id"].startswith("prefect.flow-run.")
        # the flow, then the run's tags (issue 41): daily, fairmon, project:<the config's folder>
        assert [r["prefect.resource.role"] for r in beat["related"]] == ["flow", "tag", "tag", "tag"]
        tags = sorted(r["prefect.resource.id"] for r in beat["related"][1:])
        assert tags == ["prefect.tag.daily", "prefect.tag.fairmon", f"prefect.tag.project:{cfg_path.parent.name}"]
        # the thread beating every 60 s stopped when the flow ended, not at its next beat
        beaters = [t for t in threading.enumerate() if t.name == "fairmon-heartbeat"]
        for t in beaters:
            t.join(timeout=2)
        assert not any(t.is_alive() for t in beaters)
        events.clear()
        days = [SPEC.start, SPEC.start + dt.timedelta(days=1)]
        assert [r["status"] for r in runner.run_days(cfg, days)] == ["published"] * 2
        assert [e["resource"]["prefect.resource.name"] for e in events] == [f"fairmon-backfill/{days[0]}..{days[1]}"]
    events.clear()
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):  # heartbeats off: none
        assert runner.run_days(cfg, [SPEC.start])[0]["status"] == "published"
    assert events == []


def test_a_days_summary_rows_are_the_frames_dicts():
    # the run result's rows (batch.dict_rows) are Polars' own to_dicts, value for value: dates, NaN,
    # nulls, booleans and text included, for an empty frame too
    import math

    from fairmon.pipelines.executor.batch import dict_rows

    frame = pl.DataFrame(
        {"ds": [dt.date(2026, 1, 2), None], "x": [float("nan"), 1.5], "ok": [True, None], "s": ["é", None]}
    )
    for f in (frame, frame.head(0)):
        want, got = f.to_dicts(), dict_rows(f)
        assert [list(r) for r in got] == [list(r) for r in want]
        for g, w in zip(got, want):
            assert all(
                a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))
                for a, b in zip(g.values(), w.values())
            )
