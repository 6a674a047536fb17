"""The estimators of a day, one step each: counts, REO and A/B, envy, prevalence at the threshold, SDT, reach.

Each step reads staged rows (DuckDB, ``sql/``) and calls the pure estimators
of :mod:`fairmon.transforms`; none decides whether a day publishes (that is
the batch's gate, :mod:`fairmon.pipelines.executor.batch`). Each logs its
rows in and out and adds its seconds to the day's book
(:mod:`fairmon.pipelines.core.timing`).
"""

from __future__ import annotations

import datetime as dt
import time

import polars as pl

from fairmon.pipelines.core import timing
from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.executor.outcomes import step
from fairmon.pipelines.ingest.adapters import window_start
from fairmon.pipelines.ingest.snapshots import Snapshot
from fairmon.pipelines.ingest.staging import (
    count_days,
    current_files,
    day_files,
    ensure_staged,
    run_logger,
    take_range_counts,
    warn,
)
from fairmon.pipelines.storage import db
from fairmon.transforms.decisions.decision_tables import sdt_table, threshold_tables
from fairmon.transforms.envy.envy_tables import envy_user_tables
from fairmon.transforms.envy.group import group_envy_table
from fairmon.transforms.reach.reach_tables import (
    reach_group_inputs,
    reach_group_table,
    reach_item_table,
    reach_problems,
    reach_user_table,
    stability_table,
)
from fairmon.transforms.registry import polars_schema
from fairmon.transforms.reo.reo_tables import GROUP_COUNTS_SCHEMA, ab_pairs, reo_ab_table, reo_tables
from fairmon.transforms.reo.stage import reo_stage_table, rsp_table, user_precision_table


