"""sql/group_counts.sql + sql/count_spans.sql + range_counts.group_totals (session 40: the per-key
rows of one aggregation, the spans and the group sums apart) against the single statement they
replaced (tests/reference/group_counts_79839b7.sql: per-key rows carrying the group's span, summed
by the caller), on days with null groups, several attributes, two arms, a random pool joined by
several days, exact per-cluster keys on one day and keys hashed to buckets on another."""

import datetime as dt
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from fairmon.pipelines.ingest.range_counts import BUCKET_SCHEMA, count_statements, group_totals
from fairmon.transforms.registry import polars_schema

D = [dt.date(2026, 3, d) for d in (1, 2, 3)]
PREVIOUS = (Path(__file__).parent / "reference" / "group_counts_79839b7.sql").read_text()
G = 8  # buckets


def _rows(rng, n, ds, ds_start, traffic, file, keys):
    return pl.DataFrame(
        {
            "ds": [ds] * n,
            "ds_start": [ds_start] * n,
            "traffic": [traffic] * n,
            "arm": rng.choice(["a", "b"], n) if traffic == "default" else ["all"] * n,
            "y": rng.random(n) < 0.3,
            "attr__g": [x or None for x in rng.choice(["x", "y", "z", ""], n).tolist()],
            "attr__h": rng.choice(["p", "q"], n),
            "cbucket": rng.choice(keys, n).astype(np.int32),
            "n": rng.integers(1, 4, n),
            "src_file": [file] * n,
        }
    )


def _con():
    rng = np.random.default_rng(7)
    exact = [-3, -11, -25]  # day 1: few per-cluster keys in every file: kept
    many = list(range(-1, -40, -1))  # day 2: more clusters than G: hashed to (-1 - k) % G
    frames = [
        _rows(rng, 300, D[0], D[0], "default", "d1", exact),
        _rows(rng, 300, D[1], D[1], "default", "d2", many),
        _rows(rng, 300, D[2], D[2], "default", "d3", list(range(G))),  # day 3: hashed at staging
        _rows(rng, 200, D[0], D[0], "random", "r1", exact),  # dated random rows of day 1
        _rows(rng, 250, D[1], D[0], "random", "pool", exact),  # a pool over days 1..2
    ]
    con = duckdb.connect()
    con.register("impressions", pl.concat(frames))
    files = {D[0]: ["d1", "r1", "pool"], D[1]: ["d2", "r1", "pool"], D[2]: ["d3", "r1", "pool"]}
    con.register("day_files", pl.DataFrame({"day": [d for d in D for _ in files[d]], "file": sum(files.values(), [])}))
    return con


def test_the_new_statements_give_the_counts_and_key_rows_of_the_previous_one():
    con = _con()
    keys = ["ds", "traffic", "arm", "attribute", "group"]
    for policy in ("overlap", "contained"):
        old = con.sql(PREVIOUS, params={"buckets": G, "window_days": 3, "pool_policy": policy}).pl()
        want = (
            old.group_by(keys)
            .agg(pl.col("n").sum(), pl.col("n_pos").sum(), pl.col("window_start").min(), pl.col("window_end").max())
            .with_columns(pl.lit("impressions").alias("source"))
            .select(list(polars_schema("group_counts")))
            .sort(keys)
        )
        by_key, spans = count_statements(con, G, 3, policy)
        got = group_totals(by_key, spans)
        assert got.equals(want) and got.schema == want.schema
        cols = list(BUCKET_SCHEMA)
        old_keys = old.select(cols).cast(BUCKET_SCHEMA).sort(cols)
        assert by_key.select(cols).cast(BUCKET_SCHEMA).sort(cols).equals(old_keys)
        day = {d: set(by_key.filter(pl.col("ds") == d).get_column("cbucket")) for d in D}
        assert day[D[0]] == {-3, -11, -25}  # exact keys kept
        assert all(0 <= k < G for k in day[D[1]] | day[D[2]])  # hashed buckets
        assert "(missing)" in set(got.get_column("group")) and set(got.get_column("attribute")) == {"g", "h"}
    # a hand case: day 1's random rows under 'overlap' are r1's and the pool's (which ends on day 2)
    got = group_totals(*count_statements(con, G, 3, "overlap"))
    rand = got.filter((pl.col("ds") == D[0]) & (pl.col("traffic") == "random") & (pl.col("attribute") == "h"))
    ((n_rand,),) = con.execute("SELECT sum(n) FROM impressions WHERE src_file IN ('r1', 'pool')").fetchall()
    assert rand.get_column("n").sum() == n_rand and rand.get_column("window_end").to_list() == [D[1]] * 2
