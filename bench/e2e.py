"""End to end against the engine doing the same work (issue 21 target 1,
issue 37 item 2): a cold ``fairmon backfill`` over impression rows in 14 daily
Parquet files (bench/counts.py's data: six signals, two attributes, request
and item ids; 7-day random window; every check on) against a raw DuckDB
baseline that does what fairmon's count stage must do on the same files: the
group counts (the faster of bench/counts.py's two hand-written queries) *and*
the duplicate-id check (per file, ``GROUP BY ds, traffic, request_id, item_id
HAVING count(*) > 1``, as fairmon checks each file's id keys).

    .venv/bin/python bench/e2e.py [--rows 1000000,10000000,100000000] [--cluster-by auto]

For each row count: the baseline's CPU seconds (best of 3, this process, all
DuckDB threads) and wall; the backfill's CPU seconds (user + sys of the
``fairmon`` process and everything it started) and wall, and its peak
resident memory. Then a least-squares fit CPU = fixed + per-row × rows for
each, and, last, the ratio judged: fairmon's per-row CPU / the baseline's
(target <= 1.5).
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
from common import DEFAULT_DATA, ROOT, START, make_days, peak_rss_gb, write_config
from counts import DUCKDB_GROUPING_SETS, DUCKDB_TWO_STEP

#: The duplicate-id check fairmon runs on each file's rows (sql/impressions_duplicate_ids.sql, key without __file).
DUPLICATES = """
SELECT count(*) FROM (
    SELECT ds, traffic, request_id, item_id FROM read_parquet($file)
    GROUP BY ds, traffic, request_id, item_id HAVING count(*) > 1
)
"""


def _cpu(who: int) -> float:
    ru = resource.getrusage(who)
    return ru.ru_utime + ru.ru_stime


def raw_same_work(files: list[Path], counts_sql: str) -> tuple[float, float, int]:
    """The baseline once: the group counts in one query over ``files`` and the
    duplicate-id check file by file, in a fresh in-memory DuckDB. Returns
    (CPU seconds of this process, wall seconds, duplicated keys found)."""
    cpu0, t0 = _cpu(resource.RUSAGE_SELF), time.perf_counter()
    with duckdb.connect() as con:
        con.sql(counts_sql, params={"files": [str(f) for f in files]}).fetchall()
        dup = sum(con.sql(DUPLICATES, params={"file": str(f)}).fetchall()[0][0] for f in files)
    return _cpu(resource.RUSAGE_SELF) - cpu0, time.perf_counter() - t0, dup


def cold_backfill(rows: int, data: Path, cluster_by: str) -> tuple[float, float, float, int, int]:
    """``fairmon backfill`` of the 14 files of ``rows`` rows in a new process on a
    fresh project. Returns (CPU seconds of the process tree, wall seconds, peak
    resident GB of the largest process, days published, days)."""
    files = make_days(data, rows)
    work = data / f"e2e-{rows}"
    subprocess.run(["rm", "-rf", str(work)], check=True)
    config = write_config(work, files[0].parent, random_window_days=7, cluster_by=cluster_by)
    end = START.fromordinal(START.toordinal() + len(files) - 1)
    cmd = [sys.executable, "-m", "fairmon", "backfill", "-c", str(config), "--start", str(START), "--end", str(end)]
    cpu0, t0 = _cpu(resource.RUSAGE_CHILDREN), time.perf_counter()
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, _cpu(resource.RUSAGE_CHILDREN) - cpu0
    if res.returncode:
        raise SystemExit(f"fairmon backfill failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    return cpu, wall, peak_rss_gb(resource.RUSAGE_CHILDREN), res.stdout.count("│ published"), len(files)


def fit(rows: list[int], cpu: list[float]) -> tuple[float, float]:
    """Least squares cpu = fixed + per_row × rows. Returns (fixed s, per-row s)."""
    a = np.column_stack([np.ones(len(rows)), np.asarray(rows, float)])
    (fixed, per_row), *_ = np.linalg.lstsq(a, np.asarray(cpu, float), rcond=None)
    return float(fixed), float(per_row)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="1000000,10000000,100000000", help="row counts over the 14 days, comma-separated")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--cluster-by", default="auto", help="[estimation] cluster_by (auto: request_id, as a user gets)")
    ap.add_argument("--repeat", type=int, default=3, help="baseline runs per query and size (the best is kept)")
    args = ap.parse_args()
    sizes = [int(float(r)) for r in args.rows.split(",")]
    raw_cpu, fm_cpu = [], []
    print(f"{'rows':>12} | {'raw CPU':>8} {'raw wall':>8} | {'fairmon CPU':>11} {'wall':>7} {'peak':>7} | published")
    for n in sizes:
        files = make_days(args.data, n)
        best = (float("inf"), 0.0, 0)
        for sql in (DUCKDB_GROUPING_SETS, DUCKDB_TWO_STEP):
            for _ in range(args.repeat):
                best = min(best, raw_same_work(files, sql))
        cpu, wall, peak, published, days = cold_backfill(n, args.data, args.cluster_by)
        raw_cpu.append(best[0])
        fm_cpu.append(cpu)
        print(
            f"{n:>12,} | {best[0]:7.2f}s {best[1]:7.2f}s | {cpu:10.2f}s {wall:6.1f}s {peak:5.2f}GB | "
            f"{published}/{days} (duplicated keys: {best[2]})",
            flush=True,
        )
    f_fixed, f_row = fit(sizes, fm_cpu)
    r_fixed, r_row = fit(sizes, raw_cpu)
    print(f"fit, fairmon (cluster_by = {args.cluster_by}): {f_fixed:.2f} CPU-s fixed + {f_row * 1e9:.1f} ns/row")
    print(f"fit, raw counts + duplicate-id check: {r_fixed:.2f} CPU-s fixed + {r_row * 1e9:.1f} ns/row")
    print(f"ratio per-row CPU fairmon / raw same work = {f_row / r_row:.2f} (target <= 1.5)")


if __name__ == "__main__":
    main()
