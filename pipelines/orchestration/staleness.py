"""Which published days are stale: computed from inputs or config sections that have changed since (DESIGN §2
"Input identity"). Read-only and without Prefect, so that the report can say so as well as the scheduled job
and ``backfill --only-stale`` (:func:`fairmon.pipelines.orchestration.ops.detect_stale`, which records it)."""

from __future__ import annotations

import datetime as dt
import json

import polars as pl

from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.ingest.sources import current_inputs


def config_change(params: str | None, now: dict[str, str]) -> str | None:
    """What makes a day stale in its latest run's recorded ``params`` (JSON)
    against the current config's section hashes ``now``
    (:meth:`fairmon.pipelines.core.config.FairmonConfig.output_fingerprints`):
    ``"config [ab], [estimation]"`` naming the sections that changed, or None
    when none did or the run recorded no hashes (a run of an earlier fairmon:
    unknown, not stale)."""
    try:
        before = json.loads(params or "{}").get("outputs_fp")
    except (ValueError, AttributeError):
        return None
    if not isinstance(before, dict):
        return None
    changed = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
    return "config " + ", ".join(f"[{k}]" for k in changed) if changed else None


def stale_changes(cfg: FairmonConfig, latest: pl.DataFrame) -> list[tuple[dt.date, str, str]]:
    """(ds, what changed, how) for each day of ``latest`` (each day's latest run: ds, inputs, params, as
    ``sql/runs_latest.sql`` gives them) whose inputs differ from the files the day needs now (resolved
    afresh: a changed, removed or *new* file, such as a late random pool; compared by size and content
    digest) or whose output-shaping config sections changed (:func:`config_change`): one triple per
    differing file (its identity; how: ``changed``, ``removed`` or ``new``), or ``config [section], ...``
    (how: ``changed``). Reads the files' bytes once a process
    (:func:`fairmon.pipelines.ingest.identity.content_digest`); writes nothing. Raises nothing of its own."""
    sections = cfg.output_fingerprints()
    out = []
    for r in latest.iter_rows(named=True):
        # a run recorded before inputs had a content digest has none: its files count as changed, once
        used = {i["file"]: (i["size"], i.get("digest")) for i in json.loads(r["inputs"] or "[]")}
        now = {i["file"]: (i["size"], i["digest"]) for i in current_inputs(cfg, r["ds"])}
        for f in sorted(set(used) | set(now)):
            if used.get(f) != now.get(f):
                out.append((r["ds"], f, "removed" if f not in now else "new" if f not in used else "changed"))
        changed = config_change(r["params"], sections)
        out += [(r["ds"], changed, "changed")] if changed else []
    return out
