"""The HTML report: one self-contained file (inline SVG plots, inline CSS, no
network), built only from days whose data passed the checks. The page is the
package-data Jinja template ``html/report.html.j2``; figures come from
:mod:`fairmon.pipelines.report.report_figures`, tables from
:mod:`fairmon.pipelines.report.report_sections`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from functools import cache
from importlib.resources import files
from pathlib import Path

import polars as pl
from jinja2 import Environment

from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.report.report_data import (
    ReportData,
    envy_findings,
    labeler_finding,
    prevalence_finding,
    reach_findings,
    reo_verdict_paragraphs,
    report_data,
)
from fairmon.pipelines.report.report_figures import (
    ab_figure,
    arm_colors,
    ci_label,
    delta_u_figure,
    fmt,
    labeler_threshold_figure,
    model_threshold_figure,
    reach_group_figure,
    reo_figure,
)
from fairmon.pipelines.report.report_points import ab_point_figure, reo_point_figure
from fairmon.pipelines.report.report_sections import extra_sections, generic_sections, own_section, stage_reading
from fairmon.pipelines.report.report_words import AB_TONE, GLOSSARY, ab_effect, headline_sentences, pfmt
from fairmon.pipelines.storage.warehouse import latest_runs, read_table, run_times
from fairmon.transforms.alerts.alert_tables import open_alerts
from fairmon.transforms.alerts.words import status_words
from fairmon.transforms.registry import TABLES

__all__ = ["audit_releases", "build_report", "render_report", "stage_reading"]


@cache
def report_template() -> str:
    """The report's Jinja template (package data ``fairmon/pipelines/report/html/report.html.j2``)."""
    return (files("fairmon.pipelines.report") / "html" / "report.html.j2").read_text(encoding="utf-8")


def _decision_context(d: ReportData, prevalence_diff: pl.DataFrame | None) -> dict:
    """Template variables of the decision sections (threshold prevalence,
    labelers' SDT; seed 002): figures, the latest day's rows, the outlying
    labelers and the findings."""
    from markupsafe import Markup

    model_fig = model_threshold_figure(d.threshold_prevalence) if not d.threshold_prevalence.is_empty() else None
    labeler_fig = labeler_threshold_figure(d.sdt) if not d.sdt.is_empty() else None
    outliers = []
    if not d.sdt.is_empty():
        last = d.sdt.filter(pl.col("ds") == d.sdt.get_column("ds").max())
        pool = last.filter(pl.col("labeler_id") == "*").select("attribute", "group", pl.col("cost_ratio").alias("pool"))
        outliers = (
            last.filter((pl.col("labeler_id") != "*") & (pl.col("q_value") < 0.05))
            .join(pool, on=["attribute", "group"], how="left")
            .sort("q_value")
            .to_dicts()
        )
    prev_day = d.threshold_prevalence.get_column("ds").max() if not d.threshold_prevalence.is_empty() else None
    prevalence_rows = (
        d.threshold_prevalence.filter(pl.col("ds") == prev_day).sort("model", "attribute", "group").to_dicts()
        if prev_day is not None
        else []
    )
    diffs = prevalence_diff if prevalence_diff is not None else pl.DataFrame()
    prevalence_diffs = (
        diffs.filter(pl.col("ds") == prev_day).sort("model", "attribute", "group_a", "group_b").to_dicts()
        if prev_day is not None and not diffs.is_empty()
        else []
    )
    sdt_day = d.sdt.get_column("ds").max() if not d.sdt.is_empty() else None
    labeler_rows = (
        d.sdt.filter(pl.col("ds") == sdt_day).sort("attribute", "labeler_id", "group").to_dicts()
        if sdt_day is not None
        else []
    )
    return {
        "model_fig": Markup(model_fig) if model_fig else None,
        "labeler_fig": Markup(labeler_fig) if labeler_fig else None,
        "outliers": outliers,
        "sdt_ci": f"{100 * float(d.sdt.get_column('level').max()):g}% CI"
        if not d.sdt.is_empty() and "level" in d.sdt.columns
        else "CI",
        "prevalence_findings": prevalence_finding(d.threshold_prevalence),
        "prevalence_rows": prevalence_rows,
        "prevalence_diffs": prevalence_diffs,
        "prev_ci": ci_label(d.threshold_prevalence) if prevalence_rows else "CI",
        "labeler_findings": labeler_finding(d.sdt),
        "labeler_rows": labeler_rows,
    }


