"""Group envy (seed 004 App. B: eq. 6, Def. B.1; DESIGN §4.7), from counts and from the simulator.

Def. B.1 compares U(g, g') with U(g, g): both are swap cells (g served by the
policy of a uniformly drawn member of g', resp. of g), never the users' own
policies (default traffic), which are only a named diagnostic."""

import datetime as dt
import math

import numpy as np
import polars as pl
import pytest

from fairmon.transforms.envy.group import group_envy, group_envy_table
from fairmon.transforms.simulators import envy_world as se


def _cells(own: float, same: float, cross: float, n: int = 1_000_000) -> pl.DataFrame:
    """Groups a and b; default rows (donor_group null) at ``own``, same-group swap
    cells at ``same``, cross-group swap cells at ``cross`` (positives = rate·n)."""
    rate = {None: own, "same": same, "cross": cross}
    rows = []
    for g in ("a", "b"):
        for d, kind in ((None, None), (g, "same"), ("b" if g == "a" else "a", "cross")):
            rows.append({"group": g, "donor_group": d, "n": n, "n_pos": round(rate[kind] * n)})
    return pl.DataFrame(rows, schema={"group": pl.String, "donor_group": pl.String, "n": pl.Int64, "n_pos": pl.Int64})


def test_group_envy_by_hand():
    """U(a, b) = 0.6 (600/1000) against U(a, a) = 0.5 (500/1000, a's same-group
    swap cell); the default rows (0.9) do not enter diff; se = sqrt(0.24/1000 +
    0.25/1000); the two off-diagonal pairs share day 1's δ₁ = 6δ/π² in Hoeffding's
    bound, half-width sqrt(Σc²·log(2·2/δ₁)/2) with Σc² = 1/1000 + 1/1000 (one user's
    1,000 rows in each cell: counts without user_id are one user's)."""
    day = pl.DataFrame(
        {
            "group": ["a", "a", "a", "b", "b", "b"],
            "donor_group": [None, "a", "b", None, "b", "a"],
            "n": [1000] * 6,
            "n_pos": [900, 500, 600, 100, 700, 400],
        }
    )
    out = group_envy(day, day, epsilon=0.05, delta=0.05, day_index=1)
    assert out.height == 4
    ab = out.filter((pl.col("group") == "a") & (pl.col("donor_group") == "b")).row(0, named=True)
    assert ab["U_same"] == 0.5 and ab["diff"] == pytest.approx(0.1) and ab["n_same"] == 1000
    se = math.sqrt(0.6 * 0.4 / 1000 + 0.25 / 1000)
    assert ab["se"] == pytest.approx(se)
    assert ab["ci_low"] == pytest.approx(0.1 - 1.959964 * se, abs=1e-6)
    assert ab["p_value"] == pytest.approx(0.5 * math.erfc(0.1 / se / math.sqrt(2)), rel=1e-9)
    h = math.sqrt(2 / 1000 * math.log(2 * 2 * math.pi**2 / (6 * 0.05)) / 2)
    assert ab["anytime_lower"] == pytest.approx(0.1 - h, abs=1e-12)
    assert ab["anytime_upper"] == pytest.approx(0.1 + h, abs=1e-12)
    # the own-policy comparison is a diagnostic only: 0.6 − 0.9
    assert ab["U_own_policy"] == 0.9 and ab["diff_own_policy"] == pytest.approx(-0.3)
    ba = out.filter((pl.col("group") == "b") & (pl.col("donor_group") == "a")).row(0, named=True)
    assert ba["diff"] == pytest.approx(-0.3)
    assert (ab["verdict"], ba["verdict"]) == ("envy", "eps_envy_free")  # 0.1 − 0.070 > 0
    diag = out.filter(pl.col("group") == pl.col("donor_group"))
    assert (diag["diff"] == 0).all() and (diag["anytime_upper"] == 0).all() and diag["p_value"].is_nan().all()
    assert diag.sort("group")["U_cross"].to_list() == [0.5, 0.7] and (diag["verdict"] == "eps_envy_free").all()
    big = day.with_columns(pl.col("n") * 100, pl.col("n_pos") * 100)
    v = group_envy(big, big, epsilon=0.05, delta=0.05, day_index=1).filter(pl.col("group") != pl.col("donor_group"))
    assert dict(zip(*v[["group", "verdict"]], strict=True)) == {"a": "envy", "b": "eps_envy_free"}


