"""One code path for a batch of days: ingest -> counts -> checks -> estimators -> checks -> publish.

The days of a batch go through each stage together: every day is ingested
and counted, then the counts of all the days are checked in one GX run per
suite, then every day is estimated, then the outputs of all the days are
checked together, then each day publishes (or is quarantined) and its run
is recorded. A single day is a batch of one. A day whose check fails stops
there (quarantined), a day that raises stops there (failed); the other days
go on. What the days share is passed explicitly: the :class:`Batch` (config,
options, hooks, what the run knows of its warehouse).

How each unit runs is the caller's :class:`fairmon.pipelines.executor.outcomes.Hooks`:
plain calls in process (the defaults), Prefect task and flow runs in
:mod:`fairmon.pipelines.orchestration`.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import polars as pl

from fairmon.pipelines.checks.gate import build_docs, gate_for
from fairmon.pipelines.checks.suites import DQResult
from fairmon.pipelines.core import timing
from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.core.faults import fault_point
from fairmon.pipelines.core.run import in_run
from fairmon.pipelines.executor.day_checks import (
    ab_config_check,
    check_days,
    check_outputs,
    dq_tables,
    file_copies_check,
    output_check_frames,
    shared_ids_check,
    window_files,
)
from fairmon.pipelines.executor.estimators import (
    count_groups,
    estimate,
    estimate_envy,
    estimate_reach,
    estimate_sdt,
    estimate_threshold,
)
from fairmon.pipelines.executor.outcomes import DayFailed, DayQuarantined, Hooks
from fairmon.pipelines.executor.publishing import WarehouseViews, finish_record, publish, start_record
from fairmon.pipelines.ingest.file_summaries import FileSummaries
from fairmon.pipelines.ingest.preflight import Finding, preflight_results
from fairmon.pipelines.ingest.range_counts import HeldKeys
from fairmon.pipelines.ingest.snapshots import read_snapshot
from fairmon.pipelines.ingest.sources import LogInput, configured_inputs
from fairmon.pipelines.ingest.staging import Ingested, ingest_days, run_logger
from fairmon.transforms.contract import InputContractError
from fairmon.transforms.registry import TABLES


@dataclass
class Batch:
    """What the days of a run share: the run's config and its path, whether
    to re-ingest unchanged files, the ``hooks`` each unit runs through, what
    the run ``known``-s of its warehouse (owned by the run, passed to every
    publish), how many days run their per-day units at once, and who hears
    of each batch's ingest and count (``on_batch``: {files, staged, ingest,
    checks, counts}, files read and staged and seconds per stage)."""

    cfg: FairmonConfig
    config_path: str = ""
    force_ingest: bool = False
    hooks: Hooks = field(default_factory=Hooks)
    known: WarehouseViews = field(default_factory=WarehouseViews)
    concurrency: int = 1
    on_batch: Callable[[dict], None] | None = None

    def each(self, items: Iterable, fn: Callable) -> Iterator:
        """``fn`` of each item, yielded in order as they finish, ``concurrency``
        at a time (threads in the current run's context, :func:`fairmon.pipelines.core.run.in_run`)."""
        if self.concurrency <= 1:
            yield from map(fn, items)
            return
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="fairmon-day") as pool:
            yield from pool.map(in_run(fn), items)


@dataclass
class Day:
    """One day on its way through the batch: its run id and record, the
    check results and tables so far, what the batch's ingest of each input
    gave it, its counts, and how it stopped
    (``stopped``: the input whose critical check failed; ``error``: what it raised)."""

    ds: dt.date
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    recorded: str | None = None
    results: list[DQResult] = field(default_factory=list)
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    ingested: dict[str, list[DQResult] | InputContractError] = field(default_factory=dict)
    counts: pl.DataFrame | None = None
    totals: pl.DataFrame | None = None
    buckets: HeldKeys | None = None  # per-key counts, held (range_counts.HeldKeys) until the day estimates
    pending: dict[str, pl.DataFrame] = field(default_factory=dict)
    dq: pl.DataFrame | None = None
    stopped: str | None = None
    error: BaseException | None = None

    @property
    def going(self) -> bool:
        """Neither quarantined nor failed so far."""
        return self.stopped is None and self.error is None


class _Stop(Exception):
    """A stage's critical check failed (internal: the day is quarantined)."""


def _gate(day: Day, new: list[DQResult]) -> None:
    day.results += new
    if not all(r.success for r in new):
        raise _Stop


