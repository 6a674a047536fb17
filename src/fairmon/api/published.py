"""Published outputs read back from the warehouse (DESIGN §1, §3): the rows of
the days whose latest run published, through the same ``<table>_published``
views the CLI's ``fairmon sql`` and the report read
(:func:`fairmon.pipelines.storage.warehouse.query_warehouse`)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from fairmon.api.frames import to_kind


def _day(value: dt.date | str | None, what: str) -> dt.date | None:
    if value is None or (isinstance(value, dt.date) and not isinstance(value, dt.datetime)):
        return value
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            pass
    raise ValueError(f"{what}: expected a date or 'YYYY-MM-DD', got {value!r}")


def read_table(
    config: Any,
    name: str,
    start: dt.date | str | None = None,
    end: dt.date | str | None = None,
    *,
    backend: str = "polars",
) -> Any:
    """The published rows of output table ``name`` for days ``start``..``end`` (inclusive; None = open).

    ``config``: the path of a fairmon config file (``fairmon.toml``) or a
    loaded :class:`fairmon.pipelines.core.config.FairmonConfig`; its
    ``warehouse`` holds ``<warehouse>/<table>/ds=YYYY-MM-DD/part-0.parquet``
    and its DuckDB file the run history. A day counts only when its latest
    run (by start time) published, and only that run's rows are returned
    (the ``<name>_published`` view, sql/published_runs_view.sql). ``name``:
    an output table with a published view (``reo``, ``reo_group``,
    ``reo_ab``, ``group_counts``, ``threshold_prevalence``, ``sdt``, ...;
    the data dictionary lists them), or ``alerts`` (every alert raised,
    a quarantined or failed day's included: DESIGN §4.9). ``backend``: ``polars``, ``pandas`` or
    ``pyarrow``.

    Returns a frame with the table's columns (DESIGN §3), sorted by ds; empty
    when no day in the range is published.

    Raises ValueError for an unknown table (naming those that have published
    views) or a bad date; RuntimeError when the run history cannot be read
    (no DuckDB file yet, or a run holds it): which days are published is then
    unknown; errors of :func:`fairmon.pipelines.core.config.load_config` for a
    bad config; :class:`fairmon.extras.MissingExtraError` (an ImportError) without the
    ``pipeline`` extra.
    """
    import polars as pl

    from fairmon.extras import require

    require("fairmon.read_table", "pipeline")  # the warehouse is read through PyArrow
    from fairmon.pipelines.core.config import FairmonConfig, load_config
    from fairmon.pipelines.storage.ddl import ident
    from fairmon.pipelines.storage.warehouse import query_warehouse
    from fairmon.transforms.registry import GATED_TABLES, TABLES, across_days

    readable = (*GATED_TABLES, *(n for n in TABLES if across_days(n)))
    if name not in readable:
        raise ValueError(f"no published table {name!r}; tables with published views: {', '.join(sorted(readable))}")
    lo, hi = _day(start, "start"), _day(end, "end")
    cfg = config if isinstance(config, FairmonConfig) else load_config(Path(config))
    view = name + "_published" if name in GATED_TABLES else name  # alerts: every row (a quarantined day's too)
    frame, note = query_warehouse(cfg.duckdb_path, cfg.warehouse_path, f"SELECT * FROM {ident(view)}")
    if note and name in GATED_TABLES:  # the alerts need no run history: they are every row written
        raise RuntimeError(f"cannot tell which days are published: {note}")
    if lo is not None:
        frame = frame.filter(pl.col("ds") >= lo)
    if hi is not None:
        frame = frame.filter(pl.col("ds") <= hi)
    return to_kind(frame.sort("ds", maintain_order=True), backend)
