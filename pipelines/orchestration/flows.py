"""Prefect flows: ingest a day's inputs, and the gated daily run.

Wiring only: reading/writing is in :mod:`fairmon.pipelines.ingest.adapters` and
:mod:`fairmon.pipelines.storage.warehouse`, data-quality suites in :mod:`fairmon.pipelines.checks.gate`
and ``expectations/``, SQL in ``sql/``, statistics in :mod:`fairmon.transforms`.

A day's run, for each configured input (impressions, scores, labels): ingest
(raw suite per file, then staging) -> counts -> checks -> estimators (REO and
A/B; prevalence at the threshold; SDT) -> output suites -> publish. A critical
data-quality failure quarantines the day: its metric partitions are left as
they were (not re-published), its ``dq_results`` partition records why, and
the flow ends in a failed state (:class:`DayQuarantined`) naming the failed
expectations. Every run is recorded in the ``runs`` table.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import json
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import nullcontext
from pathlib import Path

import polars as pl
from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.states import Failed

from fairmon.pipelines.checks.gate import DQResult, build_docs, dq_frame, gate_for
from fairmon.pipelines.core import timing
from fairmon.pipelines.core.config import FairmonConfig, load_config
from fairmon.pipelines.core.faults import fault_point
from fairmon.pipelines.core.run import active_run, ensure_run, ensured, frames_digest
from fairmon.pipelines.ingest.adapters import current_inputs, random_window_note, units_for_day, window_start
from fairmon.pipelines.ingest.snapshots import Snapshot, read_snapshot
from fairmon.pipelines.ingest.staging import (
    count_days,
    current_files,
    day_files,
    ensure_staged,
    ingest_source,
    peek_range_counts,
    recorded_results,
    run_logger,
    take_range_counts,
    warn,
)
from fairmon.pipelines.orchestration.heartbeat import beating
from fairmon.pipelines.storage import db
from fairmon.pipelines.storage.locking import project_lock
from fairmon.pipelines.storage.warehouse import clean_tmp, refresh_views, remove_partitions, write_partitions
from fairmon.transforms.contract import InputContractError
from fairmon.transforms.decisions.decision_tables import sdt_table, threshold_tables
from fairmon.transforms.envy.envy_tables import envy_user_tables, group_envy_table
from fairmon.transforms.gate_frames import (
    day_check_frame,
    group_counts_check_frame,
    reo_ab_check_frame,
    reo_check_frame,
)
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


class DayFailed(RuntimeError):
    """A day could not be computed; the message names the day, the stage and the input."""


class DayQuarantined(RuntimeError):
    """A critical data-quality expectation failed; the message names it."""


class DayResult(Mapping):
    """What :func:`daily` returns for a published day: a read-only mapping
    (``result["reo"]``, ``{**result}``, ``dict(result)``) that Prefect takes
    as one value. Prefect's flow engine walks a returned dict, list or
    dataclass object by object looking for futures
    (``prefect.utilities.collections.visit_collection``); a day's rows as
    dicts are thousands of objects with many groups (K = 4096: about 2 s a
    day), and this mapping is not one of the types it walks."""

    __slots__ = ("_items",)

    def __init__(self, items: dict) -> None:
        self._items = items

    def __getitem__(self, key: str):
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"DayResult({self._items!r})"


@flow(name="fairmon-ingest")
def ingest(config: FairmonConfig | str, ds: dt.date, force: bool = False) -> list[DQResult]:
    """Validate and stage every configured input that day ``ds`` needs (for
    impressions: its default traffic and the random traffic of its trailing
    window; for scores and labels: the days of their windows). Re-ingesting
    replaces. Returns one :class:`DQResult` per file. (The daily flow runs the
    same tasks inline rather than as a subflow, which costs about a second.)
    ``config`` is a loaded config or the path of one (loaded once)."""
    cfg = config if isinstance(config, FairmonConfig) else load_config(config)
    with ensure_run(cfg, "" if isinstance(config, FairmonConfig) else str(config)):
        results = [
            r
            for name in configured_inputs(cfg)
            for r in (
                read_snapshot(cfg, ds, gate_for(cfg), str(ds))[1]  # a snapshot is checked, never staged
                if name == "reach"
                else ingest_source(cfg, name, ds, force)
            )
        ]
        build_docs(cfg)
    return results


def configured_inputs(cfg: FairmonConfig) -> list[str]:
    """The inputs this config reads, in run order."""
    return [n for n in ("impressions", "scores", "labels", "reach") if getattr(cfg, n) is not None]


@task(name="count-groups", cache_policy=NO_CACHE)
def count_groups(cfg: FairmonConfig, ds: dt.date) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Per-group counts of day ``ds`` (sql/group_counts.sql), counted
    independently the staged rows per traffic and arm (sql/traffic_totals.sql),
    and the per-bucket counts of the cluster-robust variance (empty without
    clustering), from the rows of the files the day needs now; taken from
    :func:`prestage_impressions` when its backfill counted them and nothing
    was staged since."""
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