@pytest.mark.parametrize("own", [0.9, 0.3])
def test_homogeneous_groups_have_no_group_envy_whatever_the_own_policy(own):
    """Homogeneous groups: a user gets the same from any other user's policy
    (0.6 in both groups), so U(g, g') = U(g, g) and no group envies another,
    nor itself. own = 0.9: every user's own policy is best; own = 0.3: worst,
    where comparing with default traffic called every cell, the diagonal
    included, `envy`. Only the diagnostic moves."""
    c = _cells(own, 0.6, 0.6)
    out = group_envy(c, c, epsilon=0.05, delta=0.05, day_index=1)
    assert out.height == 4 and (out["diff"].abs() < 1e-12).all()
    assert (out["verdict"] == "eps_envy_free").all()
    assert out["diff_own_policy"].to_numpy() == pytest.approx(0.6 - own)
    # the table a day publishes: same rows, never a diagonal envy
    counts = c.with_columns(pl.lit("g").alias("attribute"), pl.lit(True).alias("is_day"))
    table = group_envy_table(counts, dt.date(2026, 1, 1), dt.date(2026, 1, 1), epsilon=0.05, delta=0.05)
    assert table.height == 4 and not (table["verdict"] == "envy").any()


def test_no_same_group_donors_no_baseline():
    """A group without same-group swap rows has no U(g, g): its pairs get no row."""
    c = _cells(0.9, 0.6, 0.7).filter(~((pl.col("group") == "a") & (pl.col("donor_group") == "a")))
    out = group_envy(c, c, epsilon=0.05, delta=0.05, day_index=1)
    assert set(out["group"]) == {"b"} and out.height == 2


@pytest.mark.coverage
def test_group_envy_normal_ci_covers():
    """1,000 simulated days with true diff = 0.02 at 2,000 rows a cell: the
    day's Wald interval covers within [0.93, 0.97]; the anytime bound over the
    accumulated days never excludes the truth."""
    rng = np.random.default_rng(5)
    cover, wrong = 0, 0
    acc = np.zeros(4)
    for i in range(1000):
        pos = rng.binomial(2000, [0.30, 0.32, 0.5, 0.5])
        acc += pos
        day = pl.DataFrame({"group": ["a", "a", "b", "b"], "donor_group": ["a", "b", "b", "a"], "n": [2000] * 4})
        day = day.with_columns(pl.Series("n_pos", pos))
        window = day.with_columns(pl.Series("n_pos", acc.astype(int)), pl.col("n") * (i + 1))
        out = group_envy(day, window, epsilon=0.01, delta=0.05, day_index=i + 1)
        row = out.filter((pl.col("group") == "a") & (pl.col("donor_group") == "b")).row(0, named=True)
        cover += row["ci_low"] <= 0.02 <= row["ci_high"]
        wrong += not (row["anytime_lower"] <= 0.02 <= row["anytime_upper"])
    assert 0.93 <= cover / 1000 <= 0.97
    assert wrong == 0


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_envious_simulator_truth_is_found():
    """seed 004 App. C.2's measurement bias (envy_world, `envious`): eq. 6 has
    U(1, 0) − U(1, 1) > 0.1 (the minority gains from the majority's policies)
    and U(0, 1) < U(0, 0). Three days of AUDIT's design: (1, 0) is certified
    `envy`, (0, 1) `eps_envy_free`, no diagonal envy, and every day's anytime
    bounds hold the design's true diff (mean over its (target, donor) pairs)."""
    system = se.build_system(se.EnvySpec("envious", seed=0))
    U = system.group_utility()
    assert U[("1", "0")] - U[("1", "1")] > 0.1 and U[("0", "1")] < U[("0", "0")]
    rng = np.random.default_rng(1)
    targets, donors = se.audit_design(system, delta=0.05, lam=0.2, gamma=0.3, rng=rng)
    mu, tg, dg = system.utility[targets[:, None], donors], system.group[targets][:, None], system.group[donors]
    truth = {(g, h): mu[(tg == g) & (dg == h)].mean() - mu[(tg == g) & (dg == g)].mean() for g in "01" for h in "01"}
    window = None
    for d in range(3):
        rows = se.simulate_envy_day(
            system, ds=dt.date(2026, 1, 1 + d), targets=targets, donors=donors,
            pulls_own=1000, pulls_per_donor=500, rng=rng, default_rows=5000,
        )  # fmt: skip
        group_of = dict(zip([f"u{i}" for i in range(len(system.group))], system.group, strict=True))
        day = (
            rows.with_columns(pl.col("policy_user_id").replace_strict(group_of, default=None).alias("donor_group"))
            .group_by(pl.col("user_group").alias("group"), "donor_group")
            .agg(pl.len().cast(pl.Int64).alias("n"), pl.col("like").sum().cast(pl.Int64).alias("n_pos"))
        )
        window = day if window is None else pl.concat([window, day])
        out = group_envy(day, window, epsilon=0.1, delta=0.05, day_index=d + 1)
        assert out.height == 4
        for r in out.iter_rows(named=True):
            assert r["anytime_lower"] <= truth[(r["group"], r["donor_group"])] + 1e-12 <= r["anytime_upper"] + 2e-12
            assert r["group"] != r["donor_group"] or r["verdict"] == "eps_envy_free"
    v = {(r["group"], r["donor_group"]): r["verdict"] for r in out.iter_rows(named=True)}
    assert v[("1", "0")] == "envy" and v[("0", "1")] == "eps_envy_free"


