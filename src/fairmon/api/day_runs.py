"""A day of the pipeline from Python (DESIGN §1 "A library first": ``run_day``
beside ``read_table``): the executor's in-process day, with no Prefect API
and no server (:func:`fairmon.pipelines.executor.days.run_day`)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any


def run_day(config: Any, ds: dt.date | str, *, force_ingest: bool = False) -> dict:
    """Compute and publish day ``ds`` of a fairmon project in this process.

    ``config``: the path of a fairmon config file (``fairmon.toml``, str or
    Path) or a loaded :class:`fairmon.pipelines.core.config.FairmonConfig`.
    ``ds``: the log day, a date or ``'YYYY-MM-DD'``. ``force_ingest``:
    re-stage the day's input files even when unchanged.

    Runs the same stages as ``fairmon run --date ds`` (ingest -> counts ->
    data-quality gate -> estimators -> checks -> publish), through the same
    executor, and publishes the same partitions
    (``<warehouse>/<table>/ds=YYYY-MM-DD/part-0.parquet``, equal to
    ``fairmon run``'s apart from their ``run_id``), its run recorded in the
    DuckDB file's ``runs`` table. It starts no Prefect server and needs no
    Prefect API (``fairmon run`` goes through Prefect only when one is
    configured). Holds the project lock while it runs, without waiting.

    First the pre-flight check (:mod:`fairmon.pipelines.ingest.preflight`,
    file listings and headers, about half a second, before GX is imported):
    a day without its default-traffic file, a file without a configured
    column (its columns and the config key named), a wrong delimiter or a
    CSV that is not UTF-8 returns at once, quarantined at ``stage``
    ``preflight``, with nothing run; the refused attempt is recorded in
    ``runs``, so the day's earlier numbers leave the published views.

    Returns the day's summary, a dict: ``ds``; ``status``: ``published``,
    ``quarantined`` (its gate failed, or its pre-flight check: nothing
    published, ``error`` says why) or ``failed`` (``error``: the day, stage and cause); for a
    published day the rows of its tables (``reo``, ``reo_ab``, ...) and
    ``paths`` (table -> partition written). A day's own failure is reported
    in the summary, not raised.

    Raises :class:`fairmon.pipelines.storage.locking.RunLockedError` when
    another process holds the project; ValueError for a bad ``ds`` (also one after tomorrow, UTC:
    no log of it can exist yet); what
    :func:`fairmon.pipelines.core.config.load_config` raises for a missing
    or invalid config (``ConfigError``, naming the key);
    :class:`fairmon.extras.MissingExtraError` (an ImportError) without the ``pipeline`` extra;
    :class:`fairmon.pipelines.executor.days.LibraryExitError` (a RuntimeError) when a library called
    ``sys.exit`` inside the run, which would otherwise end the process as a success.
    """
    from fairmon.extras import require

    require("fairmon.run_day", "pipeline")
    from fairmon.pipelines.core.config import FairmonConfig, load_config
    from fairmon.pipelines.ingest.preflight import preflight, preflight_summary
    from fairmon.pipelines.ingest.preflight_values import value_findings

    if isinstance(ds, str):
        try:
            ds = dt.date.fromisoformat(ds)
        except ValueError:
            raise ValueError(f"ds: expected a date or 'YYYY-MM-DD', got {ds!r}") from None
    if not isinstance(ds, dt.date) or isinstance(ds, dt.datetime):
        raise ValueError(f"ds: expected a date or 'YYYY-MM-DD', got {ds!r}")
    from fairmon.pipelines.ingest.windows import not_begun

    if (why := not_begun(ds)) is not None:
        raise ValueError(f"ds: {why}")
    if not isinstance(config, FairmonConfig):
        config = str(Path(config))
    cfg = config if isinstance(config, FairmonConfig) else load_config(config)
    # before GX is imported: a missing file or column, or a value the raw suite refuses, answers in a second
    found = preflight(cfg, [ds]).get(ds) or value_findings(cfg, [ds]).get(ds)
    if found:  # recorded as quarantined: what the day published before leaves the published views
        from fairmon.pipelines.executor.publishing import record_refused

        summary = preflight_summary(ds, found)
        path = "" if isinstance(config, FairmonConfig) else str(Path(config).resolve())
        record_refused(cfg, path, {ds: found})
        return summary
    from fairmon.pipelines.executor.days import run_day as run_in_process

    return run_in_process(config, ds, force_ingest=force_ingest)