@task(name="check-day", cache_policy=NO_CACHE)
def check_day(cfg: FairmonConfig, ds: dt.date, counts: pl.DataFrame) -> DQResult:
    """The ``impressions_day`` suite on the day's counts (traffic present,
    positives per group, positive-rate bounds, random-traffic sufficiency)."""
    q = cfg.quality
    frame = day_check_frame(counts, q.sufficiency_epsilon, q.sufficiency_delta)
    params = {"positive_rate_min": q.positive_rate_min, "positive_rate_max": q.positive_rate_max}
    with timing.clock(ds, "checks"):
        result = gate_for(cfg).validate("impressions_day", frame, params, f"impressions {ds}", str(ds))
    return explain_random_traffic(cfg, ds, result)


def precheck_days(cfg: FairmonConfig, days: list[dt.date]) -> float:
    """Before a backfill's days run: the checks each day will make on its
    impressions counts and outputs (``impressions_day`` and the output suites
    of :func:`check_outputs`), computed now from the counts
    :func:`prestage_impressions` made ahead, in one GX run per suite for all
    the days (:meth:`fairmon.pipelines.checks.gate.QualityGate.validate_many`,
    same results as one run per day). Each day still computes its own
    estimates and makes its own checks; a check of the very frame checked
    here takes the result kept in the run, any other runs GX as before;
    likewise the estimates (:func:`estimate_ahead`). Nothing is published here
    and no day is decided here. Returns the estimators' wall seconds."""
    if cfg.impressions is None or not days:
        return 0.0
    q = cfg.quality
    day_params = {"positive_rate_min": q.positive_rate_min, "positive_rate_max": q.positive_rate_max}
    by_suite: dict[str, list[tuple[pl.DataFrame, str, str]]] = {}
    made: dict[dt.date, tuple[pl.DataFrame, list[str]]] = {}  # day -> its counts and the output tables it checks
    seconds = 0.0
    for ds in days:
        ready = peek_range_counts(ds)
        if ready is None:
            continue
        counts, totals, buckets = ready
        counts = counts.cast(GROUP_COUNTS_SCHEMA).select(list(GROUP_COUNTS_SCHEMA))
        try:  # only a shortcut: a day whose estimates fail here computes, checks and reports them itself
            frames = {"impressions_day": day_check_frame(counts, q.sufficiency_epsilon, q.sufficiency_delta)}
            est, took = estimate_ahead(cfg, counts, ds, buckets)
            seconds += took
            tables = {"group_counts": counts, **est}
            frames |= output_check_frames(tables, totals)
        except Exception as e:
            run_logger().info("%s: no checks ahead (%s: %s); the day checks itself", ds, type(e).__name__, e)
            continue
        made[ds] = (counts, list(tables))
        for name, frame in frames.items():
            subject = f"impressions {ds}" if name == "impressions_day" else name
            by_suite.setdefault(name, []).append((frame, subject, str(ds)))
    gate = gate_for(cfg)
    checked: dict[tuple[str, str], DQResult] = {}  # (suite, day) -> its result
    for suite, frames in by_suite.items():
        params = day_params if suite == "impressions_day" else {}
        for (_, _, ds), result in zip(frames, gate.validate_many(suite, frames, params, remember=True), strict=True):
            checked[(suite, ds)] = result
    dq = []
    for ds, (counts, outputs) in made.items():
        try:  # only a shortcut: a day whose frame cannot be built here checks its own
            frame = _dq_ahead(cfg, ds, counts, outputs, checked)
        except Exception as e:
            run_logger().info("%s: dq_results not checked ahead (%s: %s); the day checks it", ds, type(e).__name__, e)
            frame = None
        if frame is not None:
            dq.append((frame, "dq_results", str(ds)))
    if dq:
        gate.validate_many("dq_results", dq, {}, remember=True)
    return seconds


