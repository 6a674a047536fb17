"""CPU cost of the cluster-bucket expression on DuckDB (issue 37 item 4).

    python bench/bucket_cost.py [--rows 10000000]

The count stage computes a bucket for every row it scans
(sql/impressions_bucket.sql). This times, in DuckDB alone with one thread,
``SELECT sum(<bucket>)`` over ``--rows`` generated request ids for the
former formula (DuckDB's own ``hash()``, which Spark does not share) and the
candidates that DuckDB and Spark compute identically, best of 3 CPU seconds
(``time.process_time``). Judged by: the pipeline's formula (sha1) against
the former one, CPU seconds per 10^7 ids.
"""

from __future__ import annotations

import argparse
import time

import duckdb

from fairmon.pipelines.storage.portable import render
from fairmon.transforms.reo.cluster_keys import cluster_key_params

BUCKETS = 128
FORMER = "former: DuckDB hash() (engine-specific)"
PIPELINE = "sql/impressions_bucket.sql (sha1, 8 hex digits)"
FORMULAS = {
    FORMER: "CAST(((CAST(hash(id) >> 1 AS BIGINT) % $b) + $b) % $b AS INTEGER)",
    PIPELINE: None,  # the statement itself, rendered over the ids
    "sha1, 8 hex digits, bare": "CAST(CAST('0x' || substr(sha1(id), 1, 8) AS BIGINT) % $b AS INTEGER)",
    "md5, 8 hex digits": "CAST(CAST('0x' || substr(md5(id), 1, 8) AS BIGINT) % $b AS INTEGER)",
    "md5, 15 hex digits": "CAST(CAST('0x' || substr(md5(id), 1, 15) AS BIGINT) % $b AS INTEGER)",
    "sha256, 8 hex digits": "CAST(CAST('0x' || substr(sha256(id), 1, 8) AS BIGINT) % $b AS INTEGER)",
    "md5 digest alone (no bucket)": "strlen(md5(id))",
    "reading the ids alone": "strlen(id)",
}


def cpu_seconds(con, expr: str | None, reps: int = 3) -> float:
    """Best CPU seconds of summing ``expr`` over the ids (None: the pipeline's bucket statement)."""
    if expr is None:
        query = f"SELECT sum(__cbucket) FROM ({render('impressions_bucket', cluster=['id'], scope=[])})"
        params = cluster_key_params(BUCKETS, BUCKETS)
    else:
        query, params = f"SELECT sum({expr}) FROM ids", ({"b": BUCKETS} if "$b" in expr else None)
    best = float("inf")
    for _ in range(reps):
        t = time.process_time()
        con.execute(query, params).fetchall()
        best = min(best, time.process_time() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    n = ap.parse_args().rows
    con = duckdb.connect()
    con.execute("SET threads = 1")
    ids = "'req-' || CAST(range * 7919 AS VARCHAR) || '-' || CAST(range % 977 AS VARCHAR)"
    con.execute(f"CREATE TABLE ids AS SELECT {ids} AS id FROM range({n})")
    con.execute("CREATE VIEW raw_in AS SELECT id FROM ids")
    per = {name: cpu_seconds(con, e) * 1e7 / n for name, e in FORMULAS.items()}
    for name, s in per.items():
        print(f"{name:50s} {s:6.2f} CPU s per 10^7 ids")
    old, new = per[FORMER], per[PIPELINE]
    print(f"ratio pipeline / former: {new / old:.1f}x (+{new - old:.2f} CPU s per 10^7 rows)")


if __name__ == "__main__":
    main()