def test_count_sql_puts_swap_rows_in_donor_cells_and_default_rows_apart():
    """sql/envy_group_counts.sql: default traffic (no donor) has a null donor_group (the
    diagnostic only); every swap row, also one whose donor is the user (eq. 6's uniform draw
    over g includes m), counts in its donor's group: here (a, a) = 2 rows, (a, b) = 1; each
    target user's rows stay apart."""
    import duckdb

    from fairmon.pipelines.storage import db

    con = duckdb.connect()
    con.execute(
        "CREATE TABLE envy_rows AS SELECT * FROM (VALUES "
        "(DATE '2026-01-01', 'f', 'u1', NULL, NULL, 5, 4, 'a'), (DATE '2026-01-01', 'f', 'u1', 'u2', NULL, 3, 1, 'a'), "
        "(DATE '2026-01-01', 'f', 'u1', 'u1', NULL, 2, 2, 'a'), (DATE '2026-01-01', 'f', 'u1', 'u3', NULL, 7, 0, 'a'), "
        "(DATE '2026-01-01', 'f', 'u2', NULL, NULL, 1, 1, 'a'), (DATE '2026-01-01', 'f', 'u3', NULL, NULL, 1, 0, 'b')) "
        "AS t(ds, src_file, user_id, donor_user_id, donor_group, n, n_pos, attr__g)"
    )
    con.register("envy_files", pl.DataFrame({"file": ["f"]}))
    con.register(
        "envy_user_attributes", pl.DataFrame(schema={"user_id": pl.String, "attribute": pl.String, "grp": pl.String})
    )
    day = dt.date(2026, 1, 1)
    got = db.query(con, "envy_group_counts", group_attribute="g", start=day, ds=day)
    cells = {(r["group"], r["donor_group"], r["user_id"]): (r["n"], r["n_pos"]) for r in got.iter_rows(named=True)}
    assert cells == {  # each target user apart: eq. 6 averages the users' means
        ("a", None, "u1"): (5, 4),
        ("a", None, "u2"): (1, 1),
        ("a", "a", "u1"): (5, 3),
        ("a", "b", "u1"): (7, 0),
        ("b", None, "u3"): (1, 0),
    }


def test_an_eq6_cell_weighs_users_equally_by_hand():
    """seed 004 eq. 6 within users: u1 gets 90 of 100 from b's policies and 25 of 50 from a's, u2 1 of 10
    and 10 of 50; u3 has (a, a) rows only and is left out of the pair. U(a, b) = (0.9 + 0.1)/2 = 0.5, where
    pooling the rows gives 91/110; U(a, a) = (0.5 + 0.2)/2 = 0.35. The variance holds the users fixed:
    ũ(1 − ũ)·Σc² per cell, ũ the 1/n-weighted rate, Σc² = Σ 1/n / M²; the anytime bound is Hoeffding's
    with Σc² of both cells, on day 3 of the window, one off-diagonal pair taking δ₃ = 6δ/(π²·9); the
    table path reads the day index from ds − window_start; the pooled diagnostic takes the whole cells."""
    counts = pl.DataFrame(
        {
            "attribute": "g",
            "group": ["a"] * 5,
            "donor_group": ["b", "b", "a", "a", "a"],
            "user_id": ["u1", "u2", "u1", "u2", "u3"],
            "is_day": True,
            "n": [100, 10, 50, 50, 50],
            "n_pos": [90, 1, 25, 10, 40],
        }
    )
    table = group_envy_table(counts, dt.date(2026, 1, 3), dt.date(2026, 1, 1), epsilon=0.05, delta=0.05)
    ab = table.filter(pl.col("donor_group") == "b").row(0, named=True)
    assert (ab["U_cross"], ab["U_same"], ab["users"]) == (0.5, 0.35, 2)
    assert ab["diff"] == pytest.approx(0.15, abs=1e-12) and (ab["n_cross"], ab["n_same"]) == (110, 100)
    h_c, h_s = (1 / 100 + 1 / 10) / 4, (1 / 50 + 1 / 50) / 4
    rate_c, rate_s = (0.9 / 100 + 0.1 / 10) / (1 / 100 + 1 / 10), 0.35
    assert ab["se"] == pytest.approx(math.sqrt(rate_c * (1 - rate_c) * h_c + rate_s * (1 - rate_s) * h_s), abs=1e-12)
    half = math.sqrt((h_c + h_s) * math.log(2 * math.pi**2 * 9 / (6 * 0.05)) / 2)
    assert ab["anytime_lower"] == pytest.approx(0.15 - half, abs=1e-12)
    assert ab["anytime_upper"] == pytest.approx(0.15 + half, abs=1e-12)
    assert ab["diff_pooled_rows"] == pytest.approx(91 / 110 - 75 / 150, abs=1e-12)
    assert (ab["window_n_cross"], ab["level"]) == (110, 0.95)


