"""The count stage on Apache Spark (local[2]) against the embedded DuckDB engine, same files (issue 19).

Data: 14 daily Parquet files, six signals, two attributes (bench/common.py),
10^7 and 10^8 rows in all. Each engine runs what ``fairmon backfill`` runs
for the impressions of the 14 days, minus orchestration, on a fresh DuckDB
file (bench/counts.py ``fairmon_counts``): one profile scan over the files
(on Spark: the same SQL, translated), the duplicate-id check, staging of the
profiles and ``sql/group_counts.sql``. Rows never leave the engine; the
profiles (a few thousand rows a file) do. Both engines' counts are asserted
equal to a raw DuckDB query's.

Printed per size: each engine's count stage (profile scan + staging +
counts), its checks (duplicate ids, which on Spark is one aggregation over
all files, and the GX suite on the profiles, the same code for both) and the
two together; the Spark session's start-up separately (once per process,
not in the figures); last, the ratio judged: Spark seconds ÷ DuckDB seconds
for the count stage with its checks.

    .venv/bin/python bench/spark.py [--rows 10000000 --rows 100000000] [--repeat 2] [--driver-memory 8g]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from common import DEFAULT_DATA, Stopwatch, make_days, quiet_prefect
from counts import DUCKDB_TWO_STEP, fairmon_counts, raw_duckdb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, action="append", help="total rows over the 14 days (repeatable)")
    ap.add_argument("--repeat", type=int, default=2, help="runs per engine; the best is reported")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder for the generated Parquet files")
    ap.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    ap.add_argument("--driver-memory", default="8g", help="spark.driver.memory (local mode: the executors' heap)")
    args = ap.parse_args()
    quiet_prefect()
    from fairmon.pipelines.core.config import SparkConfig
    from fairmon.pipelines.storage.spark import spark_session, stop_session

    spark = {"master": args.master, "conf.spark.driver.memory": args.driver_memory}
    conf = SparkConfig(master=args.master, conf={"spark.driver.memory": args.driver_memory})
    stop_session()
    with Stopwatch() as w:
        spark_session(conf)
    print(f"Spark session start-up ({args.master}, driver memory {args.driver_memory}): {w.seconds:.1f} s")
    ratios = {}
    for total in args.rows or [10_000_000, 100_000_000]:
        files = make_days(args.data, total)
        size_gb = sum(f.stat().st_size for f in files) / 1e9
        print(f"\n== {total:,} rows, {len(files)} days, {size_gb:.2f} GB Parquet")
        reference = raw_duckdb(files, DUCKDB_TWO_STEP)  # also warms the page cache
        best: dict[str, dict[str, float]] = {}
        for engine, settings in (("duckdb", None), ("spark", spark)):
            for _ in range(args.repeat):
                got, st = fairmon_counts(files, args.data / f"work-{engine}", "none", settings)
                row = {"count stage": st["ingest"] + st["counts"], "checks": st["checks"]}
                row["with checks"] = row["count stage"] + row["checks"]
                if row["with checks"] < best.get(engine, {}).get("with checks", float("inf")):
                    best[engine] = row
            assert got.equals(reference), f"{engine}: counts disagree with the reference counts"
        print(f"{'engine':<8} {'count stage':>12} {'checks':>8} {'with checks':>12} {'M rows/s':>9}")
        for engine, row in best.items():
            print(
                f"{engine:<8} {row['count stage']:>10.2f} s {row['checks']:>6.2f} s {row['with checks']:>10.2f} s "
                f"{total / row['with checks'] / 1e6:>9.1f}"
            )
        ratios[total] = best["spark"]["with checks"] / best["duckdb"]["with checks"]
        stage = best["spark"]["count stage"] / best["duckdb"]["count stage"]
        print(f"spark / duckdb at {total:,} rows: count stage {stage:.2f}, with checks {ratios[total]:.2f}")
    print(
        f"\nratio (Spark {args.master} seconds / DuckDB seconds, count stage with checks): "
        + ", ".join(f"{t:.0e} rows {r:.2f}" for t, r in ratios.items())
    )


if __name__ == "__main__":
    main()