@step("count-groups")
def count_groups(cfg: FairmonConfig, ds: dt.date) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Per-group counts of day ``ds`` (sql/group_counts.sql), counted
    independently the staged rows per traffic and arm (sql/traffic_totals.sql),
    and the per-bucket counts of the cluster-robust variance (empty without
    clustering), from the rows of the files the day needs now; taken from
    the counts :func:`fairmon.pipelines.ingest.staging.prestage_impressions`
    made for the batch's range when nothing was staged since (one count for
    the range instead of one a day). Raises what the count query raises."""
    log = run_logger()
    t0 = time.perf_counter()
    ready = take_range_counts(ds)
    with timing.clock(ds, "counts"):
        if ready is not None:  # counted with its backfill's range, nothing staged since
            counts, totals, buckets = ready
        else:
            counts, totals, buckets = count_days(cfg, [ds])
            totals = totals.drop("ds")
    counts = counts.cast(GROUP_COUNTS_SCHEMA).select(list(GROUP_COUNTS_SCHEMA))
    log.info(
        "counts %s: %d staged rows in, %d group rows out, %.2fs",
        ds,
        int(totals.get_column("n").sum() or 0),
        counts.height,
        time.perf_counter() - t0,
    )
    return counts, totals, buckets


@step("estimate-reo")
def estimate(
    cfg: FairmonConfig, counts: pl.DataFrame, ds: dt.date, buckets: pl.DataFrame | None = None
) -> dict[str, pl.DataFrame]:
    """REO per group and overall, and the A/B differences between arms, from
    the counts (transforms.reo_tables), and when configured or present the seed 001
    extras (transforms.stage_tables). ``buckets``: the count stage's per-bucket
    counts when rows are clustered (cluster-robust intervals, transforms/reo/cluster.py).
    Returns {reo_group, reo[, reo_ab, reo_stage, rsp, user_precision]}."""
    log = run_logger()
    t0 = time.perf_counter()
    est, ab = cfg.estimation, cfg.ab
    with timing.clock(ds, "estimators"):
        group, overall = reo_tables(
            counts,
            ds,
            ci_method=est.ci_method,
            level=est.confidence_level,
            n_boot=est.bootstrap_resamples,
            seed=est.seed,
            reo_threshold=est.reo_threshold,
            min_expected_positives=est.min_expected_positives,
            buckets=buckets,
            cluster_by=cluster_name(cfg),
        )
        out = {"reo_group": group, "reo": overall}
        stages = reo_stage_table(
            counts, ds, level=est.confidence_level, stage_traffic=est.stage_traffic, buckets=buckets
        )
        if stages.height:
            out["reo_stage"] = stages
        if est.rsp:
            out["rsp"] = rsp_table(
                counts, ds, level=est.confidence_level, exclude=tuple(est.user_attributes), buckets=buckets
            )
        if est.user_attributes:
            out["user_precision"] = user_precision_table(
                counts, ds, est.user_attributes, level=est.confidence_level, buckets=buckets
            )
        arms = sorted(set(overall.get_column("arm").to_list()))
        pairs = ab_pairs(arms, ab.control, ab.pairs)
        if pairs:
            out["reo_ab"] = reo_ab_table(
                counts,
                ds,
                pairs,
                methods=tuple(ab.methods),
                level=est.confidence_level,
                folds=ab.partition_folds,
                n_boot=ab.bootstrap_resamples,
                seed=est.seed,
                buckets=buckets,
                cluster_by=cluster_name(cfg),
            )
    log.info(
        "estimators %s: %d count rows in, %s out, %.3fs",
        ds,
        counts.height,
        ", ".join(f"{k}={v.height}" for k, v in out.items()),
        time.perf_counter() - t0,
    )
    return out


def cluster_name(cfg: FairmonConfig) -> str:
    """The id that makes a cluster under ``[estimation] cluster_by`` (``auto``: request_id)."""
    by = cfg.estimation.cluster_by
    return "request_id" if by == "auto" else by


@step("estimate-envy")
def estimate_envy(cfg: FairmonConfig, ds: dt.date) -> dict[str, pl.DataFrame]:
    """The envy-freeness tables of day ``ds`` (DESIGN §4.7; seed 004): group
    envy per user attribute, per-user OCEF certificates and AUDIT's verdict,
    from every default and swap row since ``[envy] start`` in the files those
    days need now. Earlier days of the window not staged as they are now are
    staged first (a day run alone); a day whose files are missing or fail
    their raw suite contributes no rows (not rows staged from an earlier
    version of its files) and is named in the audit's design_reason.
    Returns {} before ``start``."""
    env = cfg.envy
    if env is None or ds < env.start:
        return {}
    log = run_logger()
    t0 = time.perf_counter()
    days = [env.start + dt.timedelta(days=i) for i in range((ds - env.start).days + 1)]
    missing = ensure_staged(cfg, days[:-1], str(ds))
    attrs = cfg.envy_attributes
    group_attr = env.group_attribute or cfg.impressions.attributes[0]
    with timing.clock(ds, "estimators"):
        with db.connect(cfg.duckdb_path) as con:
            if db.query(con, "envy_rows_exists").item() == 0:
                group_counts = pl.DataFrame(
                    schema={
                        "attribute": pl.String,
                        "group": pl.String,
                        "donor_group": pl.String,
                        "is_day": pl.Boolean,
                        "n": pl.Int64,
                        "n_pos": pl.Int64,
                    }
                )
                user_counts = pl.DataFrame(
                    schema={"user_id": pl.String, "donor": pl.String, "n": pl.Int64, "reward_sum": pl.Int64}
                )
            else:
                # a day whose files fail their checks now counts with none of its rows, not with stale ones
                con.register("envy_files", day_files(cfg, [d for d in days if d not in missing]))
                try:
                    window = {"start": env.start, "ds": ds}
                    group_counts = db.query(con, "envy_group_counts", group_attribute=group_attr, **window)
                    user_counts = db.query(con, "envy_user_counts", **window)
                finally:
                    con.unregister("envy_files")
        group_counts = group_counts.filter(pl.col("attribute").is_in(attrs))
        out = {
            "group_envy": group_envy_table(
                group_counts, ds, env.start, epsilon=env.epsilon, delta=env.delta, level=cfg.estimation.confidence_level
            )
        }
        out["envy_user"], audit = envy_user_tables(
            user_counts, ds, env.start, epsilon=env.epsilon, delta=env.delta, lam=env.lam, gamma=env.gamma
        )
        if missing:
            note = (
                f"{len(missing)} day(s) of the window left out (files missing or failing their checks): "
                + ", ".join(map(str, missing[:5]))
            )
            audit = audit.with_columns((pl.col("design_reason") + "; " + note).alias("design_reason"))
        out["envy_audit"] = audit
    log.info(
        "estimators %s: envy from %s, %d users, verdict %s, %.3fs",
        ds,
        env.start,
        out["envy_user"].height,
        audit.get_column("verdict").item(),
        time.perf_counter() - t0,
    )
    return out


def staged_query(con, table: str, query: str, empty: dict, **params) -> pl.DataFrame:
    """``sql/<query>.sql`` over the staging table ``table``, or an empty frame
    with the schema ``empty`` while that table does not exist yet."""
    if db.query(con, f"{table}_exists").item() == 0:
        return pl.DataFrame(schema=empty)
    return db.query(con, query, **params)


@step("estimate-threshold-prevalence")
def estimate_threshold(cfg: FairmonConfig, ds: dt.date) -> dict[str, pl.DataFrame]:
    """Prevalence at the threshold per model threshold × attribute × group over
    the trailing window, and the differences between groups (seed 002 §4-5.1)."""
    log = run_logger()
    t0 = time.perf_counter()
    sc = cfg.scores
    w0 = window_start(ds, sc.window_days)
    with timing.clock(ds, "estimators"):
        with db.connect(cfg.duckdb_path) as con:
            rows = staged_query(
                con,
                "scores",
                "scores_window",
                {
                    "model": pl.String,
                    "score": pl.Float64,
                    "outcome": pl.Boolean,
                    **{f"attr__{a}": pl.String for a in sc.attributes},
                },
                ds=ds,
                window_start=w0,
                files=current_files(cfg, "scores", ds),
            )
        prev, diff = threshold_tables(
            rows,
            ds,
            (w0, ds),
            [(t.model, t.t, t.d) for t in sc.thresholds],
            sc.attributes,
            level=cfg.estimation.confidence_level,
            hc=sc.hc,
            min_window_rows=sc.min_window_rows,
            ci=sc.ci,
        )
    log.info(
        "estimators %s: %d scored rows in, threshold_prevalence=%d, diffs=%d, %.3fs",
        ds,
        rows.height,
        prev.height,
        diff.height,
        time.perf_counter() - t0,
    )
    return {"threshold_prevalence": prev, "threshold_prevalence_diff": diff}


@step("estimate-sdt")
def estimate_sdt(cfg: FairmonConfig, ds: dt.date) -> dict[str, pl.DataFrame]:
    """Signal-detection metrics per attribute × group, pooled and per labeler,
    over the trailing window (seed 002 §5.3); confusion counts in SQL."""
    log = run_logger()
    t0 = time.perf_counter()
    lc = cfg.labels
    w0 = window_start(ds, lc.window_days)
    with timing.clock(ds, "estimators"):
        with db.connect(cfg.duckdb_path) as con:
            conf = staged_query(
                con,
                "labels",
                "sdt_counts",
                {
                    "attribute": pl.String,
                    "group": pl.String,
                    "labeler_id": pl.String,
                    "tp": pl.Int64,
                    "fn": pl.Int64,
                    "fp": pl.Int64,
                    "tn": pl.Int64,
                },
                ds=ds,
                window_start=w0,
                files=current_files(cfg, "labels", ds),
            )
        out = sdt_table(
            conf.filter(pl.col("group") != "(missing)"),
            ds,
            (w0, ds),
            level=cfg.estimation.confidence_level,
            min_pos=lc.min_pos,
            min_neg=lc.min_neg,
            min_errors=lc.min_errors,
        )
    log.info(
        "estimators %s: %d confusion rows in, sdt=%d, %.3fs", ds, conf.height, out.height, time.perf_counter() - t0
    )
    return {"sdt": out}


@step("estimate-reach")
def estimate_reach(cfg: FairmonConfig, ds: dt.date, snap: Snapshot) -> dict[str, pl.DataFrame]:
    """Reachability of every (user, target item), discovery per user,
    availability per item, stability per user beside the training-noise floor,
    and the group comparisons of one checked model snapshot (seed 003;
    DESIGN §4.8). Progress goes to the run log every 10 % of the users."""
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
            progress=tick,
        )  # fmt: skip
        users = reach_user_table(ds, problems, snap.users, snap.user_attributes, rc.beta, rc.budget)
        items = reach_item_table(ds, problems, snap.items, snap.item_attributes, rc.beta, rc.budget)
        budgets = [b for b in rc.stability_budgets if b < n_users]
        if len(budgets) < len(rc.stability_budgets):
            warn(
                "%s: stability budgets %s are not below the snapshot's %d users: left out",
                ds, sorted(set(rc.stability_budgets) - set(budgets)), n_users,
            )  # fmt: skip
        stability = (
            stability_table(
                ds, snap.history, snap.users, snap.items.height, snap.training, beta=rc.beta, budgets=budgets,
                perturbations=rc.perturbations, noise_seeds=rc.noise_seeds, r_min=rc.rating_min,
                r_max=rc.rating_max, seed=rc.seed,
            )
            if budgets
            else pl.DataFrame(schema=polars_schema("stability_user"))
        )  # fmt: skip
        groups = reach_group_table(
            ds,
            reach_group_inputs(users, items, stability, snap.user_attributes, snap.item_attributes),
            level=cfg.estimation.confidence_level,
            n_resamples=rc.bootstrap_resamples,
            seed=rc.seed,
        )
    log.info(
        "estimators %s: %d reachability problems, %d stability retrainings, reach_group=%d, %.1fs",
        ds,
        problems.height,
        len(budgets) * rc.perturbations + rc.noise_seeds + 1,
        groups.height,
        time.perf_counter() - t0,
    )
    return {"reach_user": users, "reach_item": items, "stability_user": stability, "reach_group": groups}
