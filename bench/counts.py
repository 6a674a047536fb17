"""Group counts at platform scale: fairmon's count stage vs the same
aggregation written directly in DuckDB and in Polars, on the same files.

Data: 14 daily Parquet files, six signals, two attributes (bench/common.py),
10^7 and 10^8 rows in all. The aggregation: per day, traffic, arm,
attribute and group, the rows n and the positives n_pos (Y = any signal).

fairmon's count stage is what ``fairmon backfill`` runs for the impressions
of the days, minus orchestration, on a fresh DuckDB file: ingest (one DuckDB
profile scan over the range's files, parsing the profiles, staging them in
one transaction) and counts (sql/group_counts.sql over the range), then per
day the ingest and count tasks (``task.fn``), which find their files staged
and their counts ready. Its data-quality checks (GX on the
profile, duplicate ids) are timed on their own and shown, not counted.
Every method's result is compared with the raw DuckDB one (must be equal).

    .venv/bin/python bench/counts.py [--rows 10000000 --rows 100000000] [--repeat 3]

fairmon runs twice: with independent rows (``cluster_by = "none"``) and
cluster-robust by request id (the scan also hashes ``request_id`` into
``cluster_buckets`` buckets and the counts come out per bucket, issue 20).

Prints per size: seconds and rows/s per method; then the ratios judged:
fairmon rows/s ÷ best raw rows/s (target ≥ 0.5), and the clustered count
stage's seconds ÷ the unclustered one's (target ≤ 1.5).
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
from pathlib import Path

import duckdb
import polars as pl
from common import ATTRIBUTES, DEFAULT_DATA, SIGNALS, START, Stopwatch, make_days, quiet_prefect, write_config

KEYS = ["ds", "traffic", "arm", "attribute", "group"]

_Y = " OR ".join(SIGNALS)
# Raw DuckDB, two ways an engineer would write it; the faster one counts.
DUCKDB_GROUPING_SETS = f"""
SELECT ds, traffic, arm,
       CASE WHEN grouping(young_adult) = 0 THEN 'young_adult' ELSE 'region' END AS attribute,
       coalesce(young_adult, region) AS "group",
       count(*) AS n, count(*) FILTER (WHERE {_Y}) AS n_pos
