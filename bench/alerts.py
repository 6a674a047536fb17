"""Benchmark: do REO alerts keep their false-alarm rate over the horizon, and what do they cost in detection?

An ``exceeds`` alert (transforms/alerts/alert_tables.py) is raised when REO's
interval at level 1 − 2α/H (α = 0.05, H = 90 days; transforms/alerts/horizon.py)
lies wholly above the line 1/9; by Boole's inequality a monitor whose true
REO stays at the line then raises one with probability at most α over any 90
days, however dependent the days are. The days here are strongly dependent
(a day's random traffic is every 7-day pool overlapping its trailing 7-day
window, so neighbouring days share pools), which is why watching the daily
95 % verdict and acting on its first ``exceeds`` alarms far more often than
5 %. The guarantee rests on each day's interval holding at its one-sided
tail α/H, a normal approximation far out in the tail; this measures it.

The data are the issue's ``fairmon simulate`` projects, drawn at count
level: group shares 0.5/0.5, 20,000 default rows a day, 3,000 random rows a
day in pooled files of 7 days (the last pool shorter) with random rates
0.25/0.25, read with ``pool_policy = "overlap"`` and a 7-day window. Rows
are clustered by request id into 128 hash buckets, one request a row, as the
count stage does: per day, the default traffic's (bucket × group × positive)
counts are one multinomial draw over 128 × K × 2 cells, per pool likewise
for its random rows; a day's window sums its pools' buckets, and
``estimate_reo`` gets both traffics' BucketSums with shared bucket ids
(cluster-robust delta intervals at 95 % and at the alerts' level). Each
project's days go, as ``reo`` rows, through ``reo_alerts``, the pipeline's
own state machine.

Regimes (true REO from the rates, printed): at the line (default rates
0.32/0.40, REO 1/9: the false-alarm rate), 1.25× and 2× the line, and
REO 0.25 (0.30/0.50). Printed per regime: the share of projects with any
``exceeds`` alert within the simulated days, with a 95 % Clopper–Pearson
interval; the median day of the first alert over the projects that alert
(day 1 = the first simulated day) and how many do; the same for the naive
rule (the first day whose daily 95 % verdict is ``exceeds``); the share of
project-days whose alert interval lay above the line (at the line: the
per-day tail error, to compare with α/H); for REO 0.25 the share alerted
within the first 7 days. Then CPU seconds and a calibration (the CPU seconds
of ``python -c "import duckdb"``); last, the false-alarm rate at the line.

``--check-pipeline N`` first runs ``fairmon simulate`` and ``fairmon
backfill`` on N projects of 30 days of the at-the-line spec and compares
their published ``reo`` rows (random rows per day, mean and sd of REO, SE
and alert-interval width) with this simulation's.

    .venv/bin/python bench/alerts.py [--projects 200] [--projects-at-line 1000] [--days 90] [--quick]
                                     [--check-pipeline 3]

1,000 projects at the line (200 in the other regimes) narrow the interval of
the figure it is judged by, the false-alarm rate, to about ±0.013.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl
from common import calibration
from scipy.stats import binomtest

from fairmon.transforms.alerts.alert_tables import reo_alerts
from fairmon.transforms.alerts.horizon import alert_level, day_alpha
from fairmon.transforms.reo.cluster import BucketSums
from fairmon.transforms.reo.estimate import EIGHTY_PERCENT_RULE_REO, estimate_reo, reo_of_utilities

ALPHA, HORIZON = 0.05, 90
LINE = EIGHTY_PERCENT_RULE_REO  # 1/9, the line for K = 2
SHARE = (0.5, 0.5)
RAND_RATE = (0.25, 0.25)
ROWS, RAND_ROWS = 20_000, 3_000
POOL_DAYS, WINDOW_DAYS = 7, 7
BUCKETS = 128
START = dt.date(2026, 1, 1)
GROUPS = ("0", "1")


def rates_at(reo: float) -> tuple[float, float]:
    """Default-traffic positive rates (0.40·r, 0.40) with r = (1 − reo)/(1 + reo):
    at equal shares and equal random rates, U ∝ the rates and REO = (1 − r)/(1 + r)."""
    r = (1.0 - reo) / (1.0 + reo)
    return 0.40 * r, 0.40


REGIMES = (
    ("at the line", (0.32, 0.40)),
    ("1.25x the line", rates_at(1.25 * LINE)),
    ("2x the line", rates_at(2 * LINE)),
    ("REO 0.25", (0.30, 0.50)),
)


def true_reo(rec_rate: tuple[float, float]) -> float:
    """REO of U_k = Q_k/P_k with Q = share·rec_rate, P = share·rand_rate (seed 001 eqs. 4, 19)."""
    Q = np.asarray(SHARE) * np.asarray(rec_rate)
    P = np.asarray(SHARE) * np.asarray(RAND_RATE)
    return reo_of_utilities(Q / P)


def cell_probs(rate: tuple[float, ...]) -> np.ndarray:
    """Probabilities of the (bucket, group, positive) cells of one row, flat (G·K·2,):
    a uniform hash bucket, group by SHARE, positive with the group's rate."""
    share, rate = np.asarray(SHARE), np.asarray(rate)
    per_bucket = np.stack([share * (1.0 - rate), share * rate], axis=1) / BUCKETS  # (K, 2)
    return np.broadcast_to(per_bucket, (BUCKETS, *per_bucket.shape)).ravel()