def _envy_context(d: ReportData) -> dict:
    """Template variables of the envy-freeness section (seed 004): the AUDIT
    days, the latest day's group envy and the findings."""
    envy_audit = (d.extras or {}).get("envy_audit", pl.DataFrame())
    group_envy = (d.extras or {}).get("group_envy", pl.DataFrame())
    summary = (d.extras or {}).get("envy_summary", pl.DataFrame())
    envy_groups = (
        group_envy.filter(pl.col("ds") == group_envy.get_column("ds").max())
        .sort("attribute", "group", "donor_group")
        .to_dicts()
        if not group_envy.is_empty()
        else []
    )
    return {
        "envy_findings": envy_findings(envy_audit, group_envy, summary),
        "envy_days": envy_audit.sort("ds").to_dicts() if not envy_audit.is_empty() else [],
        "envy_groups": envy_groups,
    }


def _reach_context(d: ReportData) -> dict:
    """Template variables of the reachability and stability section (seed
    003): the latest day's group figures and rows and the findings."""
    from markupsafe import Markup

    reach = {
        t: (d.extras or {}).get(t, pl.DataFrame())
        for t in ("reach_item", "reach_user", "stability_user", "reach_group", "reach_beta")
    }
    reach_day = reach["reach_group"].get_column("ds").max() if not reach["reach_group"].is_empty() else None
    reach_figs: dict[str, str | None] = {"item": None, "user": None, "stability": None}
    reach_rows = []
    if reach_day is not None:
        rg = reach["reach_group"].filter(pl.col("ds") == reach_day)
        ri = reach["reach_item"].filter(pl.col("ds") == reach_day) if not reach["reach_item"].is_empty() else None
        uniform = ri.get_column("availability_uniform").mean() if ri is not None and ri.height else None
        if rg.filter(pl.col("side") == "item").height:
            reach_figs["item"] = reach_group_figure(rg, "item", ["availability_base", "availability_max"], uniform)
        stab = sorted(
            (m for m in set(rg.get_column("metric")) if m.startswith("stability_lb_B")), key=lambda m: int(m[14:])
        )
        if rg.filter(pl.col("side") == "user").height:
            reach_figs["user"] = reach_group_figure(rg, "user", ["discovery_base", "discovery_max"])
            if stab:
                reach_figs["stability"] = reach_group_figure(rg, "user", [*stab, "noise_floor"])
        shown = ["availability_max", "unavailable", "discovery_max", *stab[-1:], "noise_floor"]
        reach_rows = rg.filter(pl.col("metric").is_in(shown)).sort("side", "attribute", "metric", "group").to_dicts()
    return {
        "reach_findings": reach_findings(
            reach["reach_item"], reach["reach_user"], reach["stability_user"], reach["reach_group"]
        ),
        "reach_day": reach_day,
        "reach_item_fig": Markup(reach_figs["item"]) if reach_figs["item"] else None,
        "reach_user_fig": Markup(reach_figs["user"]) if reach_figs["user"] else None,
        "stability_fig": Markup(reach_figs["stability"]) if reach_figs["stability"] else None,
        "reach_rows": reach_rows,
        "reach_beta_rows": (
            reach["reach_beta"]
            .filter(pl.col("ds") == reach["reach_beta"].get_column("ds").max())
            .sort("beta")
            .to_dicts()
            if not reach["reach_beta"].is_empty()
            else []
        ),
    }