FROM read_parquet($files)
GROUP BY GROUPING SETS ((ds, traffic, arm, young_adult), (ds, traffic, arm, region))
"""
DUCKDB_TWO_STEP = f"""
WITH pre AS (
    SELECT ds, traffic, arm, young_adult, region, count(*) AS n, count(*) FILTER (WHERE {_Y}) AS n_pos
    FROM read_parquet($files) GROUP BY ALL
)
SELECT ds, traffic, arm, 'young_adult' AS attribute, young_adult AS "group", sum(n) AS n, sum(n_pos) AS n_pos
FROM pre GROUP BY ALL
UNION ALL
SELECT ds, traffic, arm, 'region', region, sum(n), sum(n_pos) FROM pre GROUP BY ALL
"""


def _norm(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.select(
        pl.col("ds").cast(pl.Date),
        *[pl.col(c).cast(pl.String) for c in KEYS[1:]],
        pl.col("n").cast(pl.Int64),
        pl.col("n_pos").cast(pl.Int64),
    ).sort(KEYS)


def raw_duckdb(files: list[Path], sql: str) -> pl.DataFrame:
    """The aggregation in one DuckDB query over the files."""
    with duckdb.connect() as con:
        return _norm(con.sql(sql, params={"files": [str(f) for f in files]}).pl())


def raw_polars(files: list[Path]) -> pl.DataFrame:
    """The aggregation as one lazy Polars query (streaming engine) over the files."""
    pre = (
        pl.scan_parquet(files)
        .group_by("ds", "traffic", "arm", *ATTRIBUTES)
        .agg(pl.len().alias("n"), pl.any_horizontal(SIGNALS).sum().alias("n_pos"))
    )
    parts = [
        pre.group_by("ds", "traffic", "arm", a)
        .agg(pl.col("n").sum(), pl.col("n_pos").sum())
        .select("ds", "traffic", "arm", pl.lit(a).alias("attribute"), pl.col(a).alias("group"), "n", "n_pos")
        for a in ATTRIBUTES
    ]
    return _norm(pl.concat(parts).collect(engine="streaming"))


def fairmon_counts(
    files: list[Path], work: Path, cluster_by: str = "none", spark: dict[str, str] | None = None
) -> tuple[pl.DataFrame, dict[str, float]]:
    """fairmon's ingest + count stage for each day of the files, on a fresh
    DuckDB file, with ``[estimation] cluster_by`` (``request_id``: the scan
    also hashes each row's request id into its cluster bucket and the counts
    come out per bucket, issue 20); ``spark``: the ``[spark]`` settings of
    ``engine = "spark"`` (bench/spark.py). Returns the counts and the summed
    stage seconds."""
    from fairmon.pipelines.core import timing
    from fairmon.pipelines.core.config import load_config
    from fairmon.pipelines.core.run import Run, run_scope
    from fairmon.pipelines.ingest.staging import ingest_days
    from fairmon.pipelines.orchestration.flows import count_groups
    from fairmon.pipelines.storage import db

    for old in (work / "fairmon.duckdb", work / "fairmon.duckdb.wal", work / "warehouse"):
        shutil.rmtree(old, ignore_errors=True) if old.is_dir() else old.unlink(missing_ok=True)
    cfg = load_config(write_config(work, files[0].parent, random_window_days=1, cluster_by=cluster_by, spark=spark))
    totals: dict[str, float] = dict.fromkeys(timing.STAGES, 0.0)
    out = []
    days = [START + dt.timedelta(days=d) for d in range(len(files))]
    # as a backfill: one run, one connection, one batch: one ingest and one count
    with Stopwatch() as w, run_scope(Run(cfg)), db.session(cfg.duckdb_path):
        book = timing.batch_book(days)
        timing.start(book)
        with timing.clock(book, "ingest"):
            got = ingest_days(cfg, days, "impressions")
        for ds in got.short():
            raise SystemExit(f"fairmon rejected a file of {ds}: {got.days[ds]}")
        with timing.clock(book, "counts"):
            counted = count_groups.fn(cfg, dict.fromkeys(days))
        out = [counted[ds][0] for ds in days]
        for k, v in timing.take(book).items():
            totals[k] += v
    totals["wall"] = w.seconds
    counts = pl.concat(out).filter(pl.col("traffic").is_in(["default", "random"]))
    return _norm(counts.select(*KEYS, "n", "n_pos")), totals


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, action="append", help="total rows over the 14 days (repeatable)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per method; the best is reported")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder for the generated Parquet files")
    args = ap.parse_args()
    quiet_prefect()
    sizes = args.rows or [10_000_000, 100_000_000]
    ratios, slowdown = {}, {}
    for total in sizes:
        with Stopwatch() as w:
            files = make_days(args.data, total)
        size_gb = sum(f.stat().st_size for f in files) / 1e9
        print(f"\n== {total:,} rows, {len(files)} days, {size_gb:.2f} GB Parquet (ready in {w.seconds:.1f}s)")
        reference = raw_duckdb(files, DUCKDB_TWO_STEP)  # also warms the page cache
        best: dict[str, float] = {}
        stages: dict[str, float] = {}
        methods = {
            "duckdb (grouping sets)": lambda files=files: raw_duckdb(files, DUCKDB_GROUPING_SETS),
            "duckdb (two-step)": lambda files=files: raw_duckdb(files, DUCKDB_TWO_STEP),
            "polars (streaming)": lambda files=files: raw_polars(files),
        }
        for name, run in methods.items():
            for _ in range(args.repeat):
                with Stopwatch() as w:
                    got = run()
                best[name] = min(best.get(name, float("inf")), w.seconds)
            assert got.equals(reference), f"{name} disagrees with the reference counts"
        for name, by in (("fairmon", "none"), ("fairmon, clustered", "request_id")):
            for _ in range(args.repeat):
                got, st = fairmon_counts(files, args.data / "work", by)
                count_stage = st["ingest"] + st["counts"]
                if count_stage < best.get(name, float("inf")):
                    best[name] = count_stage
                    if by == "none":
                        stages = st
            assert got.equals(reference), f"{name}: counts disagree with the reference counts"
        for name, sec in best.items():
            print(f"{name:<24} {sec:7.2f} s  {total / sec / 1e6:7.1f} M rows/s")
        print(
            f"  fairmon stages: ingest (profile scan + staging) {stages['ingest']:.2f} s, "
            f"counts (group_counts.sql) {stages['counts']:.3f} s; checks (GX, duplicate ids) "
            f"{stages['checks']:.2f} s not included; with them {total / (best['fairmon'] + stages['checks']) / 1e6:.1f}"
            " M rows/s"
        )
        raw_best = min(v for k, v in best.items() if not k.startswith("fairmon"))
        ratios[total] = raw_best / best["fairmon"]
        slowdown[total] = best["fairmon, clustered"] / best["fairmon"]
        print(f"ratio {total:,} rows: fairmon rows/s / best raw rows/s = {ratios[total]:.2f} (target >= 0.5)")
        print(f"clustering {total:,} rows: count stage by request_id / without = {slowdown[total]:.2f} (target <= 1.5)")
    print(
        "\nratio: "
        + ", ".join(f"{t:.0e} rows {r:.2f}" for t, r in ratios.items())
        + "; clustered / unclustered count stage: "
        + ", ".join(f"{t:.0e} rows {r:.2f}" for t, r in slowdown.items())
    )


if __name__ == "__main__":
    main()