def _guard(day: Day, stage: str, fn: Callable[[Day], Any]) -> None:
    """Run ``fn(day)`` for a day still going; what stops the day is kept on it
    (an input's contract error as :class:`DayFailed` naming ``stage``; one
    that a check names, ``check``, as that check failing: the day is
    quarantined as the pre-flight check quarantines it, see :func:`_refused_file`)."""
    if not day.going:
        return
    try:
        fn(day)
    except InputContractError as e:
        if getattr(e, "check", None) is not None:
            day.results += _refused_file(day.ds, stage, e)
            day.stopped, day.tables = stage, {}
            return
        day.error = DayFailed(f"{day.ds}: stage {stage} ingest: {e}")
        day.error.__cause__ = e
    except _Stop:
        day.stopped, day.tables = stage, {}
    except Exception as e:
        day.error = e


def _refused_file(ds: dt.date, stage: str, e: InputContractError) -> list[DQResult]:
    """The result of suite ``reader`` (:func:`fairmon.pipelines.ingest.preflight.preflight_results`, as the
    pre-flight's) on the file the reader refused with ``e``, a defect of the file a check names (``e.check``: a
    CSV row with more or fewer fields than the header, an empty cluster id): day ``ds`` is quarantined with a
    dq_results row saying why, as the pre-flight check's value scan quarantines it when it reads the file first
    (a run of several days, where the pre-flight only warns). Why not failed: the file is at fault, not the run,
    and a quarantine's reason and alert say what to mend."""
    found = Finding(ds, stage, e.check, e.file or stage, getattr(e, "message_at", e.message))
    return preflight_results([found], suite="reader")


def _per_day(batch: Batch, days: list[Day], stage: str, fn: Callable[[Day], Any]) -> None:
    list(batch.each(days, lambda d: _guard(d, stage, fn)))


def _together(
    batch: Batch,
    days: list[Day],
    stage: str,
    fn: Callable,
    item: Callable,
    take: Callable,
    stepped: bool = True,
    args: tuple = (),
) -> Any:
    """``fn(cfg, {day: item(day)}, *args)`` once for the days still going (a
    step of the hooks when ``stepped``), each day's part ``out[day]`` handed
    to ``take(day, part)``; when the call raises, each day alone, so that
    only the day that breaks it stops. Returns what the call of the days
    together (or of the one day going) returned, or None (each day alone
    after the call together raised, or no day going)."""
    call = batch.hooks.step if stepped else (lambda f, *a: f(*a))
    going = [d for d in days if d.going]
    if len(going) > 1:
        try:
            out = call(fn, batch.cfg, {d.ds: item(d) for d in going}, *args)
        except Exception as e:  # one day's frame broke the batch's run: each day alone
            run_logger().info(
                "%s of %d days together failed (%s: %s): each day alone", stage, len(going), type(e).__name__, e
            )
        else:
            for d in going:
                _guard(d, stage, lambda d: take(d, out[d.ds]))
            return out
    out = None

    def alone(d: Day) -> None:
        nonlocal out
        out = call(fn, batch.cfg, {d.ds: item(d)}, *args)
        take(d, out[d.ds])

    for d in going:
        _guard(d, stage, alone)
    return out if len(going) == 1 else None


def _open(batch: Batch, day: Day) -> None:
    """Open the day's book of timings and record its run as 'running' with its parameters."""
    cfg, ds = batch.cfg, day.ds
    params = {
        "ds": ds,
        "force_ingest": batch.force_ingest,
        "estimation": cfg.estimation.model_dump(),
        "ab": cfg.ab.model_dump(),
        "quality": cfg.quality.model_dump(),
        "outputs_fp": cfg.output_fingerprints(),  # a later config with other hashes makes the day stale
    }
    if cfg.impressions is not None:  # which random traffic the day used (DESIGN §2 "Random-traffic windows")
        params["random_window"] = {
            "random_window_days": cfg.impressions.random_window_days,
            "pool_policy": cfg.impressions.pool_policy,
        }
    timing.start(ds)
    try:
        day.recorded, listing = start_record(cfg, batch.config_path, day.run_id, ds, params)
    except Exception as e:
        day.error = e
        return
    if listing is not None:  # recorded first, then the day fails naming the input
        _guard(day, "inputs", lambda d: _raise(listing))


def _raise(e: BaseException) -> None:
    raise e


