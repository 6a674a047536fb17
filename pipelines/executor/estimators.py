"""The estimators of a day, one step per stage: counts, impressions (REO and A/B), envy, scores, labels, reach.

Each step reads its stage's inputs (staged rows through DuckDB, ``sql/``; a
model snapshot) and computes every table the registry declares on that stage
and the config enables (:func:`fairmon.transforms.registry.run_stage`, each
table with its declared config options), so a new table edits no step here.
None decides whether a day publishes (that is
the batch's gate, :mod:`fairmon.pipelines.executor.batch`). Each logs its
rows in and out and adds its seconds to the day's book
(:mod:`fairmon.pipelines.core.timing`).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping
from typing import Any

import polars as pl

from fairmon.pipelines.checks.suites import DQResult
from fairmon.pipelines.core import timing
from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.executor.day_checks import donor_group_check
from fairmon.pipelines.executor.outcomes import step
from fairmon.pipelines.ingest import staging_tables
from fairmon.pipelines.ingest.adapters import envy_user_attributes, rsp_pool_counts
from fairmon.pipelines.ingest.range_counts import count_batch
from fairmon.pipelines.ingest.snapshots import Snapshot
from fairmon.pipelines.ingest.sources import current_files, day_files
from fairmon.pipelines.ingest.staging import ingest_days, run_logger, warn
from fairmon.pipelines.ingest.windows import window_start
from fairmon.pipelines.storage import db
from fairmon.transforms.reach.reach_tables import reach_problems
from fairmon.transforms.registry import run_stage
from fairmon.transforms.reo.reo_tables import GROUP_COUNTS_SCHEMA


@step("count-groups")
def count_groups(cfg: FairmonConfig, days: Mapping[dt.date, Any]) -> dict[dt.date, tuple]:
    """Per-group counts of each day of ``days`` (a batch, its keys; sql/group_counts.sql),
    counted independently the staged rows per traffic and arm (sql/traffic_totals.sql),
    and the per-key counts of the cluster-robust variance (empty without
    clustering) as the day holds them until it estimates
    (:class:`fairmon.pipelines.ingest.range_counts.HeldKeys`; its ``frame()``
    gives the frame), from the rows of the files each day needs now, in one
    count for the batch (:func:`fairmon.pipelines.ingest.range_counts.count_batch`;
    its seconds go to the caller's clock). Returns {day: (counts, totals,
    held keys)}. Raises what the count query raises."""
    log = run_logger()
    t0 = time.perf_counter()
    dates = sorted(days)
    counted = count_batch(cfg, dates)
    out, seconds = {}, time.perf_counter() - t0
    for ds in dates:
        counts, totals, held = counted[ds]
        out[ds] = (counts.cast(GROUP_COUNTS_SCHEMA).select(list(GROUP_COUNTS_SCHEMA)), totals, held)
        rows_in = int(totals.get_column("n").sum() or 0)
        log.info(
            "counts %s: %d staged rows in, %d group rows out, %.2fs (the batch's %d day(s))",
            ds, rows_in, counts.height, seconds, len(dates),
        )  # fmt: skip
    return out


@step("estimate-reo")
def estimate(
    cfg: FairmonConfig, counts: pl.DataFrame, ds: dt.date, buckets: pl.DataFrame | None = None
) -> dict[str, pl.DataFrame]:
    """Every table the registry declares on the ``impressions`` stage that the
    config enables (REO per group and overall, its stages, RSP, user
    precision, the A/B differences between arms: seed 001), computed from
    the day's ``counts``, ``ds`` and ``buckets`` (the count stage's
    per-bucket counts when rows are clustered, else None) with each
    declaration's config options (:func:`fairmon.transforms.registry.run_stage`),
    and ``pool``, the day's ``[estimation] rsp_pool`` table (None without one).
    Returns {table: frame} in registry order. Raises InputContractError
    naming the pool table's file, column and row when it is bad."""
    t0 = time.perf_counter()
    with timing.clock(ds, "estimators"):
        pool = rsp_pool_counts(cfg, ds)
        out = run_stage("impressions", cfg, {"counts": counts, "ds": ds, "buckets": buckets, "pool": pool})
    _log_out(ds, f"{counts.height} count rows", out, t0)
    return out


_GROUP_COUNTS = {
    "attribute": pl.String,
    "group": pl.String,
    "donor_group": pl.String,
    "user_id": pl.String,
    "is_day": pl.Boolean,
    "n": pl.Int64,
    "n_pos": pl.Int64,
}
_USER_COUNTS = {"user_id": pl.String, "donor": pl.String, "n": pl.Int64, "reward_sum": pl.Int64}
_UNRESOLVED = {
    "donor_user_id": pl.String,
    "policy_group": pl.String,
    "attributes": pl.String,
    "n_day": pl.Int64,
    "n_window": pl.Int64,
}


