"""range_counts.count_statements (the days' shares of random rows, sql/count_random_shares.sql;
each day's own rows, sql/group_counts.sql; each share's random rows counted once,
sql/group_counts_pooled.sql; the spans, sql/count_spans.sql) + range_counts.group_totals against
the single statement they replaced (tests/reference/group_counts_79839b7.sql: every day joined to
every random row of its window, per-key rows carrying the group's span, summed by the caller): on
days with null groups, several attributes, two arms, a random pool joined by several days, dated
random rows, exact per-cluster keys on one day and keys hashed to buckets on another; and on
random setups of files, windows, dates and keys."""

import datetime as dt
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest

from fairmon.pipelines.ingest.range_counts import BUCKET_SCHEMA, count_statements, group_totals
from fairmon.transforms.registry import polars_schema

D = [dt.date(2026, 3, d) for d in (1, 2, 3)]
PREVIOUS = (Path(__file__).parent / "reference" / "group_counts_79839b7.sql").read_text()
G = 8  # buckets


def _rows(rng, n, ds, ds_start, traffic, file, keys, attributes=("g", "h")):
    """n staged rows of one file; ``keys`` the cluster keys drawn (None: unclustered rows)."""
    values = {"g": ["x", "y", "z", ""], "h": ["p", "q"]}
    return pl.DataFrame(
        {
            "ds": [ds] * n,
            "ds_start": [ds_start] * n,
            "traffic": [traffic] * n,
            "arm": pl.Series(
                rng.choice(["a", "b"], n).tolist() if traffic != "random" else ["all"] * n, dtype=pl.String
            ),
            "y": rng.random(n) < 0.3,
            **{
                f"attr__{a}": pl.Series(
                    [x or None for x in rng.choice(values.get(a, ["u", ""]), n).tolist()], dtype=pl.String
                )
                for a in attributes
            },
            "cbucket": pl.Series(rng.choice(keys, n).tolist() if keys is not None else [None] * n, dtype=pl.Int32),
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
        _rows(rng, 150, D[2], D[2], "random", "r3", list(range(G))),  # dated random rows of day 3 only
        _rows(rng, 100, D[1], D[1], "random", "gone", exact),  # a random file no day resolves now
    ]
    con = duckdb.connect()
    con.register("impressions", pl.concat(frames))
    files = {D[0]: ["d1", "r1", "pool", "r3"], D[1]: ["d2", "r1", "pool", "r3"], D[2]: ["d3", "r1", "pool", "r3"]}
    con.register("day_files", pl.DataFrame({"day": [d for d in D for _ in files[d]], "file": sum(files.values(), [])}))
    return con


def _previous_and_new(con, buckets, window_days, policy):
    """(group counts, key rows) of the previous statement and of count_statements, comparably sorted."""
    keys = ["ds", "traffic", "arm", "attribute", "group"]
    old = con.sql(PREVIOUS, params={"buckets": buckets, "window_days": window_days, "pool_policy": policy}).pl()
    want = (
        old.group_by(keys)
        .agg(pl.col("n").sum(), pl.col("n_pos").sum(), pl.col("window_start").min(), pl.col("window_end").max())
        .with_columns(pl.lit("impressions").alias("source"))
        .select(list(polars_schema("group_counts")))
        .sort(keys)
    )
    by_key, spans = count_statements(con, buckets, window_days, policy, exact=buckets)
    cols = list(BUCKET_SCHEMA)
    old_keys, new_keys = (f.select(cols).cast(BUCKET_SCHEMA).sort(cols, nulls_last=True) for f in (old, by_key))
    return (want, old_keys), (group_totals(by_key, spans), new_keys)


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_the_new_statements_give_the_counts_and_key_rows_of_the_previous_one():
    con = _con()
    for policy in ("overlap", "contained"):
        (want, old_keys), (got, new_keys) = _previous_and_new(con, G, 3, policy)
        assert got.equals(want) and got.schema == want.schema
        assert new_keys.equals(old_keys)
        by_key = count_statements(con, G, 3, policy, exact=G)[0]
        day = {d: set(by_key.filter(pl.col("ds") == d).get_column("cbucket")) for d in D}
        assert day[D[0]] == {-3, -11, -25}  # exact keys kept
        assert all(0 <= k < G for k in day[D[1]] | day[D[2]])  # hashed buckets
        assert "(missing)" in set(got.get_column("group")) and set(got.get_column("attribute")) == {"g", "h"}
    # a hand case: day 1's random rows under 'overlap' are r1's and the pool's (which ends on day 2)
    got = group_totals(*count_statements(con, G, 3, "overlap"))
    rand = got.filter((pl.col("ds") == D[0]) & (pl.col("traffic") == "random") & (pl.col("attribute") == "h"))
    ((n_rand,),) = con.execute("SELECT sum(n) FROM impressions WHERE src_file IN ('r1', 'pool')").fetchall()
    assert rand.get_column("n").sum() == n_rand and rand.get_column("window_end").to_list() == [D[1]] * 2


def _random_setup(seed):
    """A random staging table and day_files: 1-5 days, default/swap files a day, random files
    dated (one or several days in a file) or pooled over a range, listed for most days; keys
    exact, many per-cluster, hashed, mixed or absent; 1-3 attributes. None when no file was drawn."""
    rng = np.random.default_rng(seed)
    buckets, n_days, attrs = int(rng.integers(2, 10)), int(rng.integers(1, 6)), ("g", "h", "k")[: rng.integers(1, 4)]
    days = [D[0] + dt.timedelta(days=i) for i in range(n_days)]
    draws = [None, list(range(-1, -int(rng.integers(2, 3 * buckets)), -1)), list(range(buckets)), [-1, -2, 0, 1]]
    frames, files = [], {d: [] for d in days}
    for i, d in enumerate(days):
        for j in range(int(rng.integers(0, 3))):
            kind, keys = str(rng.choice(["default", "swap"])), draws[rng.integers(0, 4)]
            frames.append(_rows(rng, int(rng.integers(1, 60)), d, d, kind, f"d{i}.{j}", keys, attrs))
            files[d].append(f"d{i}.{j}")
    for j in range(int(rng.integers(0, 4))):
        start = D[0] + dt.timedelta(days=int(rng.integers(-3, n_days)))
        end, keys = start + dt.timedelta(days=int(rng.integers(0, 5))), draws[rng.integers(0, 4)]
        if end == start:  # dated rows, of one or several days
            frames += [
                _rows(rng, int(rng.integers(1, 40)), start + dt.timedelta(days=k), start + dt.timedelta(days=k),
                      "random", f"r{j}", keys, attrs)
                for k in range(int(rng.integers(1, 4)))
            ]  # fmt: skip
        else:
            frames.append(_rows(rng, int(rng.integers(1, 60)), end, start, "random", f"r{j}", keys, attrs))
        for d in days:
            files[d] += [f"r{j}"] if rng.random() < 0.85 else []
    if not frames:
        return None
    con = duckdb.connect()
    con.register("impressions", pl.concat(frames))
    day_files = {"day": [d for d in days for _ in files[d]], "file": [f for d in days for f in files[d]]}
    con.register("day_files", pl.DataFrame(day_files, schema={"day": pl.Date, "file": pl.String}))
    return con, buckets, int(rng.integers(1, 5))


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_the_new_statements_equal_the_previous_one_on_random_setups():
    compared = 0
    for seed in range(40):
        setup = _random_setup(seed)
        if setup is None:
            continue
        con, buckets, window_days = setup
        for policy in ("overlap", "contained"):
            (want, old_keys), (got, new_keys) = _previous_and_new(con, buckets, window_days, policy)
            assert got.equals(want) and new_keys.equals(old_keys), (seed, policy)
            compared += 1
    assert compared > 60