def pools(days: int) -> list[tuple[int, int]]:
    """The random-traffic pools as (first, last) day indices: 7 days each, the last shorter."""
    return [(i, min(i + POOL_DAYS, days) - 1) for i in range(0, days, POOL_DAYS)]


def windows(days: int) -> list[list[int]]:
    """Per day, the pools of its random window (``pool_policy = "overlap"``):
    every pool whose range meets [day − 6, day]."""
    ranges = pools(days)
    return [[j for j, (a, b) in enumerate(ranges) if a <= d and b >= d - WINDOW_DAYS + 1] for d in range(days)]


def bucket_sums(cells: np.ndarray) -> BucketSums:
    """BucketSums of one sample from its cell counts (G, K, 2), bucket ids 0..G−1."""
    return BucketSums(cells[:, :, 1], cells.sum(axis=(1, 2)), np.arange(BUCKETS))


def simulate_project(rec_rate: tuple[float, float], days: int, rng: np.random.Generator) -> pl.DataFrame:
    """One project's ``reo`` rows (the columns ``reo_alerts`` reads, plus se and
    the daily 95 % interval), one per day, from count-level draws (module docstring)."""
    level = alert_level(ALPHA, HORIZON)
    shape = (BUCKETS, len(SHARE), 2)
    rec = rng.multinomial(ROWS, cell_probs(rec_rate), size=days).reshape(days, *shape)
    rand = [rng.multinomial(RAND_ROWS * (b - a + 1), cell_probs(RAND_RATE)).reshape(shape) for a, b in pools(days)]
    rows = []
    for d, window in enumerate(windows(days)):
        c_rec = bucket_sums(rec[d])
        c_rand = bucket_sums(sum(rand[j] for j in window))
        e = estimate_reo(
            GROUPS,
            c_rec.pos.sum(axis=0),
            int(c_rec.n),
            c_rand.pos.sum(axis=0),
            int(c_rand.n),
            ci_method="delta",
            level=0.95,
            threshold=LINE,
            clusters_rec=c_rec,
            clusters_rand=c_rand,
            alert_level=level,
        )
        rows.append(
            {
                "ds": START + dt.timedelta(days=d), "arm": "all", "attribute": "young_adult", "reo": e.reo,
                "se": e.se, "ci_low": e.ci_low, "ci_high": e.ci_high, "n_rand": int(c_rand.n),
                "reo_threshold": e.threshold, "verdict_80pct": e.verdict, "n_small_groups": sum(e.small_group),
                "alert_level": level, "alert_low": e.alert_low, "alert_high": e.alert_high,
            }
        )  # fmt: skip
    return pl.DataFrame(rows)


def first_days(frame: pl.DataFrame) -> tuple[int | None, int | None]:
    """(day of the first ``exceeds`` alert of ``reo_alerts``, day of the first
    daily ``exceeds`` verdict), 1-based; None when there is none."""
    alerted = [a["ds"] for a in reo_alerts(frame) if a["kind"] == "exceeds"]
    first = (min(alerted) - START).days + 1 if alerted else None
    naive = frame.with_row_index("day").filter(pl.col("verdict_80pct") == "exceeds").get_column("day")
    return first, (int(naive[0]) + 1 if naive.len() else None)


