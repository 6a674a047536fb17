"""``fairmon audit-export`` and ``fairmon plan``: I/O around :mod:`fairmon.transforms.audit`
and :mod:`fairmon.transforms.planning`."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path

import numpy as np
import polars as pl

from fairmon.pipelines.config import FairmonConfig
from fairmon.pipelines.ingest.adapters import window_start
from fairmon.pipelines.ingest.staging import current_files
from fairmon.pipelines.storage import db
from fairmon.pipelines.storage.locking import project_lock
from fairmon.pipelines.storage.warehouse import read_table
from fairmon.transforms.audit import audit_decision, fairness_gap, laplace_release, score_distribution, score_histograms
from fairmon.transforms.contract import ATTR_PREFIX
from fairmon.transforms.planning import (
    joint_volumes,
    random_traffic_required,
    random_volume_for_reo_se,
    reo_se_for_volume,
)


class BudgetExceeded(RuntimeError):
    """A release would spend more privacy budget than the data set has left."""


def _bins(scores: np.ndarray, n_bins: int) -> np.ndarray:
    if n_bins == 0:  # one bin per distinct (discrete) score
        levels = np.unique(scores)
        mids = (levels[:-1] + levels[1:]) / 2
        return np.concatenate([[levels[0] - 0.5], mids, [levels[-1] + 0.5]])
    return np.linspace(scores.min(), scores.max(), n_bins + 1)


def export_release(
    cfg: FairmonConfig,
    ds: dt.date,
    attribute: str,
    model: str,
    epsilon: float,
    *,
    survival: bool = False,
    out: Path | None = None,
    rng: np.random.Generator | None = None,
) -> dict:
    """Release noisy per-group score histograms of qualified individuals for the
    score window ending at ``ds``, record the spent ε in the ledger, and write
    the release as JSON. Raises :class:`BudgetExceeded` (nothing released) when
    ε would overspend ``audit.total_epsilon`` for this data set, ValueError when
    scores are not configured or the window holds no qualified individuals.
    """
    if cfg.scores is None:
        raise ValueError("audit-export needs a [scores] section")
    if attribute not in cfg.scores.attributes:
        raise ValueError(f"attribute {attribute!r} is not one of {cfg.scores.attributes}")
    a = cfg.audit
    w0 = window_start(ds, cfg.scores.window_days)
    dataset = f"{cfg.resolve(cfg.scores.path)}#{model}"
    with project_lock(cfg.duckdb_path, cfg.warehouse_path):
        with db.connect(cfg.duckdb_path) as con:
            files = current_files(cfg, "scores", ds)  # rows of the files the day needs now, nothing older
            rows = db.query(con, "scores_window", ds=ds, window_start=w0, files=files).filter(pl.col("model") == model)
        col = ATTR_PREFIX + attribute
        rows = rows.filter(pl.col(col).is_not_null())
        qualified = rows.get_column("outcome").to_numpy() == a.qualified_outcome
        if not qualified.any():
            raise ValueError(f"no qualified individuals for model {model!r} in {w0}..{ds}")
        scores = rows.get_column("score").to_numpy()
        groups = sorted(rows.get_column(col).unique().to_list())
        edges = _bins(scores, a.bins)
        counts = score_histograms(scores, rows.get_column(col).to_numpy(), qualified, edges, groups)
        release_id = uuid.uuid4().hex
        with db.connect(cfg.duckdb_path) as con:
            db.execute(con, "ledger_create")
            with db.transaction(con):
                spent = db.query(con, "ledger_spent", dataset=dataset).item()
                if spent + epsilon > a.total_epsilon + 1e-12:
                    raise BudgetExceeded(
                        f"release refused: data set {dataset} has spent ε = {spent:g} of {a.total_epsilon:g}; "
                        f"this release asks for {epsilon:g}"
                    )
                db.execute(
                    con,
                    "ledger_insert",
                    dataset=dataset,
                    release_id=release_id,
                    epsilon=epsilon,
                    description=f"{model} by {attribute}, {w0}..{ds}, {'survival' if survival else 'pmf'}",
                )
        noisy = laplace_release(counts, epsilon, rng or np.random.default_rng())
    P = score_distribution(noisy, survival=survival)
    n_min = int(counts.sum(axis=1).min())  # eq. 7 concerns the true group sizes
    decision = audit_decision(fairness_gap(P), n_min, a.alpha, a.delta, epsilon, len(groups), len(edges) - 1)
    release = {
        "release_id": release_id,
        "dataset": dataset,
        "model": model,
        "attribute": attribute,
        "window": [str(w0), str(ds)],
        "epsilon": epsilon,
        "budget_spent": spent + epsilon,
        "budget_total": a.total_epsilon,
        "qualified_outcome": a.qualified_outcome,
        "bin_edges": edges.tolist(),
        "groups": groups,
        "noisy_counts": noisy.round(6).tolist(),
        "distribution": "survival P*(a, >= y) (eq. 5)" if survival else "P*(a, y) (eq. 4)",
        "P": np.nan_to_num(P).round(6).tolist(),
        **decision,
    }
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(json.dumps(release, indent=2))
        tmp.replace(out)
    return release


def plan_from_counts(
    cfg: FairmonConfig, start: dt.date, end: dt.date, epsilon: float, delta: float, target_se: float | None
) -> pl.DataFrame:
    """Traffic planning from published group counts in start..end (latest day per
    arm × attribute): Thm E.1 volumes per group, the joint volumes for all U_k
    (and so ΔU, REO) within ε, the SE the current volumes give, and the random
    volume for ``target_se``; also in days of current random traffic (the day's
    random rows over the days they span, ``window_start``..``window_end``)."""
    counts = read_table(cfg.warehouse_path, "group_counts")
    if counts.is_empty():
        raise ValueError(f"no group_counts under {cfg.warehouse_path}; run the pipeline first")
    counts = counts.filter(pl.col("ds").is_between(start, end) & (pl.col("group") != "(missing)"))
    if counts.is_empty():
        raise ValueError(f"no group_counts between {start} and {end}")
    W = cfg.impressions.random_window_days if cfg.impressions else 1
    day = counts.get_column("ds").max()
    today = counts.filter(pl.col("ds") == day)
    rows = []
    for (arm, attribute), rec in today.filter(pl.col("traffic") == "default").group_by("arm", "attribute"):
        rand = today.filter((pl.col("traffic") == "random") & (pl.col("attribute") == attribute))
        groups = sorted(set(rec.get_column("group")) & set(rand.get_column("group")))
        n_rec = int(rec.get_column("n").sum())
        n_rand = int(rand.get_column("n").sum())
        Q = np.array([rec.filter(pl.col("group") == g).get_column("n_pos").sum() / n_rec for g in groups])
        P = np.array([rand.filter(pl.col("group") == g).get_column("n_pos").sum() / n_rand for g in groups])
        # the random rows counted span window_start..window_end: the window, or more under pool_policy = "overlap"
        ends = (rand.get_column("window_start").min(), rand.get_column("window_end").max())
        span = (ends[1] - ends[0]).days + 1 if None not in ends else W
        per_day = n_rand / span
        e1 = random_traffic_required(P, epsilon, delta)
        joint = joint_volumes(P, Q, epsilon, delta)
        se_now, _ = reo_se_for_volume(Q, P, n_rec, n_rand)
        need = random_volume_for_reo_se(Q, P, n_rec, target_se) if target_se else float("nan")
        rows.append(
            {
                "ds": day,
                "arm": arm,
                "attribute": attribute,
                "groups": ", ".join(groups),
                "n_rec": n_rec,
                "n_rand_window": n_rand,
                "rand_per_day": per_day,
                "thm_e1_rand_max": int(e1.max()),
                "thm_e1_days": float(e1.max() / per_day),
                "joint_rand": joint["n_rand"],
                "joint_rec": joint["n_rec"],
                "joint_days": joint["n_rand"] / per_day,
                "se_reo_now": se_now,
                "rand_for_target_se": need,
                "days_for_target_se": need / per_day,
            }
        )
    return pl.DataFrame(rows).sort("attribute", "arm")