def _dq_ahead(
    cfg: FairmonConfig, ds: dt.date, counts: pl.DataFrame, outputs: list[str], checked: dict[tuple[str, str], DQResult]
) -> pl.DataFrame | None:
    """The dq_results frame day ``ds`` will publish, from what the checks
    ahead found (``counts``: the day's group counts; ``outputs``: the tables
    its output suites check, in :func:`output_check_frames`' order;
    ``checked``: (suite, day) -> result) and the recorded results of its
    staged files, built as :func:`_daily` builds it (the files' results,
    impressions_day, the [ab] warning, the output suites); None when it
    cannot be known ahead: inputs besides impressions, envy, a file not
    staged, a suite not checked ahead, or a critical failure (the day
    quarantines). Only a shortcut: the day checks its own frame, and takes
    the kept result only when that frame is identical (digest)."""
    day = str(ds)
    if configured_inputs(cfg) != ["impressions"] or cfg.envy is not None or ("impressions_day", day) not in checked:
        return None
    checks = [checked.get((name, day)) for name in outputs]
    if any(r is None for r in checks):
        return None
    units = units_for_day(cfg, ds)  # as units_for, without its warnings: the day itself warns
    known = recorded_results(cfg, "impressions", units)
    files = [known.get(u.file) for u in units]
    if any(f is None for f in files):
        return None
    results = [*files, explain_random_traffic(cfg, ds, checked[("impressions_day", day)])]
    results += _ab_config_check(cfg, counts) + checks
    if not all(r.success for r in results):
        return None
    return dq_frame(ds, results)


def explain_random_traffic(cfg: FairmonConfig, ds: dt.date, result: DQResult) -> DQResult:
    """Give a failed ``random_traffic_present`` the reason (``note``, shown in
    the quarantine message and dq_results details): the day's window, the
    pool policy and the pools it left out (DESIGN §2 "Random-traffic windows")."""
    for f in result.failures:
        if f["name"] == "random_traffic_present":
            try:
                f["note"] = random_window_note(cfg, ds)
            except InputContractError as e:
                f["note"] = str(e)
    return result


@task(name="estimate-reo", cache_policy=NO_CACHE)
def estimate(
    cfg: FairmonConfig, counts: pl.DataFrame, ds: dt.date, buckets: pl.DataFrame | None = None
) -> dict[str, pl.DataFrame]:
    """REO per group and overall, and the A/B differences between arms, from
    the counts (transforms.reo_tables), and when configured or present the seed 001
    extras (transforms.stage_tables). ``buckets``: the count stage's per-bucket
    counts when rows are clustered (cluster-robust intervals, transforms/reo/cluster.py).
    Returns {reo_group, reo[, reo_ab, reo_stage, rsp, user_precision]}."""
    log = run_logger()
    run = active_run()
    with run.lock if run else nullcontext():
        ahead = run.estimated.pop(ds, None) if run else None
    if ahead is not None and ahead[0] == _estimate_key(counts, ds, buckets):  # digest only when there is one
        log.info("estimators %s: taken from the backfill's checks ahead (same counts)", ds)
        return dict(ahead[1])
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


def estimate_ahead(
    cfg: FairmonConfig, counts: pl.DataFrame, ds: dt.date, buckets: pl.DataFrame | None
) -> tuple[dict[str, pl.DataFrame], float]:
    """:func:`estimate` for day ``ds`` before its run (a backfill's checks
    ahead), kept in the current run for the day's own estimate step, which
    takes it when its counts and buckets are the same frames (digest).
    Returns (the tables, the estimators' wall seconds). Raises what
    :func:`estimate` raises."""
    run = active_run()
    timing.start(ds)  # a book of its own for the day, closed here: the day's run opens a fresh one
    try:
        out = estimate.fn(cfg, counts, ds, buckets)
    finally:
        seconds = timing.take(ds)["estimators"]
    if run is not None:
        with run.lock:
            run.estimated[ds] = (_estimate_key(counts, ds, buckets), out)
    return out, seconds