def render_report(
    d: ReportData,
    config: str = "",
    docs: str | None = None,
    releases: list[dict] | None = None,
    data_links: list[tuple[str, str]] | None = None,
    prevalence_diff: pl.DataFrame | None = None,
    generic: dict[str, pl.DataFrame] | None = None,
    alerting: dict | None = None,
    stale: list[dict] | None = None,
) -> str:
    """The report's HTML text for prepared :class:`ReportData`; ``releases``
    are the audit releases' JSON documents (with ``name`` and ``href``),
    ``data_links`` (table, file URL) pairs and ``prevalence_diff`` the
    ``threshold_prevalence_diff`` rows of published days; ``generic``
    {table: rows of published days} of the tables without a custom section
    (each gets :func:`fairmon.pipelines.report.report_sections.generic_section`);
    ``alerting`` what the top says of alerts (:func:`alerting_context`; None: alerts off); ``stale`` the
    published days computed from inputs that changed since (:func:`stale_days`)."""
    from markupsafe import Markup

    attrs = sorted(set(d.reo.get_column("attribute"))) if not d.reo.is_empty() else []
    excluded = d.excluded.get_column("ds").to_list()
    colors = arm_colors(
        (d.reo.get_column("arm").to_list() if attrs else [])
        + (d.reo_ab.get_column("treatment").to_list() if not d.reo_ab.is_empty() else [])
    )
    one_day = bool(attrs) and d.reo.get_column("ds").n_unique() == 1  # a point with its interval, not a series
    reo_figs = (
        [("all", reo_point_figure(d.reo, colors))]
        if one_day
        else [(a, reo_figure(d.reo, a, excluded, d.start, d.end, colors)) for a in attrs]
    )
    du_figs = [(a, delta_u_figure(d.reo_group, a, d.start, d.end)) for a in attrs] if not d.reo_group.is_empty() else []
    ab_figs = [
        (a, ab_figure(d.reo_ab, a, d.start, d.end, colors))
        for a in attrs
        if not one_day and not d.reo_ab.is_empty() and a in set(d.reo_ab.get_column("attribute"))
    ]
    if one_day and not d.reo_ab.is_empty():
        ab_figs = [("all", ab_point_figure(d.reo_ab, colors))]
    ab_day = d.reo_ab.get_column("ds").max() if not d.reo_ab.is_empty() else None
    ab_latest = (
        d.reo_ab.filter(pl.col("ds") == ab_day).sort("q_value", "p_value", nulls_last=True).to_dicts()
        if ab_day is not None and "q_value" in d.reo_ab.columns
        else []
    )
    latest_day = d.reo.get_column("ds").max() if attrs else None
    latest = d.reo.filter(pl.col("ds") == latest_day).sort("attribute", "arm").to_dicts() if attrs else []
    ab_latest = [r | {"effect": _ab_reading(r, d.reo, d.reo_group)} for r in ab_latest]
    # a method with no interval for these data (delta_paper on clustered rows): one line, not a block of NaN rows
    blank = {r["method"] for r in ab_latest} - {r["method"] for r in ab_latest if r["effect"] != "undefined"}
    ab_undefined = [(m, next(r.get("reason") or "" for r in ab_latest if r["method"] == m)) for m in sorted(blank)]
    ab_latest = [r for r in ab_latest if r["method"] not in blank]
    decision = _decision_context(d, prevalence_diff)
    extras = extra_sections(d.extras or {})
    envy = _envy_context(d)
    reach = _reach_context(d)
    dq_rows = d.dq_summary.to_dicts() if d.dq_summary.height else []
    dq_problems = sorted(
        (r for r in dq_rows if not r["passed"] or r["warnings"]), key=lambda r: (r["passed"], str(r["ds"]))
    )
    env = Environment(autoescape=True)
    env.globals["fmt"] = fmt
    env.globals["pfmt"] = pfmt
    return env.from_string(report_template()).render(
        d=d,
        built=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        config=config,
        reo_figs=[(a, Markup(s)) for a, s in reo_figs],
        du_figs=[(a, Markup(s)) for a, s in du_figs],
        ab_figs=[(a, Markup(s)) for a, s in ab_figs],
        latest=latest,
        latest_day=latest_day,
        one_day=one_day,
        headlines=headline_sentences(d.reo, d.reo_group, d.reo_ab) if attrs else [],
        glance=glance_rows(d.reo) if attrs else [],
        glossary=GLOSSARY,
        ab_tone=AB_TONE,
        dictionary=[TABLES[name] for name, _ in data_links or [] if name in TABLES],
        ab_latest=ab_latest,
        ab_undefined=ab_undefined,
        ab_day=ab_day,
        extras=extras,
        ci=ci_label(d.reo) if attrs else "CI",
        docs=docs,
        docs_href=Path(docs).resolve().as_uri() if docs else "",
        verdict_paragraphs=reo_verdict_paragraphs(d.reo, d.reo_group) if attrs else [],
        **decision,
        **envy,
        **reach,
        releases=releases or [],
        dq_passed=sum(1 for r in dq_rows if r["passed"] and not r["warnings"]),
        dq_problems=dq_problems,
        data_links=data_links or [],
        generic_sections=generic_sections(generic or {}),
        alerting=alerting,
        stale=stale or [],
    )


