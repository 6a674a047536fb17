"""``fairmon audit-export`` and ``fairmon plan``: I/O around :mod:`fairmon.transforms.private.release`
and :mod:`fairmon.transforms.planning.traffic`."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

from fairmon.pipelines.core.config import AuditConfig, ConfigError, FairmonConfig
from fairmon.pipelines.executor.alerting import update_alerts_logged
from fairmon.pipelines.ingest import staging_tables
from fairmon.pipelines.ingest.sources import current_files
from fairmon.pipelines.ingest.staging import run_logger
from fairmon.pipelines.ingest.windows import window_start
from fairmon.pipelines.storage import db
from fairmon.pipelines.storage.ledger_store import RELEASE_SCHEMA, LedgerDisagrees, record_release, sync_into
from fairmon.pipelines.storage.locking import project_lock
from fairmon.pipelines.storage.warehouse import read_table
from fairmon.transforms.contract import ATTR_PREFIX
from fairmon.transforms.planning.settle import settle_verdict
from fairmon.transforms.planning.traffic import (
    plan_volumes,
    random_volume_for_reo_se,
    reo_se_for_volume,
)
from fairmon.transforms.private.release import (
    audit_decision,
    cell_error_bound,
    dedupe_latest,
    efg_reason,
    fairness_gap,
    histogram_scale,
    laplace_release,
    min_sample_private,
    population_key,
    score_distribution,
    score_histograms,
    seed_conditions,
    survival_distribution,
)


class BudgetExceeded(RuntimeError):
    """A release would spend more privacy budget than the data set has left."""


def export_release(
    cfg: FairmonConfig,
    ds: dt.date,
    attribute: str,
    model: str,
    epsilon: float,
    *,
    survival: bool = False,
    out: Path | None = None,
) -> dict:
    """Release noisy per-group score histograms of qualified individuals for the
    score window ending at ``ds`` (seed 000 §4.3.3, §5.1; DESIGN §4.6), record
    every ε spent in the ledger, and write the release as JSON.

    The score set comes from ``[audit] score_values | bins | edges`` and the
    groups from ``[audit] public_group_sizes.<attribute>`` (public n_{a,q},
    all of ε on the bins) or ``[audit] groups.<attribute>`` (n_{a,q} released
    with noise: ε/2 bins, ε/2 sizes, two ledger rows). Rows are de-duplicated
    on item_id over the window, keeping each item's latest row, so one
    individual is one row. Every number in the JSON is either declared (config,
    request) or noised, or computed from those alone; the returned dict adds a
    ``platform_only`` entry (duplicate rows dropped, rows outside the declared
    groups) that is not written to the release file, and ``file``, where it was written (None without
    ``out``). ``out``: the release file, or a
    folder to write it into as ``<model>_<attribute>_<ds>_<release id>.json``
    (:func:`release_file`); the file is the release's only record of its noisy numbers,
    so an existing one is never replaced.

    The budget is per population of individuals, not per model or file
    (:func:`charge_ledger`); the release file names no data set (the
    population key is data-derived: ``platform_only['ledger_key']``).

    Raises :class:`BudgetExceeded` (nothing released) when ε would overspend
    ``audit.total_epsilon`` for these individuals; ConfigError when the score set
    or the attribute's groups are not declared, or when the window's qualified
    counts differ from declared public sizes (the message does not say by
    how much); ValueError when scores are not configured, none is staged yet, a
    file of the window changed (or is not staged) since it was staged
    (:func:`refuse_unstaged`: the release would be of the old rows) or ``out``
    names an existing file; nothing is spent then.
    """
    if cfg.scores is None:
        raise ValueError("audit-export needs a [scores] section")
    if attribute not in cfg.scores.attributes:
        raise ValueError(f"attribute {attribute!r} is not one of {cfg.scores.attributes}")
    if not epsilon > 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon}")
    a = cfg.audit
    a.score_bins(), a.release_groups(attribute)  # refuse undeclared bins/groups before touching data
    release_id = uuid.uuid4().hex
    out = release_file(out, model, attribute, ds, release_id)
    w0 = window_start(ds, cfg.scores.window_days)
    with project_lock(cfg.duckdb_path, cfg.warehouse_path):
        with db.connect(cfg.duckdb_path) as con:
            if not staging_tables.exists(con, staging_tables.SCORES):
                raise ValueError(f"no scores are staged yet: run `fairmon run --date {ds}` (or `fairmon ingest`) first")
            refuse_unstaged(cfg, con, ds)
            files = current_files(cfg, "scores", ds)  # rows of the files the day needs now, nothing older
            rows = db.query(con, "scores_audit_window", ds=ds, window_start=w0, files=files, model=model)
        members = rows.select(pl.col("item_id").cast(pl.String)).unique()
        population = population_key(members.get_column("item_id"))
        spent = 0.0

        def record(parts: list[tuple[str, float]], n_dup: int) -> None:
            nonlocal spent
            what = f"{model} by {attribute}, {w0}..{ds}, {members.height} individuals, {n_dup} duplicate rows dropped"
            spent = charge_ledger(cfg, population, members, [(f"{release_id}:{p}", e) for p, e in parts], what)

        core, platform = private_release(a, rows, attribute, epsilon, survival=survival, before_noise=record)
        alerts = update_alerts_logged(cfg)  # a budget_low alert when this release crossed the line (DESIGN §4.9)
        for alert in alerts.new if alerts is not None else []:
            run_logger().warning("alert %s %s: %s", alert["ds"], alert["kind"], alert["message"])
    release = {
        "release_id": release_id,
        "model": model,
        "attribute": attribute,
        "window": [str(w0), str(ds)],
        "epsilon": epsilon,
        "budget_spent": spent + epsilon,
        "budget_total": a.total_epsilon,
        **core,
    }
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(json.dumps(release, indent=2))
        tmp.replace(out)
    return {**release, "platform_only": {**platform, "ledger_key": population}, "file": out}


def release_file(out: Path | None, model: str, attribute: str, ds: dt.date, release_id: str) -> Path | None:
    """Where :func:`export_release` writes release ``release_id``: ``out`` when it names a file, or
    ``<model>_<attribute>_<ds>_<release id's first 12>.json`` in the folder ``out`` (an existing folder, or a
    path without a suffix). Raises ValueError when that file exists: each release spends ε, and its file is
    the only record of its noisy numbers (a second release of the same day and attribute replaced the first's)."""
    if out is None:
        return None
    if out.is_dir() or not out.suffix:
        out = out / f"{model}_{attribute}_{ds}_{release_id[:12]}.json"
    if out.exists():
        raise ValueError(
            f"{out} exists: a release is never written over a file; give --out another (nothing was released)"
        )
    return out


def refuse_unstaged(cfg: FairmonConfig, con, ds: dt.date) -> None:
    """Raise ValueError unless every scores file of day ``ds``'s window is staged as it is now (size, content
    digest, config; :func:`fairmon.pipelines.ingest.staging.unchanged_files`): a file replaced after its
    day ran would be released from its old staged rows, with ε spent on numbers that are no longer the data's."""
    from fairmon.pipelines.ingest.sources import LogInput
    from fairmon.pipelines.ingest.staging import unchanged_files

    units = LogInput(cfg, "scores").units(ds)
    db.ensure(con, ("ingest_log_create", "ingest_log_migrate"))  # a log from before content digests
    same = unchanged_files(cfg, con, units)
    changed = [u.file for u in units if u.file not in same]
    if changed:
        names = ", ".join(str(f) for f in changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
        raise ValueError(
            f"{names} changed since it was staged (or was never staged): run `fairmon run --date {ds}` "
            "(or `fairmon ingest`) first; nothing was released and no ε spent"
        )


def charge_ledger(
    cfg: FairmonConfig, population: str, members: pl.DataFrame, parts: list[tuple[str, float]], what: str
) -> float:
    """Spend ``parts`` ((release part id, ε) pairs) from the budget of the individuals in
    ``members`` (column item_id), or refuse (DESIGN §4.6; seed 000 §5: basic composition).

    The ledger's record is the warehouse's ledger files
    (:mod:`fairmon.pipelines.storage.ledger_store`): the DuckDB tables
    privacy_ledger, privacy_ledger_members are rebuilt from them first (a new or
    deleted DuckDB file spends nothing), and this release is written to them
    before DuckDB records it. The ledger is keyed by
    ``population`` (:func:`fairmon.transforms.private.release.population_key`), never by a
    path or model: ``spent`` is the most ε any one of these individuals has spent over all
    earlier releases (sql/ledger_spent.sql), plus every row of the older ``path#model``
    keys, which cannot be matched to individuals and so count against every release
    (conservative migration: an old ledger is never forgotten). One transaction: check,
    then record the parts and, with a population's first release, its members.
    Returns ε spent before this release. Raises :class:`BudgetExceeded` (nothing
    recorded) when spent + Σε exceeds ``audit.total_epsilon`` or when the DuckDB
    ledger records releases the warehouse's files lack (it disagrees); OSError
    when the files cannot be written."""
    total, asked = cfg.audit.total_epsilon, sum(e for _, e in parts)
    with db.connect(cfg.duckdb_path) as con:
        db.execute(con, "ledger_create")
        db.execute(con, "ledger_members_create")
        con.register("release_members", members)
        try:
            with db.transaction(con):
                try:
                    sync_into(con, cfg.warehouse_path)  # the warehouse's ledger files are the record
                except LedgerDisagrees as e:
                    raise BudgetExceeded(f"release refused: {e}") from e
                spent, legacy, n_legacy = db.query(con, "ledger_spent").row(0)
                if spent + asked > total + 1e-12:
                    old = (
                        f", of which ε = {legacy:g} from {n_legacy} ledger row(s) keyed by path#model"
                        if n_legacy
                        else ""
                    )
                    raise BudgetExceeded(
                        f"release refused: the {members.height} individuals of this release have spent up to "
                        f"ε = {spent:g} of {total:g} over earlier releases (any model or file){old}; "
                        f"this release asks for {asked:g}"
                    )
                now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
                rows = pl.DataFrame(
                    [(population, rid, eps, now, f"{what}: noisy {rid.rsplit(':', 1)[-1]}") for rid, eps in parts],
                    schema=RELEASE_SCHEMA,
                    orient="row",
                )
                record_release(cfg.warehouse_path, rows, population, members)  # first: what is spent stays spent
                for r in rows.iter_rows(named=True):
                    db.execute(con, "ledger_insert", **r)
                db.execute(con, "ledger_members_insert", population=population)
        finally:
            con.unregister("release_members")
    return spent


def _rounded(P: np.ndarray) -> list[list[float | None]]:
    return [[round(float(x), 6) if np.isfinite(x) else None for x in row] for row in P]


def private_release(
    a: AuditConfig,
    rows: pl.DataFrame,
    attribute: str,
    epsilon: float,
    *,
    survival: bool = False,
    before_noise: Callable[[list[tuple[str, float]], int], None] | None = None,
) -> tuple[dict, dict]:
    """The ε-DP release of one window's score rows (columns item_id, score,
    outcome, ``attr__<attribute>``; oldest first), without I/O.

    De-duplicates on item_id keeping the last row, builds n_{a,y} over the
    declared bins and groups, calls ``before_noise(parts, n_duplicates)``
    (the ledger: ``parts`` lists (name, ε) spent) and only then draws the noise.
    Returns (the release's fields, platform-only diagnostics). Every number in
    the first is declared (config, request), noised, or computed from those
    alone. Raises ConfigError for undeclared bins/groups or for public sizes
    that do not match the window's (de-duplicated) qualified counts."""
    edges, labels = a.score_bins()
    groups, public_sizes = a.release_groups(attribute)
    rows, n_dup = dedupe_latest(rows)
    g = rows.get_column(ATTR_PREFIX + attribute).to_numpy()
    qualified = rows.get_column("outcome").to_numpy() == a.qualified_outcome
    counts = score_histograms(rows.get_column("score").to_numpy(), g, qualified, np.array(edges), groups)
    outside = int((qualified & ~np.isin(g, groups)).sum())
    if public_sizes is not None and counts.sum(axis=1).tolist() != public_sizes:
        raise ConfigError(
            f"audit.public_group_sizes.{attribute}: the window's qualified individuals per group do not "
            "match the declared public sizes; fix the declaration or declare audit.groups instead "
            "(noisy sizes). Nothing was released."
        )
    hist_scale = histogram_scale(epsilon, public_sizes is not None)
    parts = [("bins", epsilon)] if public_sizes is not None else [("bins", epsilon / 2), ("sizes", epsilon / 2)]
    if before_noise is not None:
        before_noise(parts, n_dup)
    noisy = laplace_release(counts, hist_scale)
    if public_sizes is None:
        size_scale = 2.0 / epsilon  # ε/2 on a sensitivity-1 count vector (add/remove one individual)
        sizes = laplace_release(counts.sum(axis=1), size_scale)
    else:
        size_scale, sizes = None, np.array(public_sizes)
    P = score_distribution(noisy, sizes)
    bound = cell_error_bound(sizes, hist_scale, len(labels), a.delta, size_scale)
    efg = fairness_gap(P)
    why = efg_reason(P, bound["t"])
    efg = float("nan") if why else efg  # the noise's number, not the groups': said as NaN with its reason
    core = {
        "privacy": {
            "mechanism": "discrete Laplace, OpenDP make_laplace",
            "neighbours": "one individual's score changes"
            + (" (group sizes public)" if public_sizes is not None else "; or one individual added or removed"),
            "bins_epsilon": parts[0][1],
            "bins_scale": hist_scale,
            "sizes_epsilon": None if public_sizes is not None else parts[1][1],
            "sizes_scale": size_scale,
        },
        "qualified_outcome": a.qualified_outcome,
        "score_bins": labels,
        "bin_edges_declared": edges,
        "groups": groups,
        "group_sizes": "public (config)" if public_sizes is not None else "noisy",
        "n_q": [int(x) for x in sizes],
        "noisy_counts": noisy.tolist(),
        "P": _rounded(P),
        "P_formula": "noisy bin / n_q (seed 000 eq. 4)",
        **audit_decision(efg, bound["t"], a.alpha),
        "efg_reason": why,
        "alpha": a.alpha,
        "delta": a.delta,
        "n_min_for_bound": bound["n_min"],
        "required_n": min_sample_private(a.alpha, len(groups), len(labels), a.delta),
        "seed_conditions_failed": seed_conditions(
            bound["n_min"], a.alpha, a.delta, hist_scale, len(groups), len(labels)
        ),
    }
    if survival:  # eq. 5's survival form, post-processing of the same release; not used in the decision
        core["P_survival"] = _rounded(survival_distribution(P))
    return core, {"duplicate_rows_dropped": n_dup, "qualified_rows_outside_declared_groups": outside}


def plan_from_counts(
    cfg: FairmonConfig,
    start: dt.date,
    end: dt.date,
    epsilon: float,
    delta: float,
    target_se: float | None,
    rec_rate: float | None = None,
) -> tuple[pl.DataFrame, list[dict]]:
    """Traffic planning from published group counts in start..end (latest day per
    arm × attribute), seed 001 App. E (DESIGN §4.5).

    Returns (summary, volumes). ``summary``: one row per arm × attribute with
    the volumes the window holds, random rows per day (over the span the
    random rows actually cover, not ``random_window_days``), the delta-method
    SE of REO now, and the random volume for ``target_se`` (with why it is
    infinite when the default-traffic term alone exceeds the target).
    ``summary`` also carries the day's ``reo`` verdict of the arm ×
    attribute and, where it is inconclusive, what settles it
    (:func:`fairmon.transforms.planning.settle.settle_verdict`: settles,
    rand_to_settle, rec_to_settle, settle_note; days_to_settle at today's
    random rows a day).
    ``volumes``: per arm × attribute × method of
    :data:`fairmon.transforms.planning.traffic.PLAN_METHODS`, n_rec and n_rand and the
    days of current traffic each needs. Raises ValueError when there are no counts.
    """
    minimum = cfg.estimation.min_expected_positives
    counts = read_table(cfg.warehouse_path, "group_counts")
    if counts.is_empty():
        raise ValueError(f"no group_counts under {cfg.warehouse_path}; run the pipeline first")
    counts = counts.filter(pl.col("ds").is_between(start, end) & (pl.col("group") != "(missing)"))
    if counts.is_empty():
        raise ValueError(f"no group_counts between {start} and {end}")
    day = counts.get_column("ds").max()
    today = counts.filter(pl.col("ds") == day)
    verdicts = _verdicts_of(cfg, day)
    rows, volumes = [], []
    for (arm, attribute), rec in today.filter(pl.col("traffic") == "default").group_by("arm", "attribute"):
        rand = today.filter((pl.col("traffic") == "random") & (pl.col("attribute") == attribute))
        groups = sorted(set(rec.get_column("group")) & set(rand.get_column("group")))
        if not groups:
            continue
        n_rec = int(rec.get_column("n").sum())
        n_rand = int(rand.get_column("n").sum())
        span = (rand.get_column("window_end").max() - rand.get_column("window_start").min()).days + 1
        Q = np.array([rec.filter(pl.col("group") == g).get_column("n_pos").sum() / n_rec for g in groups])
        P = np.array([rand.filter(pl.col("group") == g).get_column("n_pos").sum() / n_rand for g in groups])
        per_day = n_rand / span
        se_now, _ = reo_se_for_volume(Q, P, n_rec, n_rand)
        need = random_volume_for_reo_se(Q, P, n_rec, target_se) if target_se else float("nan")
        why = None
        if target_se and not np.isfinite(need):
            floor, _ = reo_se_for_volume(Q, P, n_rec, float("inf"))
            why = (
                f"SE(REO) = {target_se} is out of reach with {n_rec} default rows: with unlimited random "
                f"traffic the SE is still {floor:.4f}; more default traffic is needed"
            )
        settled = settle_verdict(verdicts.get((arm, attribute)), groups, Q, P, n_rec, n_rand, minimum)
        rows.append(
            {
                "ds": day,
                "arm": arm,
                "attribute": attribute,
                "groups": ", ".join(groups),
                "n_rec": n_rec,
                "n_rand_window": n_rand,
                "rand_span_days": span,
                "rand_per_day": per_day,
                "se_reo_now": se_now,
                "rand_for_target_se": need,
                "days_for_target_se": need / per_day,
                "target_se_note": why,
                **settled,
                "days_to_settle": settled["rand_to_settle"] / per_day if settled["settles"] else None,
            }
        )
        for v in plan_volumes(P, Q, epsilon, delta, rec_rate):
            volumes.append(
                {
                    "arm": arm,
                    "attribute": attribute,
                    **v,
                    "rand_days": v["n_rand"] / per_day if v["n_rand"] is not None else None,
                    "rec_days": v["n_rec"] / n_rec if v["n_rec"] is not None else None,
                }
            )
    return pl.DataFrame(rows).sort("attribute", "arm"), volumes


def _verdicts_of(cfg: FairmonConfig, day: dt.date) -> dict[tuple[str, str], dict]:
    """The ``reo`` rows of ``day`` by (arm, attribute); empty when the
    warehouse has none (a day whose estimators did not run)."""
    reo = read_table(cfg.warehouse_path, "reo")
    if reo.is_empty():
        return {}
    return {(r["arm"], r["attribute"]): r for r in reo.filter(pl.col("ds") == day).to_dicts()}
