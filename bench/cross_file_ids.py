"""Repeated id keys across a day's files (issue 40 item 2): what the two
designs cost on bench/e2e.py's data (14 daily Parquet files).

- ``per_file``: today's duplicate-id check, one GROUP BY per file (e2e.py's baseline);
- ``one_group_by``: the alternative, one GROUP BY over all files' keys at
  once with ``count(DISTINCT __file)`` (finds repeats within and across the
  files of one scan, but only of the files scanned together);
- ``pair_join``: the chosen design's cost when a pair of files does overlap
  (sql/impressions_shared_ids.sql over two days' files); clean inputs give no
  pair and cost only the gate over staged profiles.

Each runs in a fresh process (best of 3 CPU seconds, peak resident memory).

    .venv/bin/python bench/cross_file_ids.py [--rows 1000000,10000000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from common import DEFAULT_DATA, ROOT, make_days

_RUN = r"""
import json, resource, sys, duckdb
files, design = json.loads(sys.argv[1]), sys.argv[2]
sql = {
  "per_file": "SELECT count(*) FROM (SELECT ds, traffic, request_id, item_id FROM read_parquet($f) "
              "GROUP BY ALL HAVING count(*) > 1)",
  "one_group_by": "SELECT count(*) FILTER (WHERE c > 1), count(*) FILTER (WHERE nf > 1) FROM ("
                  "SELECT ds, traffic, request_id, item_id, count(*) AS c, count(DISTINCT file_index) AS nf "
                  "FROM read_parquet($f, file_row_number = true) GROUP BY ds, traffic, request_id, item_id)",
}
con = duckdb.connect()
con.sql("SET enable_progress_bar = false")
if design == "per_file":
    for f in files:
        con.sql(sql[design], params={"f": f}).fetchall()
elif design == "one_group_by":
    con.sql(sql[design], params={"f": files}).fetchall()
else:
    text = open(sys.argv[3]).read()
    con.sql("CREATE VIEW ids_a AS SELECT * FROM read_parquet('%s')" % files[0])
    con.sql("CREATE VIEW ids_b AS SELECT * FROM read_parquet('%s')" % files[1])
    con.sql(text, params={"limit": 5}).fetchall()
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps([ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024**2]))
"""


def measure(files: list[str], design: str, repeat: int = 3) -> tuple[float, float]:
    """(best CPU seconds, peak resident GB) of ``design`` in a fresh process."""
    out = []
    for _ in range(repeat):
        cmd = [sys.executable, "-c", _RUN, json.dumps(files), design, str(ROOT / "sql/impressions_shared_ids.sql")]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode:
            raise SystemExit(res.stderr)
        out.append(json.loads(res.stdout.splitlines()[-1]))
    return min(c for c, _ in out), max(m for _, m in out)


def main() -> None:
    """Print one line per row count and design."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="1000000,10000000")
    args = ap.parse_args()
    empty = measure([], "per_file", 1)[0]  # interpreter + DuckDB import
    for rows in [int(r) for r in args.rows.split(",")]:
        files = [str(f) for f in make_days(DEFAULT_DATA, rows)]
        for design in ("per_file", "one_group_by", "pair_join"):
            cpu, gb = measure(files, design)
            print(f"{rows:>11,} rows  {design:<13} CPU {cpu - empty:6.2f} s (start-up excluded)  peak {gb:.2f} GB")


if __name__ == "__main__":
    main()