def _ab_reading(row: dict, reo: pl.DataFrame, reo_group: pl.DataFrame) -> str:
    """:func:`ab_effect` of one ``reo_ab`` row; a ``delta_U:<group>`` row is
    read against the control arm's ΔU of that group on the row's day."""
    control = None
    metric = row["metric"]
    if metric.startswith("delta_U:") and not reo_group.is_empty():
        match = reo_group.filter(
            (pl.col("ds") == row["ds"])
            & (pl.col("arm") == row["control"])
            & (pl.col("attribute") == row["attribute"])
            & (pl.col("group").cast(pl.String) == metric.split(":", 1)[1])
        )
        control = match.get_column("delta_U").item(0) if match.height else None
    return ab_effect(metric, row.get("ci_low"), row.get("ci_high"), row.get("q_value"), control)


def glance_rows(reo: pl.DataFrame) -> list[dict]:
    """Per arm × attribute (never summed across them): the latest published
    day's verdict and, over the range, how many published days each verdict
    had. Rows of the ``reo`` table; single attributes before intersections."""
    last = reo.get_column("ds").max()
    out = []
    for (arm, attr), g in reo.group_by("arm", "attribute"):
        v = g.get_column("verdict_80pct").fill_null("undefined")
        latest = g.filter(pl.col("ds") == last).get_column("verdict_80pct").to_list()
        out.append(
            dict(
                arm=arm,
                attribute=attr,
                latest=latest[0] if latest else "not published",
                days=g.height,
                **{k: int((v == k).sum()) for k in ("exceeds", "inconclusive", "within", "undefined")},
            )
        )
    return sorted(out, key=lambda r: ("×" in r["attribute"], r["attribute"], r["arm"] != "control", r["arm"]))


def audit_releases(folder: Path, start: dt.date, end: dt.date) -> list[dict]:
    """The audit releases (``fairmon audit-export`` JSON files in ``folder``)
    whose window ends in start..end, newest window first, each with ``name``,
    ``href`` (file URL) and ``groups_text``. Unreadable files are skipped."""
    import json

    out = []
    for f in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            r = json.loads(f.read_text())
            w_end = dt.date.fromisoformat(r["window"][1])
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            continue
        if start <= w_end <= end:
            sizes = r.get("n_q") or []
            r["groups_text"] = ", ".join(f"{g} ({n})" for g, n in zip(r.get("groups", []), sizes, strict=False)) + (
                f"; sizes {r['group_sizes']}" if r.get("group_sizes") else ""
            )
            out.append({**r, "name": f.name, "href": f.resolve().as_uri()})
    return sorted(out, key=lambda r: r["window"][1], reverse=True)


def _with_latest_reason(open_now: list[dict], latest: pl.DataFrame) -> list[dict]:
    """``open_now`` with, on a quarantined or failed alert whose first day not published yet is not its own
    day, ``waiting_reason``: that day's latest run's reason (its status and words, from ``latest``, each day's
    latest run), so the top does not give only the first day's reason, mended since, for days refused for
    another."""
    later = {a["waiting"][0] for a in open_now if a.get("waiting") and a["waiting"][0] != a["ds"]}
    if not later:
        return open_now
    runs = {r["ds"]: r for r in latest.filter(pl.col("ds").is_in(sorted(later))).to_dicts()}
    out = []
    for a in open_now:
        r = runs.get(a["waiting"][0]) if a.get("waiting") and a["waiting"][0] != a["ds"] else None
        if r is not None and r["status"] in ("quarantined", "failed"):
            a = {**a, "waiting_reason": f"{r['status']}{status_words(r['ds'], r['status'], r['detail'], 1000)}"}
        out.append(a)
    return out


