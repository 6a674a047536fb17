"""End to end against the engine (issue 21 target 1): a cold ``fairmon
backfill`` over 10^8 impression rows in 14 daily Parquet files (bench/counts.py's
data: six signals, two attributes, request and item ids; 7-day random window;
every check on, the duplicate-id check included) against the raw DuckDB
aggregation of the same counts over the same files (the faster of
bench/counts.py's two hand-written queries, best of 3, in this process).

    .venv/bin/python bench/e2e.py [--rows 100000000]

Prints both times, the backfill's peak resident memory (the process and what
it started) and, last, the ratio judged: backfill seconds / raw seconds
(target <= 5; peak <= 2 GB).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from common import DEFAULT_DATA, Stopwatch, make_days
from counts import DUCKDB_GROUPING_SETS, DUCKDB_TWO_STEP, raw_duckdb
from memory import cold_backfill


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000_000, help="total rows over the 14 days")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--cluster-by", default="auto", help="[estimation] cluster_by (auto: request_id, as a user gets)")
    args = ap.parse_args()
    files = make_days(args.data, args.rows)
    best = float("inf")
    for sql in (DUCKDB_GROUPING_SETS, DUCKDB_TWO_STEP):
        for _ in range(3):
            with Stopwatch() as w:
                raw_duckdb(files, sql)
            best = min(best, w.seconds)
    print(f"raw DuckDB aggregation (best of 3, two queries): {best:.2f} s ({args.rows / best / 1e6:.0f} M rows/s)")
    wall, published, peak, n = cold_backfill(args.rows, args.data, args.cluster_by)
    print(f"cold `fairmon backfill` (cluster_by = {args.cluster_by}): {wall:.1f} s, {published} of {n} days published")
    print(f"ratio backfill / raw = {wall / best:.1f} (target <= 5); peak {peak:.2f} GB (target <= 2)")


if __name__ == "__main__":
    main()