def _envy_counts(
    cfg: FairmonConfig, ds: dt.date, days: list[dt.date], group_attr: str
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(group counts, user counts, unresolved donors) of the envy window
    ``days`` ending at ``ds`` (sql/envy_group_counts.sql,
    envy_user_counts.sql, envy_unresolved_donors.sql), from the staged rows of
    the files those days need now, donor groups looked up in ``[envy]
    user_table`` first (:func:`envy_user_attributes`). Empty frames when
    nothing is staged. Raises InputContractError for a bad user table."""
    env = cfg.envy
    attributes = envy_user_attributes(cfg)
    with db.connect(cfg.duckdb_path) as con:
        if not staging_tables.exists(con, staging_tables.ENVY_ROWS):
            empty = (_GROUP_COUNTS, _USER_COUNTS, _UNRESOLVED)
            return tuple(pl.DataFrame(schema=e) for e in empty)
        # a day whose files fail their checks now counts with none of its rows, not with stale ones
        con.register("envy_files", day_files(cfg, days))
        con.register("envy_user_attributes", attributes)
        try:
            window = {"start": env.start, "ds": ds}
            group_counts = db.query(con, "envy_group_counts", group_attribute=group_attr, **window)
            user_counts = db.query(con, "envy_user_counts", **window)
            unresolved = db.query(
                con, "envy_unresolved_donors", group_attribute=group_attr, attributes=cfg.envy_attributes, **window
            )
        finally:
            con.unregister("envy_files")
            con.unregister("envy_user_attributes")
    return group_counts, user_counts, unresolved.cast(_UNRESOLVED)


@step("estimate-envy")
def estimate_envy(cfg: FairmonConfig, ds: dt.date) -> tuple[dict[str, pl.DataFrame], list[DQResult]]:
    """The envy-freeness tables of day ``ds`` (DESIGN §4.7; seed 004): group
    envy per user attribute, per-user OCEF certificates and AUDIT's verdict,
    from every default and swap row since ``[envy] start`` in the files those
    days need now. Earlier days of the window not staged as they are now are
    staged first (a day run alone); a day whose files are missing or fail
    their raw suite contributes no rows (not rows staged from an earlier
    version of its files) and is named in the audit's design_reason.
    Swap rows whose donor group cannot be resolved are left out of group envy
    (counted in its ``donor_rows_left_out``) and reported by the
    ``swap_donor_group_resolved`` check
    (:func:`fairmon.pipelines.executor.day_checks.donor_group_check`), the
    second element: a warning while group_envy has rows, critical (the batch
    quarantines the day) when it would have none.
    Returns ({}, []) before ``start``."""
    env = cfg.envy
    if env is None or ds < env.start:
        return {}, []
    log = run_logger()
    t0 = time.perf_counter()
    days = [env.start + dt.timedelta(days=i) for i in range((ds - env.start).days + 1)]
    with timing.clock(ds, "ingest"):
        missing = ingest_days(cfg, days[:-1], "impressions", quiet=True).short() if days[:-1] else []
    attrs = cfg.envy_attributes
    group_attr = env.group_attribute or cfg.impressions.attributes[0]
    with timing.clock(ds, "estimators"):
        group_counts, user_counts, unresolved = _envy_counts(cfg, ds, [d for d in days if d not in missing], group_attr)
        group_counts = group_counts.filter(pl.col("attribute").is_in(attrs))
        available = {
            "ds": ds,
            "window_start": env.start,
            "group_envy.counts": group_counts,
            "group_envy.unresolved": unresolved,
            "envy_user.counts": user_counts,
        }
        out = run_stage("envy", cfg, available)
        audit = out.get("envy_audit")
        if missing and audit is not None:
            note = (
                f"{len(missing)} day(s) of the window left out (files missing or failing their checks): "
                + ", ".join(map(str, missing[:5]))
            )
            out["envy_audit"] = audit = audit.with_columns(
                (pl.col("design_reason") + "; " + note).alias("design_reason")
            )
    log.info(
        "estimators %s: envy from %s, %d users, verdict %s, %d unresolved donor rows, %.3fs",
        ds,
        env.start,
        out["envy_user"].height if "envy_user" in out else 0,
        audit.get_column("verdict").item() if audit is not None else "-",
        int(unresolved.get_column("n_window").sum() or 0),
        time.perf_counter() - t0,
    )
    group_rows = out["group_envy"].height if "group_envy" in out else 0
    return out, [donor_group_check(cfg, ds, unresolved, group_rows)]


def staged_query(con, table: str, query: str, empty: dict, **params) -> pl.DataFrame:
    """``sql/<query>.sql`` over the staging table ``table``, or an empty frame
    with the schema ``empty`` while that table does not exist yet."""
    if not staging_tables.exists(con, staging_tables.staging_table(table)):
        return pl.DataFrame(schema=empty)
    return db.query(con, query, **params)


def _log_out(ds: dt.date, rows_in: str, out: dict[str, pl.DataFrame], t0: float) -> None:
    """The run log's line of a step: its rows in, each table's rows out, its seconds."""
    run_logger().info(
        "estimators %s: %s in, %s out, %.3fs",
        ds,
        rows_in,
        ", ".join(f"{k}={v.height}" for k, v in out.items()),
        time.perf_counter() - t0,
    )


def windowed_stage(
    cfg: FairmonConfig,
    ds: dt.date,
    stage: str,
    query: str,
    empty: dict,
    *,
    key: str,
    noun: str,
    keep: pl.Expr | None = None,
) -> dict[str, pl.DataFrame]:
    """The declared tables of ``stage`` (``scores``, ``labels``) for day
    ``ds``: ``sql/<query>.sql`` over the stage's staged rows of its trailing
    window (``[<stage>] window_days`` ending at ``ds``, the files the day needs
    now; an empty frame of schema ``empty`` before anything is staged), the
    rows ``keep`` selects (all when None) given to the stage's declarations
    as ``key`` with ``ds`` and ``window`` (:func:`run_stage`). Logs the rows
    the query returned (as ``noun`` rows) and each table's rows out."""
    t0 = time.perf_counter()
    w0 = window_start(ds, getattr(cfg, stage).window_days)
    with timing.clock(ds, "estimators"):
        with db.connect(cfg.duckdb_path) as con:
            files = current_files(cfg, stage, ds)
            rows = staged_query(con, stage, query, empty, ds=ds, window_start=w0, files=files)
        given = rows if keep is None else rows.filter(keep)
        out = run_stage(stage, cfg, {key: given, "ds": ds, "window": (w0, ds)})
    _log_out(ds, f"{rows.height} {noun} rows", out, t0)
    return out


@step("estimate-threshold-prevalence")
def estimate_threshold(cfg: FairmonConfig, ds: dt.date) -> dict[str, pl.DataFrame]:
    """Prevalence at the threshold per model threshold × attribute × group over
    the trailing window, and the differences between groups (seed 002 §4-5.1):
    the scores stage's declared tables, from the window's staged rows."""
    columns = {"model": pl.String, "score": pl.Float64, "outcome": pl.Boolean}
    columns |= {f"attr__{a}": pl.String for a in cfg.scores.groupings}
    return windowed_stage(cfg, ds, "scores", "scores_window", columns, key="rows", noun="scored")


_CONFUSION = {
    "attribute": pl.String,
    "group": pl.String,
    "labeler_id": pl.String,
    "tp": pl.Int64,
    "fn": pl.Int64,
    "fp": pl.Int64,
    "tn": pl.Int64,
}


@step("estimate-sdt")
def estimate_sdt(cfg: FairmonConfig, ds: dt.date) -> dict[str, pl.DataFrame]:
    """Signal-detection metrics per attribute × group, pooled and per labeler,
    over the trailing window (seed 002 §5.3): the labels stage's declared
    tables, from confusion counts made in SQL (a ``(missing)`` group left out)."""
    keep = pl.col("group") != "(missing)"
    return windowed_stage(cfg, ds, "labels", "sdt_counts", _CONFUSION, key="confusion", noun="confusion", keep=keep)


@step("estimate-reach")
def estimate_reach(cfg: FairmonConfig, ds: dt.date, snap: Snapshot) -> dict[str, pl.DataFrame]:
    """Reachability of every (user, target item), discovery per user,
    availability per item, stability per user beside the training-noise floor,
    and the group comparisons of one checked model snapshot (seed 003;
    DESIGN §4.8): the reach stage's declared tables, from the snapshot's
    parts, its reachability problems and the stability budgets below its
    user count. Progress goes to the run log every 10 % of the users."""
    log = run_logger()
    rc = cfg.reach
    t0 = time.perf_counter()
    n_users = snap.users.height
    done = [0]

    def tick(k: int) -> None:
        done[0] += k
        if done[0] % max(1, n_users // 10) == 0 or done[0] == n_users:
            log.info("reach %s: %d/%d users solved, %.1fs", ds, done[0], n_users, time.perf_counter() - t0)

    with timing.clock(ds, "estimators"):
        problems = reach_problems(
            snap.model, snap.history, beta=rc.beta, budget=rc.budget, r_min=rc.rating_min, r_max=rc.rating_max,
            betas=tuple(rc.betas), progress=tick,
        )  # fmt: skip
        budgets = [b for b in rc.stability_budgets if b < n_users]
        if len(budgets) < len(rc.stability_budgets):
            warn(
                "%s: stability budgets %s are not below the snapshot's %d users: left out",
                ds, sorted(set(rc.stability_budgets) - set(budgets)), n_users,
            )  # fmt: skip
        available = {
            "ds": ds, "problems": problems, "users": snap.users, "items": snap.items,
            "user_attributes": snap.user_attributes, "item_attributes": snap.item_attributes,
            "history": snap.history, "items_count": snap.items.height, "training": snap.training, "budgets": budgets,
        }  # fmt: skip
        out = run_stage("reach", cfg, available)
    log.info(
        "estimators %s: %d reachability problems, %d stability retrainings, %s, %.1fs",
        ds,
        problems.height,
        len(budgets) * rc.perturbations + rc.noise_seeds + 1,
        ", ".join(f"{k}={v.height}" for k, v in out.items()),
        time.perf_counter() - t0,
    )
    return out
