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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000_000, help="total rows over the 14 days")
    ap.add_argument("--data", type=__import__("pathlib").Path, default=DEFAULT_DATA)
    args = ap.parse_args()
    files = make_days(args.data, args.rows)
    work = args.data / f"memory-{args.rows}"
    subprocess.run(["rm", "-rf", str(work)], check=True)
    config = write_config(work, files[0].parent, random_window_days=7)
    end = START.fromordinal(START.toordinal() + len(files) - 1)
    cmd = [sys.executable, "-m", "fairmon", "backfill", "-c", str(config), "--start", str(START), "--end", str(end)]
    size_gb = sum(f.stat().st_size for f in files) / 1e9
    print(
        f"{args.rows:,} rows in {len(files)} Parquet files ({size_gb:.2f} GB); running: fairmon backfill "
        f"--start {START} --end {end}"
    )
    with Stopwatch() as w:
        res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if res.returncode:
        raise SystemExit(f"fairmon backfill failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    published = res.stdout.count("│ published")
    peak = peak_rss_gb(resource.RUSAGE_CHILDREN)
    print(
        f"wall {w.seconds:.1f} s, {published} day(s) published, {args.rows / w.seconds / 1e6:.1f} M rows/s end to end"
    )
    print(f"peak resident memory: {peak:.2f} GB")
    print(f"ratio peak / 4 GB = {peak / 4:.2f} (target < 1)")


if __name__ == "__main__":
    main()