def _estimate_key(counts: pl.DataFrame, ds: dt.date, buckets: pl.DataFrame | None) -> str:
    """What :func:`estimate`'s tables depend on besides the run's config: the day, its counts and buckets."""
    return frames_digest(counts, buckets, extra=str(ds))


def cluster_name(cfg: FairmonConfig) -> str:
    """The id that makes a cluster under ``[estimation] cluster_by`` (``auto``: request_id)."""
    by = cfg.estimation.cluster_by
    return "request_id" if by == "auto" else by


@task(name="estimate-envy", cache_policy=NO_CACHE)
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


@task(name="check-outputs", cache_policy=NO_CACHE)
def check_outputs(
    cfg: FairmonConfig, ds: dt.date, tables: dict[str, pl.DataFrame], totals: pl.DataFrame | None = None
) -> list[DQResult]:
    """The output suites (expectations/<table>.json) on the day's new rows.

    group_counts is checked against ``totals`` (rows staged per traffic and
    arm); reo gets its √(K−1) bound as a column first.
    """
    gate = gate_for(cfg)
    frames = output_check_frames(tables, totals)
    with timing.clock(ds, "checks"):
        return [gate.validate(name, frame, {}, name, str(ds)) for name, frame in frames.items()]


def output_check_frames(tables: dict[str, pl.DataFrame], totals: pl.DataFrame | None) -> dict[str, pl.DataFrame]:
    """The frames the output suites check, per table: group_counts beside
    ``totals``, reo with its √(K−1) bound, reo_ab with its undefined rows
    that lack a reason; the others as they are."""
    frames = dict(tables)
    if "group_counts" in frames:
        frames["group_counts"] = group_counts_check_frame(frames["group_counts"], totals)
    if "reo" in frames:
        frames["reo"] = reo_check_frame(frames["reo"])
    if "reo_ab" in frames:
        frames["reo_ab"] = reo_ab_check_frame(frames["reo_ab"])
    return frames


def _staged_query(con, table: str, query: str, empty: dict, **params) -> pl.DataFrame:
    """``sql/<query>.sql`` over the staging table ``table``, or an empty frame
    with the schema ``empty`` while that table does not exist yet."""
    if db.query(con, f"{table}_exists").item() == 0:
        return pl.DataFrame(schema=empty)
    return db.query(con, query, **params)


