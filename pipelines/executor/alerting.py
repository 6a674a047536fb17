"""The alerts of a project, brought up to date after every run (DESIGN §4.9).

The ``alerts`` table is a function of the project's history: the published
days' ``reo`` and ``reo_ab`` rows, each day's latest run status and the
privacy ledger (:func:`fairmon.transforms.alerts.alert_tables.alerts_table`).
So after every run (a day, a backfill, an audit release) the whole history is
read again and only the days whose alerts changed are written: a re-run or a
backfill in any order gives the same rows with the same ids, and an alert
keeps the time it was first seen and its delivery state across re-runs.
New alerts and alerts whose notification failed are sent (Apprise URLs,
Prefect events) before they are written; nothing here ever fails a day.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass, field

import polars as pl

from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.executor.notify import (
    NOT_A_URL,
    delivery_state,
    describe,
    emit_events,
    prefect_events_on,
    send,
)
from fairmon.pipelines.executor.publishing import refresh_run_views
from fairmon.pipelines.ingest.staging import run_logger
from fairmon.pipelines.storage import db
from fairmon.pipelines.storage.ledger_store import read_releases
from fairmon.pipelines.storage.warehouse import read_table, remove_partition, run_times, write_partitions
from fairmon.transforms.alerts.alert_tables import ALERTS_SCHEMA, AlertRules, alerts_table, open_alerts


@dataclass
class AlertsUpdate:
    """What one update did: the alerts first seen now (``new``, dicts of
    ``alerts`` rows), the days written or cleared, and how many alerts are
    still waiting for a notification that failed (``undelivered``)."""

    new: list[dict] = field(default_factory=list)
    days: list[dt.date] = field(default_factory=list)
    undelivered: int = 0


def rules_of(cfg: FairmonConfig) -> AlertRules:
    """The :class:`AlertRules` of config ``cfg`` (``[alerts]``, ``[audit]``, ``[ab]``, the project name)."""
    a = cfg.alerts
    return AlertRules(
        alpha=a.alpha,
        horizon_days=a.horizon_days,
        budget_low_share=a.budget_low_share,
        total_epsilon=cfg.audit.total_epsilon,
        ab_method=cfg.ab.methods[0] if cfg.ab.methods else "delta",
        project=cfg.project_name,
    )


def history(cfg: FairmonConfig) -> dict[str, pl.DataFrame]:
    """What the alerts read: from the project's DuckDB file (its views over
    the warehouse, refreshed by the run) reo, reo_ab and runs; the privacy
    ledger from its record in the warehouse
    (:func:`fairmon.pipelines.storage.ledger_store.read_releases`). Raises
    what DuckDB raises, OSError."""
    with db.connect(cfg.duckdb_path) as con:
        db.ensure(con, ("runs_create", "runs_migrate"))
        return {
            "reo": db.query(con, "alerts_reo"),
            "reo_ab": db.query(con, "alerts_ab"),
            "runs": db.query(con, "alerts_runs"),
            # the ledger's record, in the warehouse (a deleted DuckDB file forgets no budget_low)
            "ledger": read_releases(cfg.warehouse_path).select("dataset", "released_at", "epsilon"),
        }


def carried_over(fresh: pl.DataFrame, old: pl.DataFrame, now: str) -> tuple[pl.DataFrame, set[str]]:
    """``fresh`` alerts with the first-seen time and delivery state of the
    same alert in ``old`` (the warehouse's), ``now`` for the others, and the
    ids of the fresh alerts that take over an old one. The same alert: the
    same ``alert_id``, or, when days were run out of order, an old alert of
    the same kind and subject raised inside the fresh one's episode (from its
    day to the subject's next alert): the condition was already announced,
    only its first day moved earlier. Both frames in :data:`ALERTS_SCHEMA`;
    ``now`` ISO 8601 UTC text. Raises polars' errors for other frames."""
    kept = old.select("alert_id", "first_seen_at", "delivered", "delivery")
    out = fresh.drop("first_seen_at", "delivered", "delivery").join(kept, on="alert_id", how="left")
    taken: set[str] = set()
    if old.height:
        rows = out.to_dicts()
        for i, r in enumerate(rows):
            if r["first_seen_at"] is not None:
                continue
            later = [x["ds"] for x in rows if x["subject"] == r["subject"] and x["ds"] > r["ds"]]
            end = min(later, default=dt.date.max)
            same = old.filter(
                (pl.col("kind") == r["kind"]) & (pl.col("subject") == r["subject"])
                & (pl.col("ds") >= r["ds"]) & (pl.col("ds") < end)
            ).sort("first_seen_at")  # fmt: skip
            if same.height:
                rows[i] |= {k: same[k][0] for k in ("first_seen_at", "delivered", "delivery")}
                taken.add(r["alert_id"])
        out = pl.DataFrame(rows, schema=out.schema)
    out = out.with_columns(pl.col("first_seen_at").fill_null(now))
    return out.select(list(ALERTS_SCHEMA)).cast(ALERTS_SCHEMA), taken


def _deliver(cfg: FairmonConfig, frame: pl.DataFrame, new_ids: set[str]) -> pl.DataFrame:
    """Send what is due (:func:`fairmon.pipelines.executor.notify.send`: the
    ``new_ids`` alerts to every target, the others to the targets that failed
    them) and record the outcome on each row; Prefect events for the
    ``new_ids`` alerts. ``delivered``: no notification of the alert is pending."""
    urls, project = cfg.alerts.notify, cfg.project_name
    if new_ids and prefect_events_on():
        emit_events((r for r in frame.iter_rows(named=True) if r["alert_id"] in new_ids), project)
    delivered, delivery = [], []
    failed: dict[str, list[str]] = {}  # target name -> the alerts it did not get (said once a run, not an alert)
    causes: dict[str, str] = {}  # target name -> Apprise's last reason, the URL masked
    caught_up = 0
    for r in frame.iter_rows(named=True):
        state = before = delivery_state(r["delivery"])
        if urls:
            state = send(urls, r, project, state, r["alert_id"] in new_ids, causes)
            for n, ok in state.items():
                if not ok:
                    failed.setdefault(n, []).append(r["alert_id"])
            caught_up += any(not before.get(n, True) and ok for n, ok in state.items())
        delivered.append(all(state.values()))
        delivery.append(json.dumps(state) if state else None)
    for name, ids in failed.items():
        cause = causes.get(name, "").rstrip(".")
        when = "once [alerts] notify is mended" if cause == NOT_A_URL else "again on the next run"
        target = describe(int(name[7:-1]), urls[int(name[7:-1])])
        run_logger().warning(
            "alerts: %d not delivered to %s (%s%s)%s; each will be sent %s",
            len(ids), target, ", ".join(ids[:5]), ", ..." if len(ids) > 5 else "", f": {cause}" if cause else "", when,
        )  # fmt: skip
    if caught_up:
        run_logger().info("alerts: %d whose notification had failed delivered now", caught_up)
    return frame.with_columns(pl.Series("delivered", delivered, pl.Boolean), pl.Series("delivery", delivery, pl.String))


def _changed_days(new: pl.DataFrame, old: pl.DataFrame) -> list[dt.date]:
    """The days whose rows differ between ``new`` and ``old`` (both in :data:`ALERTS_SCHEMA`)."""
    days = set(new.get_column("ds").to_list()) | set(old.get_column("ds").to_list())
    out = []
    for ds in sorted(days):
        a = new.filter(pl.col("ds") == ds).sort("alert_id")
        b = old.filter(pl.col("ds") == ds).sort("alert_id")
        if a.height != b.height or not a.equals(b):
            out.append(ds)
    return out


def _gate(cfg: FairmonConfig, parts: dict[dt.date, pl.DataFrame]) -> set[dt.date]:
    """The days whose alerts pass the ``alerts`` suite (generated checks and
    expectations/alerts.json); a failing day keeps its previous alerts."""
    from fairmon.pipelines.executor.day_checks import check_outputs

    checked = check_outputs(cfg, {ds: {"alerts": f} for ds, f in parts.items() if f.height})
    bad = {ds for ds, rs in checked.items() if not all(r.success for r in rs)}
    for ds in sorted(bad):
        run_logger().error("alerts of %s failed their checks and were not written: %s", ds, checked[ds])
    return set(parts) - bad


def _stored(old: pl.DataFrame) -> pl.DataFrame:
    """The warehouse's alerts in :data:`ALERTS_SCHEMA` (a column an older
    fairmon did not write is null; ``run_id`` dropped)."""
    if old.is_empty():
        return pl.DataFrame(schema=ALERTS_SCHEMA)
    missing = [pl.lit(None).alias(c) for c in ALERTS_SCHEMA if c not in old.columns]
    return old.with_columns(missing).select(list(ALERTS_SCHEMA)).cast(ALERTS_SCHEMA)


def update_alerts(cfg: FairmonConfig, known=None, now: dt.datetime | None = None) -> AlertsUpdate:
    """Bring the ``alerts`` table of ``cfg``'s warehouse up to date with its
    history (module docstring): compute every alert, keep what the warehouse
    knew of each (first seen, delivery), send what is due, and replace the
    partitions of the days that changed (gated; a day without alerts loses
    its partition), then the DuckDB views (``known``: the run's
    :class:`fairmon.pipelines.executor.publishing.WarehouseViews`, None:
    nothing recorded, every view checked). The caller holds the project lock. Returns an
    :class:`AlertsUpdate`. Raises what reading the history or writing raises
    (callers log it: alerts never fail a run)."""
    out = AlertsUpdate()
    if not cfg.alerts.enabled:
        return out
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    if known is None:  # outside a run (an audit release): the views may be missing
        refresh_run_views(cfg)
    old = _stored(read_table(cfg.warehouse_path, "alerts"))
    fresh, taken = carried_over(alerts_table(**history(cfg), rules=rules_of(cfg)), old, stamp)
    # gated before anything goes out: a day whose alerts fail their checks keeps its previous ones
    parts = {ds: fresh.filter(pl.col("ds") == ds) for ds in _changed_days(fresh, old)}
    bad = set(parts) - (_gate(cfg, parts) if any(f.height for f in parts.values()) else set(parts))
    if bad:
        fresh = pl.concat([fresh.filter(~pl.col("ds").is_in(list(bad))), old.filter(pl.col("ds").is_in(list(bad)))])
    seen = set(old.get_column("alert_id").to_list())
    new_ids = set(fresh.get_column("alert_id").to_list()) - seen - taken
    fresh = _deliver(cfg, fresh, new_ids)
    run_id = uuid.uuid4().hex
    for ds in _changed_days(fresh, old):
        rows = fresh.filter(pl.col("ds") == ds)
        if rows.height:
            write_partitions(cfg.warehouse_path, ds, {"alerts": rows.with_columns(pl.lit(run_id).alias("run_id"))})
        else:
            remove_partition(cfg.warehouse_path, "alerts", ds)
        out.days.append(ds)
    if out.days:
        refresh_run_views(cfg, out.days[-1], known)
    out.new = [r for r in fresh.iter_rows(named=True) if r["alert_id"] in new_ids]
    out.undelivered = int((~fresh.get_column("delivered")).sum())
    return out


def update_alerts_logged(cfg: FairmonConfig, known=None) -> AlertsUpdate | None:
    """:func:`update_alerts`, its failure logged instead of raised (a run's
    days are published whatever happens to their alerts). None on failure."""
    try:
        return update_alerts(cfg, known)
    except Exception as e:
        run_logger().error("alerts not updated (%s: %s); the next run tries again", type(e).__name__, e)
        return None


def still_open_alerts(cfg: FairmonConfig, alerts: pl.DataFrame) -> tuple[dict[str, list[dt.date]], set[dt.date]] | None:
    """(the ids of ``alerts`` still open, each with the days of its quarantined or failed episode not
    published yet (empty for the other kinds), on the latest day run or alerted (as the report's top says: an
    ``exceeds`` not yet followed by ``back_within``, a run of quarantined or failed days not all published and
    no later day published after they failed, ...), so a listed alert that a later run closed says so; the
    days whose latest run published, so a closed quarantined alert whose own day is not among them is said
    to be a gap a later day's publication closed), from one read of the run history
    (``sql/alerts_run_times.sql``). None when it cannot be read now (a run holds the DuckDB file)."""
    import duckdb

    if alerts.is_empty():
        return {}, set()
    try:
        published, bad = run_times(cfg.duckdb_path)
    except (duckdb.Error, OSError):
        return None
    now = max({*published, *bad, alerts["ds"].max()})  # the latest day run or alerted: "open now", not then
    still = open_alerts(alerts.drop("run_id"), now, published, bad)
    return {a["alert_id"]: a.get("waiting", []) for a in still}, set(published)