def _ingest(batch: Batch, days: list[Day], name: str, book: str) -> Ingested | None:
    """The batch's one ingest of input ``name`` for the days still going
    (:func:`fairmon.pipelines.ingest.staging.ingest_days`, a step of the
    hooks, timed in ``book``); each day keeps what it gave the day. Returns
    the batch's :class:`Ingested`, or None when the ingest of the days
    together raised (each day was then ingested alone) or no day is going."""

    def take(d: Day, got: list[DQResult] | InputContractError) -> None:
        d.ingested[name] = got

    with timing.clock(book, "ingest"):
        return _together(batch, days, name, ingest_days, lambda d: None, take, args=(name, batch.force_ingest))


def _gate_ingested(day: Day, name: str) -> None:
    """Gate ``day`` on what the batch's ingest of ``name`` gave it: the raw
    suites' results, or the contract error that stops it (raised)."""
    got = day.ingested[name]
    if isinstance(got, InputContractError):
        raise got
    _gate(day, got)


def _impressions(batch: Batch, days: list[Day], book: str) -> None:
    """Impressions for the batch: its files ingested once; each day's file
    checks; every day counted in one count; all days' counts checked
    together; each day estimated (REO, A/B, stages, envy); all days' outputs
    checked together. The ingest and the count are timed in ``book``."""
    cfg, step = batch.cfg, batch.hooks.step
    got = _ingest(batch, days, "impressions", book)
    known = FileSummaries()  # the batch's files are staged: their summaries hold until the batch ends

    def file_checks(d: Day) -> None:
        _gate_ingested(d, "impressions")
        _gate(d, file_copies_check(cfg, d.ds, known))  # one file's rows twice, under two names
        _gate(d, shared_ids_check(cfg, d.ds, known))  # an id key in two of the day's files

    def take_counts(d: Day, counted: tuple) -> None:
        # the bucket rows come as the batch's count holds them (packed past its budget: range_counts.Holder)
        d.counts, d.totals, d.buckets = counted

    def estimates(d: Day) -> None:
        tables = {"group_counts": d.counts, **step(estimate, cfg, d.counts, d.ds, d.buckets.frame())}
        d.buckets = None  # K x buckets rows a day, used only here: not held while the later days estimate
        d.results += ab_config_check(cfg, d.counts)
        if cfg.envy is not None:
            envy_tables, envy_checks = step(estimate_envy, cfg, d.ds)
            tables |= envy_tables
            _gate(d, envy_checks)  # a swap row without a donor group quarantines the day (unless a warning)
        d.tables |= tables
        d.pending = output_check_frames(tables, d.totals)

    _per_day(batch, days, "impressions", file_checks)
    with timing.clock(book, "counts"):
        _together(batch, days, "impressions", count_groups, lambda d: None, take_counts)
    _report_batch(batch, book, got)
    _together(batch, days, "impressions", check_days, lambda d: d.counts, lambda d, r: _gate(d, [r]))
    _per_day(batch, days, "impressions", estimates)
    _together(batch, days, "impressions", check_outputs, lambda d: d.pending, _gate)


def _report_batch(batch: Batch, book: str, got: Ingested | None) -> None:
    """Hand ``on_batch`` the batch's ingest and count figures (its book's
    seconds so far: the batch's own, or a day alone's)."""
    if batch.on_batch is not None:
        seconds = timing.book(book)
        figures = {"files": got.files if got else 0, "staged": got.staged if got else 0}
        batch.on_batch(figures | {k: seconds[k] for k in ("ingest", "checks", "counts")})


def _other_input(batch: Batch, name: str, d: Day) -> None:
    """Scores, labels or reach (``name``) for day ``d``: the batch's ingest
    of its files (or the snapshot read), estimate, check the outputs."""
    cfg, ds, step = batch.cfg, d.ds, batch.hooks.step
    if name == "reach":
        with timing.clock(ds, "checks"):
            snap, checked = read_snapshot(cfg, ds, gate_for(cfg), str(ds))
        _gate(d, checked)
        tables = step(estimate_reach, cfg, ds, snap)
    else:
        missing = LogInput(cfg, name).missing_own_file(ds)
        if missing is not None:  # quarantined by _guard, as the pre-flight refuses it
            raise missing
        _gate_ingested(d, name)
        tables = step(estimate_threshold if name == "scores" else estimate_sdt, cfg, ds)
    _gate(d, step(check_outputs, cfg, {ds: output_check_frames(tables, None)})[ds])
    d.tables |= tables


def _quarantine(batch: Batch, d: Day) -> None:
    """Publish why the day failed its checks (dq_results only) and raise :class:`DayQuarantined`."""
    cfg, ds = batch.cfg, d.ds
    dq = dq_tables(cfg, {ds: d.results})[ds].with_columns(pl.lit(d.run_id).alias("run_id"))
    batch.hooks.step(publish, cfg, ds, {"dq_results": dq}, False, batch.known)
    with timing.clock(ds, "checks"):
        build_docs(cfg)
    others = window_files(cfg, ds)
    failed = "; ".join(r.summary() + others.get(r.subject, "") for r in d.results if not r.success)
    raise DayQuarantined(f"{ds}: quarantined at stage {d.stopped}: {failed}")