def alerting_context(
    cfg: FairmonConfig, alerts: pl.DataFrame, start: dt.date, end: dt.date, latest: pl.DataFrame
) -> dict:
    """What the report's top says of alerts (DESIGN §4.9): those open on day
    ``end`` (:func:`fairmon.transforms.alerts.alert_tables.open_alerts`, by
    each day's latest run; ``latest``: those runs, :func:`latest_runs`, read once by the report), those the
    project's latest run raised on days ``start``..``end`` (first seen after it started), when it started, and
    the guarantee's α and horizon."""
    from fairmon.pipelines.storage import db

    alerts = alerts.drop("run_id") if "run_id" in alerts.columns else alerts
    last = None
    if cfg.duckdb_path.exists():
        try:
            with db.connect(cfg.duckdb_path) as con:
                db.ensure(con, ("runs_create",))
                last = db.rows(con, "runs_last_started")[0][0]
        except Exception:  # a run holds the file: the report still says what is open
            last = None
    stamp = last.strftime("%Y-%m-%dT%H:%M:%SZ") if last is not None else None
    new = alerts.filter(pl.col("first_seen_at") >= stamp).sort("ds").to_dicts() if stamp and alerts.height else []
    return {
        "open": _with_latest_reason(open_alerts(alerts, end, *run_times(cfg.duckdb_path)), latest),
        "new": [a for a in new if start <= a["ds"] <= end],
        "last_run": last.strftime("%Y-%m-%d %H:%M UTC") if last is not None else None,
        "alpha": cfg.alerts.alpha,
        "horizon": cfg.alerts.horizon_days,
    }


def stale_days(cfg: FairmonConfig, runs: pl.DataFrame) -> list[dict]:
    """{ds, what} for each day of ``runs`` (latest runs with their recorded inputs and params) computed
    from inputs or config sections that have changed since
    (:func:`fairmon.pipelines.orchestration.staleness.stale_changes`), ``what`` naming them in words: a
    published number that is no longer what the current inputs say is said so at the report's top, not
    only after ``backfill --only-stale``. Reads the days' input files once. Raises nothing of its own."""
    from fairmon.pipelines.orchestration.staleness import stale_changes

    by_day: dict[dt.date, list[str]] = {}
    for ds, what, how in stale_changes(cfg, runs):
        by_day.setdefault(ds, []).append(f"{what} {how}")
    return [{"ds": ds, "what": "; ".join(changed)} for ds, changed in sorted(by_day.items())]


def build_report(
    cfg: FairmonConfig,
    start: dt.date,
    end: dt.date,
    out: Path | None = None,
    config_name: str = "",
    on_published: Callable[[list[dt.date]], None] | None = None,
    on_stale: Callable[[list[dict]], None] | None = None,
) -> Path:
    """Write the report for start..end to ``out`` (default
    ``<warehouse>/../report_<start>_<end>.html``) atomically; return its path.
    ``on_published`` receives the days of the range it shows as published, ``on_stale`` those of them
    whose inputs or config changed since they ran (:func:`stale_days`), which its top names."""
    wh = cfg.warehouse_path
    tables = {name: read_table(wh, name) for name in TABLES}  # every declared table, read once
    runs = latest_runs(cfg.duckdb_path, inputs=True)
    d = report_data(
        tables["reo"],
        tables["reo_group"],
        tables["dq_results"],
        start,
        end,
        reo_ab=tables["reo_ab"],
        threshold_prevalence=tables["threshold_prevalence"],
        sdt=tables["sdt"],
        latest_runs=runs.select("ds", "run_id", "status", "detail"),
        extras={name: frame for name, frame in tables.items() if own_section(name)},
    )
    if on_published is not None:
        on_published(list(d.published))
    stale = stale_days(cfg, runs.filter(pl.col("ds").is_in(list(d.published))))
    if on_stale is not None:
        on_stale(stale)
    docs = cfg.gx_root / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html"
    diffs = tables["threshold_prevalence_diff"]
    if not diffs.is_empty() and d.published:
        diffs = diffs.filter(pl.col("ds").is_in(d.published))
    text = render_report(
        d,
        config_name,
        str(docs) if docs.exists() else None,
        releases=audit_releases(wh.parent / "releases", start, end),
        data_links=[
            (t.name, t.resolve().as_uri()) for t in sorted(wh.iterdir()) if t.is_dir() and not t.name.startswith("_")
        ]
        if wh.exists()
        else [],
        prevalence_diff=diffs,
        generic={
            name: rows.filter(pl.col("ds").is_in(d.published)) if not rows.is_empty() else rows
            for name, rows in tables.items()
            if not own_section(name)
        },
        alerting=alerting_context(cfg, tables["alerts"], start, end, runs) if cfg.alerts.enabled else None,
        stale=stale,
    )
    out = out or wh.parent / f"report_{start}_{end}.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)
    return out