def run_regime(index: int, rec_rate: tuple[float, float], projects: int, days: int, seed: int) -> dict:
    """Every project of one regime: first alert days (state machine and naive)
    and the project-days whose alert interval lay above or below the line."""
    alert, naive, above, below, days_seen = [], [], 0, 0, 0
    for p in range(projects):
        frame = simulate_project(rec_rate, days, np.random.default_rng([seed, index, p]))
        a, n = first_days(frame)
        alert.append(a)
        naive.append(n)
        above += frame.filter(pl.col("alert_low") > LINE).height
        below += frame.filter(pl.col("alert_high") < LINE).height
        days_seen += frame.height
    return {"alert": alert, "naive": naive, "above": above, "below": below, "days": days_seen}


def share_ci(k: int, n: int) -> tuple[float, float, float]:
    """k/n with its 95 % Clopper–Pearson interval."""
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return k / n, float(ci.low), float(ci.high)


def fmt_share(k: int, n: int, digits: int = 3) -> str:
    """'p [lo, hi]' of :func:`share_ci`."""
    p, lo, hi = share_ci(k, n)
    return f"{p:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def detection(first: list[int | None]) -> tuple[str, int]:
    """(median first day over the projects that detect, as text; how many detect)."""
    hit = [d for d in first if d is not None]
    return (f"{np.median(hit):g}" if hit else "-"), len(hit)


def report(results: list[tuple[str, float, dict]], days: int) -> None:
    """The per-regime table, the per-day tail check and the REO 0.25 first week."""
    print(
        f"{'regime':<15} {'true REO':>8}  {'alerted (95 % CI)':>22} {'median day':>10} {'detect':>8}  "
        f"{'naive (95 % CI)':>22} {'median day':>10} {'detect':>8}  {'days alert>line':>15}"
    )
    for name, reo, r in results:
        projects = len(r["alert"])
        a_day, a_n = detection(r["alert"])
        n_day, n_n = detection(r["naive"])
        print(
            f"{name:<15} {reo:8.4f}  {fmt_share(a_n, projects):>22} {a_day:>10} {a_n:>4}/{projects:<3}  "
            f"{fmt_share(n_n, projects):>22} {n_day:>10} {n_n:>4}/{projects:<3}  {r['above'] / r['days']:15.5f}"
        )
    name, _, r = results[0]
    a = day_alpha(ALPHA, HORIZON)
    print(
        f"per-day tail check at the line ({r['days']} project-days; days of a project are dependent, so the "
        "intervals are indicative):"
    )
    print(f"  alert interval above the line: {r['above']} = {fmt_share(r['above'], r['days'], 6)}  (α/H = {a:.6f})")
    print(f"  alert interval below the line: {r['below']} = {fmt_share(r['below'], r['days'], 6)}  (α/H = {a:.6f})")
    for name, _, r in results:
        projects = len(r["alert"])
        if name == "REO 0.25":
            week = sum(1 for d in r["alert"] if d is not None and d <= 7)
            naive = sum(1 for d in r["naive"] if d is not None and d <= 7)
            print(f"REO 0.25: alerted within the first 7 days {fmt_share(week, projects)}; naive {naive}/{projects}")


def pipeline_rows(work: Path, seed: int, days: int) -> pl.DataFrame:
    """The published ``reo`` rows of ``fairmon simulate`` + ``fairmon backfill`` of
    the at-the-line spec (the issue's command) with ``seed``, over ``days`` days."""
    fairmon = [sys.executable, "-m", "fairmon"]
    out = work / f"sim{seed}"
    rates = ",".join(f"{x:g}" for x in REGIMES[0][1])
    sim = ["simulate", "--out", str(out), "--days", str(days), "--rows-per-day", str(ROWS)]
    sim += ["--random-rows-per-day", str(RAND_ROWS), "--rec-share", "0.5,0.5", "--rec-rate", rates]
    sim += ["--rand-share", "0.5,0.5", "--rand-rate", "0.25,0.25", "--seed", str(seed), "--format", "parquet"]
    end = START + dt.timedelta(days=days - 1)
    config = str(out / "fairmon.toml")
    subprocess.run([*fairmon, *sim], cwd=work, check=True, capture_output=True)
    subprocess.run(
        [*fairmon, "backfill", "-c", config, "--start", str(START), "--end", str(end)],
        cwd=work,
        check=True,
        capture_output=True,
    )
    query = "select ds, n_rand, reo, se, alert_low, alert_high from reo_published order by ds"
    res = subprocess.run([*fairmon, "sql", "--csv", "-c", config, query], cwd=work, check=True, capture_output=True)
    return pl.read_csv(io.StringIO(res.stdout.decode()))