def summary_tables() -> tuple[str, ...]:
    """The tables whose day rows a run's result carries (declared ``summary=True``), in registry order."""
    return tuple(name for name, t in TABLES.items() if t.summary)


def dict_rows(frame: pl.DataFrame) -> list[dict]:
    """``frame.to_dicts()``: the same dicts, built from its row tuples
    (~30 % less CPU than Polars' own at 16,388 rows of ``reo_ab`` a day,
    K = 4,096 groups). Raises nothing."""
    names = frame.columns
    return [dict(zip(names, row)) for row in frame.iter_rows()]


def _publish(batch: Batch, d: Day) -> dict:
    """Publish the day's tables and dq_results (metrics first, dq_results last); its result."""
    cfg, ds, tables = batch.cfg, d.ds, d.tables
    stamped = {k: v.with_columns(pl.lit(d.run_id).alias("run_id")) for k, v in {**tables, "dq_results": d.dq}.items()}
    paths = batch.hooks.step(publish, cfg, ds, stamped, True, batch.known)
    fault_point("publish_record")
    with timing.clock(ds, "checks"):
        docs = build_docs(cfg)
    rows = {k: dict_rows(tables[k]) if k in tables else [] for k in summary_tables()}
    return {
        "ds": ds,
        "run_id": d.run_id,
        **rows,
        "dq": d.dq.to_dicts(),
        "paths": paths,
        "data_docs": str(docs),
        "timings": timing.book(ds),
    }


def finish_day(batch: Batch, d: Day) -> dict:
    """The day's last unit: raise what stopped it, or publish it; then close
    its run record. Returns the day's result {ds, run_id, the rows of every
    table declared with ``summary=True`` (reo, reo_ab, threshold_prevalence,
    sdt, envy_audit today; as dicts, empty when not configured), dq, paths,
    data_docs, timings}. Raises
    :class:`DayQuarantined` when a critical check failed (its dq_results
    published), :class:`DayFailed` when the day could not be computed, or
    what the day raised."""
    status, detail = "failed", ""
    try:
        if d.error is not None:
            raise d.error
        if d.stopped is not None:
            _quarantine(batch, d)
        out = _publish(batch, d)
        status = "published"
        return out
    except DayQuarantined as e:
        status, detail = "quarantined", str(e)
        raise
    except Exception as e:
        detail = f"{type(e).__name__}: {e}"
        run_logger().error("%s: run failed: %s", d.ds, detail)
        raise
    except BaseException as e:  # Ctrl-C (KeyboardInterrupt): recorded as failed with a blank reason before
        detail = f"interrupted ({type(e).__name__}): not published; run the day again (backfill --only-failed)"
        raise
    finally:
        timings = timing.take(d.ds)
        if d.recorded is not None:
            outputs = {k: v.height for k, v in d.tables.items()}
            finish_record(batch.cfg, d.run_id, d.ds, d.recorded, status, detail, outputs, timings)


def execute(batch: Batch, dates: list[dt.date]) -> Iterator[Any]:
    """Run the days ``dates`` of a batch through every configured input's
    stages, then publish each. The caller holds the project lock and the
    DuckDB session (:func:`fairmon.pipelines.executor.days.run_days` does).
    Yields, in day order as each finishes, what ``batch.hooks.day`` returns
    for it (in process: the day's summary, never raising for a day's own failure)."""
    days = [Day(ds) for ds in dates]
    _per_day(batch, days, "start", partial(_open, batch))
    book = timing.batch_book(dates)  # what the days do together is timed here; a day alone's is its own book
    if len(dates) > 1:
        timing.start(book)
    for name in (kind.source for kind in configured_inputs(batch.cfg)):
        if name == "impressions":
            _impressions(batch, days, book)
            continue
        if name != "reach":
            _ingest(batch, days, name, book)
        _per_day(batch, days, name, partial(_other_input, batch, name))
    if len(dates) > 1:
        timing.take(book)
    _together(
        batch, days, "dq_results", dq_tables, lambda d: d.results, lambda d, f: setattr(d, "dq", f), stepped=False
    )
    yield from batch.each(days, lambda d: batch.hooks.day(d.ds, partial(finish_day, batch, d)))