def test_users_who_differ_do_not_read_as_envy():
    """u1 gets 0.9 from any policy but was served only by b's, u2 gets 0.1 and was served only by a's,
    u3 gets 0.5 from both: nobody gains from b's policies. Averaging each cell over its own users would
    give 0.7 − 0.3 = 0.4 and certify envy; within users (u3 alone is in both cells) the diff is 0."""
    rows = pl.DataFrame(
        {
            "group": "a",
            "donor_group": ["b", "a", "b", "a"],
            "user_id": ["u1", "u2", "u3", "u3"],
            "n": [4000] * 4,
            "n_pos": [3600, 400, 2000, 2000],
        }
    )
    ab = group_envy(rows, rows, epsilon=0.05, delta=0.05, day_index=1).filter(pl.col("donor_group") == "b")
    assert ab["diff"].item() == 0 and ab["users"].item() == 1 and ab["verdict"].item() != "envy"


@pytest.mark.coverage
def test_eq6_anytime_bounds_hold_over_days_with_unequal_users():
    """200 runs of 20 days: 30 users of g with 5 to 200 swap rows a day in each cell, user means
    spread from 0.1 to 0.9 (so pooling the rows would miss eq. 6's average): the window's bounds
    hold the users' average on every day of at least 0.95 of the runs (Hoeffding with a union over
    cells and days at δ = 0.05)."""
    rng = np.random.default_rng(11)
    users = [f"u{i}" for i in range(30)]
    held = 0
    for _ in range(200):
        mean_c, mean_s = rng.uniform(0.1, 0.9, 30), rng.uniform(0.1, 0.9, 30)
        rows_c, rows_s = rng.integers(5, 200, 30), rng.integers(5, 200, 30)
        truth = mean_c.mean() - mean_s.mean()
        window, ok = None, True
        for day in range(1, 21):
            day_rows = pl.DataFrame(
                {
                    "group": "a",
                    "donor_group": ["b"] * 30 + ["a"] * 30,
                    "user_id": users * 2,
                    "n": np.r_[rows_c, rows_s],
                    "n_pos": rng.binomial(np.r_[rows_c, rows_s], np.r_[mean_c, mean_s]),
                }
            )
            window = day_rows if window is None else pl.concat([window, day_rows])
            out = group_envy(day_rows, window, epsilon=0.05, delta=0.05, day_index=day)
            r = out.filter(pl.col("donor_group") == "b").row(0, named=True)
            ok &= r["anytime_lower"] <= truth <= r["anytime_upper"]
        held += ok
    assert held / 200 >= 0.95


def test_the_same_counts_in_any_row_order_give_the_same_bits():
    """Float sums over users run in one order whatever order the counts arrive in (a parallel count or join
    hands them over in varying orders), so a re-run of a day publishes the same bits."""
    rng = np.random.default_rng(5)
    users = [f"u{i}" for i in range(3000)]
    rows = pl.DataFrame(
        {
            "group": rng.choice(["a", "b", "c"], 12000),
            "donor_group": rng.choice(["a", "b", "c"], 12000),
            "user_id": rng.choice(users, 12000),
            "n": rng.integers(1, 40, 12000),
        }
    ).with_columns((pl.col("n") * rng.uniform(0.1, 0.9, 12000)).round().cast(pl.Int64).alias("n_pos"))
    first = group_envy(rows, rows, epsilon=0.05, delta=0.05, day_index=2).sort("group", "donor_group")
    for seed in range(5):
        shuffled = rows.sample(fraction=1.0, shuffle=True, seed=seed)
        again = group_envy(shuffled, shuffled, epsilon=0.05, delta=0.05, day_index=2).sort("group", "donor_group")
        assert again.equals(first, null_equal=True)