@task(name="estimate-threshold-prevalence", cache_policy=NO_CACHE)
def estimate_threshold(cfg: FairmonConfig, ds: dt.date) -> dict[str, pl.DataFrame]:
    """Prevalence at the threshold per model threshold × attribute × group over
    the trailing window, and the differences between groups (seed 002 §4-5.1)."""
    log = run_logger()
    t0 = time.perf_counter()
    sc = cfg.scores
    w0 = window_start(ds, sc.window_days)
    with timing.clock(ds, "estimators"):
        with db.connect(cfg.duckdb_path) as con:
            rows = _staged_query(
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


@task(name="estimate-sdt", cache_policy=NO_CACHE)
def estimate_sdt(cfg: FairmonConfig, ds: dt.date) -> dict[str, pl.DataFrame]:
    """Signal-detection metrics per attribute × group, pooled and per labeler,
    over the trailing window (seed 002 §5.3); confusion counts in SQL."""
    log = run_logger()
    t0 = time.perf_counter()
    lc = cfg.labels
    w0 = window_start(ds, lc.window_days)
    with timing.clock(ds, "estimators"):
        with db.connect(cfg.duckdb_path) as con:
            conf = _staged_query(
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


@task(name="publish-day", cache_policy=NO_CACHE)
def publish(cfg: FairmonConfig, ds: dt.date, tables: dict[str, pl.DataFrame], complete: bool = True) -> dict[str, str]:
    """Atomically replace the day's partitions of ``tables``; when the run
    ``complete``-ly publishes the day, also remove the day's partitions of
    tables it no longer produces. Then refresh the DuckDB views over the
    warehouse. Returns {table: partition path}."""
    log = run_logger()
    t0 = time.perf_counter()
    with timing.clock(ds, "writes"):
        try:
            paths = write_partitions(cfg.warehouse_path, ds, tables)
            if complete:
                removed = remove_partitions(cfg.warehouse_path, ds, set(tables))
                if removed:
                    log.info("publish %s: removed partitions of tables this run does not produce: %s", ds, removed)
        except BaseException:
            forget_warehouse()  # some files may have changed: the next refresh lists every partition again
            raise
        refresh_run_views(cfg, ds)
    log.info(
        "publish %s: %d rows out (%s), %.2fs",
        ds,
        sum(v.height for v in tables.values()),
        ", ".join(f"{k}={v.height}" for k, v in tables.items()),
        time.perf_counter() - t0,
    )
    return {k: str(v) for k, v in paths.items()}


def refresh_run_views(cfg: FairmonConfig, ds: dt.date | None = None) -> None:
    """Refresh the DuckDB views over the warehouse
    (:func:`fairmon.pipelines.storage.warehouse.refresh_views`), creating again
    only the views whose SQL changed since the current run's last refresh
    (``Run.views``; every view outside a run). ``ds``: the day just published,
    whose partitions are the only ones looked at again (``Run.partitions``).
    None (the run has just taken the project lock): what the run knew of the
    warehouse and its DuckDB file is forgotten first, and every partition is listed."""
    run = active_run()
    if ds is None:
        forget_warehouse()
    with db.connect(cfg.duckdb_path) as con:
        if run is None:
            refresh_views(con, cfg.warehouse_path)
            return
        with run.lock:
            refresh_views(con, cfg.warehouse_path, run.views, run.partitions, ds)


def forget_warehouse() -> None:
    """Forget what the current run knew of the warehouse and its DuckDB file
    (views created, partitions seen, DDL run), so that the next refresh
    lists and creates everything again: after the run takes the project lock
    (another process may have written meanwhile) or a publish that failed
    partway."""
    run = active_run()
    if run is not None:
        with run.lock:
            run.views.clear()
            run.partitions.clear()
            run.ensured.clear()


def _dq_table(cfg: FairmonConfig, ds: dt.date, results: list[DQResult]) -> pl.DataFrame:
    """The day's dq_results rows, checked by the dq_results suite."""
    frame = dq_frame(ds, results)
    with timing.clock(ds, "checks"):
        meta = gate_for(cfg).validate("dq_results", frame, {}, "dq_results", str(ds))
    if not meta.success:
        raise DayFailed(f"{ds}: stage dq_results: {meta.summary()}")
    return frame


def _quarantine(cfg: FairmonConfig, ds: dt.date, results: list[DQResult], stage: str, run_id: str) -> None:
    """Record why the day failed its checks (dq_results only) and end the run failed."""
    dq = _dq_table(cfg, ds, results).with_columns(pl.lit(run_id).alias("run_id"))
    publish(cfg, ds, {"dq_results": dq}, complete=False)
    with timing.clock(ds, "checks"):
        build_docs(cfg)
    failed = "; ".join(r.summary() for r in results if not r.success)
    raise DayQuarantined(f"{ds}: quarantined at stage {stage}: {failed}")


class _Stop(Exception):
    """A stage's critical check failed (internal: turns into a quarantine)."""


def _gate(results: list[DQResult], new: list[DQResult]) -> None:
    results += new
    if not all(r.success for r in new):
        raise _Stop


def _step(task, *args):
    """Run one step of a day (a Prefect task): as a task run of its own when
    the day is a flow run (``fairmon run``), or as a plain call inside a
    backfill's day, which is itself a task run (:func:`backfill_day`). Each
    nested task run costs Prefect's server a run, its states and its events:
    in a 14-day backfill the server's share of the two cores went mostly to
    recording 70 step runs while the days waited (bench/README "Issue 21").
    The step's seconds are in the day's timings either way (:mod:`fairmon.pipelines.core.timing`),
    and an error still fails the day's task run with its traceback."""
    run = active_run()
    if run is not None and run.artifacts is not None:
        return task.fn(*args)
    return task(*args)


def _impressions_stage(cfg: FairmonConfig, ds: dt.date, force: bool, results: list[DQResult]) -> dict:
    _gate(results, ingest_source(cfg, "impressions", ds, force))
    counts, totals, buckets = _step(count_groups, cfg, ds)
    _gate(results, [_step(check_day, cfg, ds, counts)])
    tables = {"group_counts": counts, **_step(estimate, cfg, counts, ds, buckets)}
    if cfg.envy is not None:
        tables |= _step(estimate_envy, cfg, ds)
    results += _ab_config_check(cfg, counts)
    _gate(results, _step(check_outputs, cfg, ds, tables, totals))
    return tables


def _ab_config_check(cfg: FairmonConfig, counts: pl.DataFrame) -> list[DQResult]:
    """A warning (in dq_results and the run summary) when ``[ab] control`` or a
    configured pair names an arm the day's default traffic does not have: the
    A/B comparison it asks for cannot be made, and must not vanish silently."""
    arms = set(counts.filter(pl.col("traffic") == "default").get_column("arm").to_list())
    wanted = ([cfg.ab.control] if cfg.ab.control else []) + [a for p in cfg.ab.pairs for a in p]
    missing = sorted({a for a in wanted if a not in arms})
    if not missing or not arms:
        return []
    failure = {
        "name": "ab_arm_present",
        "severity": "warning",
        "type": "config",
        "column": "arm",
        "unexpected_count": len(missing),
        "rows": [],
        "sample": missing,
        "error": f"[ab] names arm(s) {missing} that the day's default traffic does not have (arms: {sorted(arms)})",
    }
    return [DQResult("reo_ab", "ab_config", "[ab] control/pairs", 1, [failure])]


def _scores_stage(cfg: FairmonConfig, ds: dt.date, force: bool, results: list[DQResult]) -> dict:
    _gate(results, ingest_source(cfg, "scores", ds, force))
    tables = _step(estimate_threshold, cfg, ds)
    _gate(results, _step(check_outputs, cfg, ds, tables))
    return tables


def _labels_stage(cfg: FairmonConfig, ds: dt.date, force: bool, results: list[DQResult]) -> dict:
    _gate(results, ingest_source(cfg, "labels", ds, force))
    tables = _step(estimate_sdt, cfg, ds)
    _gate(results, _step(check_outputs, cfg, ds, tables))
    return tables


@task(name="estimate-reach", cache_policy=NO_CACHE)
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


def _reach_stage(cfg: FairmonConfig, ds: dt.date, force: bool, results: list[DQResult]) -> dict:
    with timing.clock(ds, "checks"):
        snap, checked = read_snapshot(cfg, ds, gate_for(cfg), str(ds))
    _gate(results, checked)
    tables = _step(estimate_reach, cfg, ds, snap)
    _gate(results, _step(check_outputs, cfg, ds, tables))
    return tables


STAGES = {"impressions": _impressions_stage, "scores": _scores_stage, "labels": _labels_stage, "reach": _reach_stage}


def _start_run(
    cfg: FairmonConfig, config_path: str, run_id: str, ds: dt.date, started: dt.datetime, params: dict
) -> str:
    """Record the run as 'running' with the inputs the day needs now (file
    identities and fingerprints, :func:`fairmon.pipelines.ingest.adapters.current_inputs`).
    Returns those inputs as recorded (JSON), for :func:`_finish_run`."""
    inputs = json.dumps(current_inputs(cfg, ds), default=str)
    with db.connect(cfg.duckdb_path) as con:
        db.ensure(con, ("runs_create", "runs_migrate"), ensured())
        db.execute(
            con,
            "runs_start",
            run_id=run_id,
            ds=ds,
            started_at=started,
            config_path=str(config_path),
            config_fp=cfg.fingerprint(),
            params=json.dumps(params, default=str),
            inputs=inputs,
        )
    return inputs


def _finish_run(
    cfg: FairmonConfig,
    run_id: str,
    ds: dt.date,
    recorded: str,
    status: str,
    detail: str,
    outputs: dict[str, int],
    timings: dict,
) -> None:
    """Close the run's record (status, detail, outputs, timings; its inputs,
    ``recorded`` by :func:`_start_run`, gain the file rows each staged); a
    published day is no longer stale."""
    with db.connect(cfg.duckdb_path) as con:
        db.ensure(con, ("stale_create", "ingest_log_create"), ensured())
        inputs = json.loads(recorded)
        staged = dict(db.rows(con, "ingest_log_rows", files=[i["file"] for i in inputs]))
        inputs = [{**i, "rows": staged.get(i["file"])} for i in inputs]
        db.execute(
            con,
            "runs_finish",
            run_id=run_id,
            status=status,
            detail=detail,
            inputs=json.dumps(inputs, default=str),
            outputs=json.dumps(outputs),
            timings=json.dumps(timings),
        )
        if status == "published":
            db.execute(con, "stale_clear", ds=ds)


@flow(name="fairmon-daily", flow_run_name="fairmon-daily/{ds}")
def daily(config: FairmonConfig | str, ds: dt.date, force_ingest: bool = False, wait_seconds: float = 0.0) -> DayResult:
    """One day end to end, gated, for every configured input: ingest -> counts
    -> checks -> estimators -> checks -> publish. A critical failure anywhere
    quarantines the whole day (dq_results are written, no metric is published).
    The run holds the DuckDB file's run lock throughout (waiting up to
    ``wait_seconds`` for another process) and one connection to it
    (:func:`fairmon.pipelines.storage.db.session`), and is recorded in ``runs`` with its
    inputs' fingerprints, parameters and stage timings.

    ``config`` is the run's loaded config (the runner loads it once for all
    its days) or the path of one (loaded once, for a direct call). The day
    joins the current run (:mod:`fairmon.pipelines.core.run`) or opens its own.

    Returns a :class:`DayResult` mapping {ds, run_id, reo, reo_ab, threshold_prevalence, sdt (rows as dicts,
    empty when not configured), dq, paths, data_docs, timings (wall seconds per
    stage, :mod:`fairmon.pipelines.core.timing`; also stored in ``runs``)}. Raises
    :class:`DayQuarantined` on a critical data-quality failure,
    :class:`DayFailed` when the day cannot be computed (naming the stage and
    input) and :class:`RunLockedError` when another run holds the file.
    """
    with beating():
        return run_day(config, ds, force_ingest, wait_seconds)


@task(name="fairmon-day", task_run_name="fairmon-daily/{ds}", cache_policy=NO_CACHE)
def backfill_day(
    config: FairmonConfig, ds: dt.date, force_ingest: bool = False, wait_seconds: float = 0.0
) -> DayResult:
    """:func:`daily` as a task run of a backfill's parent flow run
    (``fairmon-backfill/<start>..<end>``), named ``fairmon-daily/<ds>``, with
    the same steps (plain calls here, not task runs: :func:`_step`),
    artifacts, states, timings and result. A flow
    run per day costs its API round trips to Prefect's server (create the run,
    its tracking task run in the parent, its states): 0.15 s for an empty
    subflow and 1.3-1.8 s with five tasks, as the server records the earlier
    days' task events meanwhile (bench/README "Issue 21, third steps"); a
    task run reports its states as events and does not wait."""
    return run_day(config, ds, force_ingest, wait_seconds)


def run_day(config: FairmonConfig | str, ds: dt.date, force_ingest: bool, wait_seconds: float):
    """The body of :func:`daily` and :func:`backfill_day`: the day in the
    current run (or a run of its own), its artifacts when published. Returns
    the :class:`DayResult`, or a failed Prefect state named ``Quarantined``
    (carrying the :class:`DayQuarantined`) when the gate stopped the day."""
    cfg = config if isinstance(config, FairmonConfig) else load_config(config)
    with ensure_run(cfg, "" if isinstance(config, FairmonConfig) else str(config)) as run:
        try:
            result = _daily(run.cfg, run.config_path, ds, force_ingest, wait_seconds)
        except DayQuarantined as e:  # an outcome of the gate, not a crash: a named state, no traceback
            return Failed(name="Quarantined", message=str(e), data=e)
        if run.artifacts is not None:  # a backfill: recorded meanwhile, in the day's own Prefect context
            done = run.artifacts.submit(contextvars.copy_context().run, day_artifacts, ds, result)
            done.add_done_callback(lambda f: _warn_if_failed(f, f"{ds}: Prefect artifacts not recorded"))
        else:
            day_artifacts(ds, result)
    return DayResult(result)


def _warn_if_failed(future, what: str) -> None:
    """A warning naming ``what`` and the error when ``future`` (background work that must not fail the day) raised."""
    if future.exception() is not None:
        warn("%s: %s", what, future.exception())


def day_artifacts(ds: dt.date, result: dict) -> None:
    """Prefect artifacts of a published day, under stable keys (re-runs of the
    day add versions of the same artifact): ``fairmon-reo-<ds>``, a table of
    REO per arm × attribute with its CI and verdict, and
    ``fairmon-outputs-<ds>``, a link to the day's reo partition (the other
    tables sit beside it) and the Data Docs. Best effort: a failure to record
    them is logged, never fails the day."""
    from prefect.artifacts import create_link_artifact, create_table_artifact

    rows = [
        {
            "arm": r["arm"],
            "attribute": r["attribute"],
            "K": r["K"],
            "REO": round(r["reo"], 4) if r["reo"] == r["reo"] else None,
            "CI": f"[{r['ci_low']:.4f}, {r['ci_high']:.4f}]" if r["ci_low"] == r["ci_low"] else "undefined",
            "verdict": r["verdict_80pct"],
            "reason": r.get("reason") or "",
        }
        for r in result.get("reo", [])
    ]
    key = ds.isoformat()
    try:
        if rows:
            create_table_artifact(rows, key=f"fairmon-reo-{key}", description=f"REO and verdicts for {ds}")
        reo_path = result.get("paths", {}).get("reo")
        if reo_path:
            create_link_artifact(
                Path(reo_path).resolve().as_uri(),
                link_text=f"reo partition for {ds}",
                key=f"fairmon-outputs-{key}",
                description=f"Data Docs: {result.get('data_docs', '')}",
            )
    except Exception as e:  # artifacts are a convenience: the day is published either way
        run_logger().warning("%s: Prefect artifacts not recorded: %s", ds, e)


def _daily(cfg: FairmonConfig, config_path: str, ds: dt.date, force_ingest: bool, wait_seconds: float) -> dict:
    run_id = uuid.uuid4().hex
    started = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    params = {
        "ds": ds,
        "force_ingest": force_ingest,
        "estimation": cfg.estimation.model_dump(),
        "ab": cfg.ab.model_dump(),
        "quality": cfg.quality.model_dump(),
    }
    if cfg.impressions is not None:  # which random traffic the day used (DESIGN §2 "Random-traffic windows")
        params["random_window"] = {
            "random_window_days": cfg.impressions.random_window_days,
            "pool_policy": cfg.impressions.pool_policy,
        }
    results: list[DQResult] = []
    tables: dict[str, pl.DataFrame] = {}
    status, detail = "failed", ""
    with project_lock(cfg.duckdb_path, cfg.warehouse_path, wait_seconds) as fresh, db.session(cfg.duckdb_path):
        if fresh:  # nothing else writes this warehouse now: a killed run's leftovers can go
            clean_tmp(cfg.warehouse_path, older_than_s=0)
            refresh_run_views(cfg)  # views over what the warehouse holds now
        timing.start(ds)
        recorded = _start_run(cfg, config_path, run_id, ds, started, params)
        try:
            for name in configured_inputs(cfg):
                try:
                    tables.update(STAGES[name](cfg, ds, force_ingest, results))
                except InputContractError as e:
                    raise DayFailed(f"{ds}: stage {name} ingest: {e}") from e
                except _Stop:
                    tables = {}
                    _quarantine(cfg, ds, results, name, run_id)
            dq = _dq_table(cfg, ds, results)
            stamped = {
                k: v.with_columns(pl.lit(run_id).alias("run_id")) for k, v in {**tables, "dq_results": dq}.items()
            }
            paths = _step(publish, cfg, ds, stamped)  # metrics first, dq_results last
            fault_point("publish_record")
            with timing.clock(ds, "checks"):
                docs = build_docs(cfg)
            status = "published"
            rows = {
                k: tables[k].to_dicts() if k in tables else []
                for k in ("reo", "reo_ab", "threshold_prevalence", "sdt", "envy_audit")
            }
            return {
                "ds": ds,
                "run_id": run_id,
                **rows,
                "dq": dq.to_dicts(),
                "paths": paths,
                "data_docs": str(docs),
                "timings": timing.book(ds),
            }
        except DayQuarantined as e:
            status, detail = "quarantined", str(e)
            raise
        except Exception as e:
            detail = f"{type(e).__name__}: {e}"
            run_logger().error("%s: run failed: %s", ds, detail)
            raise
        finally:
            outputs = {k: v.height for k, v in tables.items()}
            _finish_run(cfg, run_id, ds, recorded, status, detail, outputs, timing.take(ds))