def check_pipeline(n: int, seed: int, days: int = 30, sims: int = 200) -> None:
    """Compare the pipeline's ``reo`` rows of ``n`` simulated projects with
    ``sims`` count-level projects of the same spec (mean and sd per day of REO,
    SE and the alert interval's width; the random rows of each day)."""
    with tempfile.TemporaryDirectory(prefix="fairmon-alerts-") as tmp:
        pipe = pl.concat([pipeline_rows(Path(tmp), s, days) for s in range(1, n + 1)])
    ours = pl.concat([simulate_project(REGIMES[0][1], days, np.random.default_rng([seed, 99, p])) for p in range(sims)])
    same_n = ours.head(days).get_column("n_rand").to_list() == pipe.head(days).get_column("n_rand").to_list()
    print(f"pipeline check, at the line, {days} days: {n} backfilled projects vs {sims} count-level projects")
    print(f"  random rows per day equal to the pipeline's window: {'yes' if same_n else 'NO'}")
    print(f"  {'':22} {'pipeline mean':>14} {'sd':>8} {'count-level mean':>17} {'sd':>8}")
    width = (pl.col("alert_high") - pl.col("alert_low")).alias("alert width")
    pipe, ours = pipe.with_columns(width), ours.with_columns(width)
    for col in ("reo", "se", "alert width"):
        p, o = pipe.get_column(col), ours.get_column(col)
        print(f"  {col:22} {p.mean():14.5f} {p.std():8.5f} {o.mean():17.5f} {o.std():8.5f}")
    for n_rand in sorted(set(pipe.get_column("n_rand").to_list())):
        p = pipe.filter(pl.col("n_rand") == n_rand).get_column("se")
        o = ours.filter(pl.col("n_rand") == n_rand).get_column("se")
        print(f"  {'se, n_rand = ' + str(n_rand):22} {p.mean():14.5f} {p.std():8.5f} {o.mean():17.5f} {o.std():8.5f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--projects", type=int, default=200, help="independent projects per regime")
    ap.add_argument(
        "--projects-at-line", type=int, default=1000, help="projects at the line (the false-alarm rate judged)"
    )
    ap.add_argument("--days", type=int, default=90, help="days simulated per project")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="40 projects per regime, for a smoke run")
    ap.add_argument("--check-pipeline", type=int, default=0, metavar="N", help="first compare with N pipeline runs")
    args = ap.parse_args()
    projects = 40 if args.quick else args.projects
    at_line = 40 if args.quick else max(args.projects_at_line, projects)
    if args.check_pipeline:
        check_pipeline(args.check_pipeline, args.seed)
    cpu0, t0 = time.process_time(), time.perf_counter()
    print(
        f"{at_line} projects at the line, {projects} in the other regimes, x {args.days} days; {ROWS} default and "
        f"{RAND_ROWS} random rows a day, "
        f"random pools of {POOL_DAYS} days, {WINDOW_DAYS}-day overlap window, {BUCKETS} buckets; "
        f"alert level {alert_level(ALPHA, HORIZON):.6f} (α = {ALPHA}, H = {HORIZON}), line {LINE:.6f}"
    )
    results = []
    for i, (name, rec_rate) in enumerate(REGIMES):
        reo = true_reo(rec_rate)
        print(f"  {name}: rec-rate ({rec_rate[0]:.6f}, {rec_rate[1]:.2f}), true REO {reo:.6f}")
        n = at_line if i == 0 else projects
        results.append((name, reo, run_regime(i, rec_rate, n, args.days, args.seed)))
    report(results, args.days)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    calls = sum(len(r["alert"]) for _, _, r in results) * args.days
    calib = calibration()
    print(f"CPU {cpu:.1f} s (wall {wall:.1f} s) for {calls} project-days: {1e3 * cpu / calls:.2f} CPU-ms each")
    print(f"calibration: python -c 'import duckdb' took {calib:.2f} CPU-s; this run = {cpu / calib:.0f} of those")
    _, reo, r = results[0]
    p, lo, hi = share_ci(sum(d is not None for d in r["alert"]), len(r["alert"]))
    print(f"false-alarm rate over {args.days} days at the line: {p:.3f} (95 % CI [{lo:.3f}, {hi:.3f}])")


if __name__ == "__main__":
    main()
