"""Peak resident memory of a fairmon run over 10^8 impression rows.

Data: the 14 daily Parquet files of bench/counts.py (10^8 rows in all, six
signals, two attributes, request and item ids), 7-day random-traffic window.
The run: ``fairmon backfill`` over the 14 days in a new process, as a user
runs it (ingest with the raw suite and duplicate-id check, counts, REO and
A/B estimators, output suites, publish). Memory: the largest resident set
of that process or of any process it started (Prefect's temporary API
server), from the kernel's rusage accounting.

    .venv/bin/python bench/memory.py [--rows 100000000]

Last line, the ratio judged: peak GB / 4 GB (target < 1).
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys

from common import DEFAULT_DATA, ROOT, START, Stopwatch, make_days, peak_rss_gb, write_config


def cold_backfill(rows: int, data, cluster_by: str = "auto") -> tuple[float, int, float, int]:
    """``fairmon backfill`` over bench/counts.py's 14 files of ``rows`` rows in
    a new process, on a fresh project (``[estimation] cluster_by``). Returns (wall seconds, days published,
    peak resident GB of the process and what it started, number of files)."""
    files = make_days(data, rows)
    work = data / f"memory-{rows}"
    subprocess.run(["rm", "-rf", str(work)], check=True)
    config = write_config(work, files[0].parent, random_window_days=7, cluster_by=cluster_by)
    end = START.fromordinal(START.toordinal() + len(files) - 1)
    cmd = [sys.executable, "-m", "fairmon", "backfill", "-c", str(config), "--start", str(START), "--end", str(end)]
    size_gb = sum(f.stat().st_size for f in files) / 1e9
    print(
        f"{rows:,} rows in {len(files)} Parquet files ({size_gb:.2f} GB); running: fairmon backfill "
        f"--start {START} --end {end}"
    )
    with Stopwatch() as w:
        res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if res.returncode:
        raise SystemExit(f"fairmon backfill failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    return w.seconds, res.stdout.count("│ published"), peak_rss_gb(resource.RUSAGE_CHILDREN), len(files)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000_000, help="total rows over the 14 days")
    ap.add_argument("--data", type=__import__("pathlib").Path, default=DEFAULT_DATA)
    args = ap.parse_args()
    wall, published, peak, _ = cold_backfill(args.rows, args.data)
    print(f"wall {wall:.1f} s, {published} day(s) published, {args.rows / wall / 1e6:.1f} M rows/s end to end")
    print(f"peak resident memory: {peak:.2f} GB")
    print(f"ratio peak / 4 GB = {peak / 4:.2f} (target < 1)")


if __name__ == "__main__":
    main()
