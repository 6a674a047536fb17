"""The data-quality gate: Great Expectations (GX Core 1.x) suites from
``expectations/*.json`` run on pandas frames through a file-backed GX context
beside the warehouse, so every validation also lands in GX Data Docs.

GX 1.x has no DuckDB/Polars path that works here, so frames are handed over
as pandas (``polars.DataFrame.to_pandas``). An impressions file is validated
through its distinct-value *profile* (one row per distinct combination of the
contract columns, computed in DuckDB; see :func:`fairmon.pipelines.ingest.adapters.profile_rows`):
value rules (not null, in set, regex, between) pass or fail on the profile
exactly as on the rows, and the gate turns GX's unexpected profile rows back
into file rows (counts weighted by ``__n``; the rows named are the first file
row of each distinct offending combination, from ``__first_row``). Data
Docs therefore show profile rows for those suites.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from fairmon.pipelines.checks.cover import covered_columns, covering_rows
from fairmon.pipelines.checks.gx_import import import_gx
from fairmon.pipelines.checks.split import (
    ROW_WISE,
    SUBJECT,
    batchable,
    failure,
    holds_for,
    member_failures,
    per_subject,
    profile_failure,
    unexpected_rows,
)
from fairmon.pipelines.checks.suites import (
    DQResult,
    expand_spec,
    html_safe,
    load_spec,
    read_columns,
)
from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.core.run import active_run
from fairmon.transforms.contract import PROFILE_N, PROFILE_ROW

if TYPE_CHECKING:
    import pandas as pd

os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")

_LOCK = threading.Lock()
#: Pandas batches of at most this many bytes keep GX's data fingerprint (:class:`QualityGate`).
FINGERPRINT_BYTES = 16 * 2**20
#: What a stored validation result shows for the frame validated (GX's ``DATAFRAME_REPLACEMENT_STR``).
DATAFRAME = "<DATAFRAME>"
#: GX's result format of a suite's first run: each expectation's success only (:func:`_detail_failures`).
PASS_FAIL = "BOOLEAN_ONLY"


class QualityGate:
    """Runs suites through one file-backed GX context rooted at ``root``.

    Data Docs: ``<root>/gx/uncommitted/data_docs/local_site/index.html``.
    """

    def __init__(self, root: Path, severity: dict[str, str] | None = None, spark: bool = False):
        gx = import_gx(spark)  # without the integrations no check uses; ``spark``: PySpark may be loading
        from great_expectations.data_context.types.base import ProgressBarsConfig
        from great_expectations.execution_engine import pandas_execution_engine as pandas_engine

        # GX logs the errors it swallows (a Data Docs page it could not render on a full disk) with its
        # traceback; fairmon reports what fails itself, in one error line
        logging.getLogger("great_expectations").setLevel(logging.CRITICAL)
        # GX fingerprints (MD5s every value of) a pandas batch below HASH_THRESHOLD bytes, for Data Docs only:
        # ~45 % of the raw suites' CPU on a backfill's profiles at K = 4,096; bigger batches go without
        pandas_engine.HASH_THRESHOLD = min(pandas_engine.HASH_THRESHOLD, FINGERPRINT_BYTES)
        self.gx = gx
        self.root = root
        self.severity = severity or {}
        self.pending_docs: list = []  # validation results not yet rendered into Data Docs
        self._suites: dict[str, tuple[str, tuple]] = {}  # suite -> (entries as JSON, (suite, batch definition))
        root.mkdir(parents=True, exist_ok=True)
        with _LOCK:
            drop_unreadable_suites(root)
            self.ctx = gx.get_context(mode="file", project_root_dir=str(root))
            self.ctx.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
            self.ctx.variables.save()
            try:
                self.source = self.ctx.data_sources.get("fairmon")
            except Exception:  # GX raises its own KeyError-like types; absent -> create
                self.source = self.ctx.data_sources.add_pandas("fairmon")

    @property
    def data_docs_index(self) -> Path:
        """The Data Docs index page (``gx/uncommitted/data_docs/local_site/index.html``)."""
        return self.root / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html"

    def build_docs(self) -> Path:
        """Render the validations run since the last call into Data Docs (one
        incremental build instead of one per validation). Returns the index page."""
        with _LOCK:
            if self.pending_docs:
                self.ctx.build_data_docs(resource_identifiers=list(self.pending_docs))
                self.pending_docs.clear()
        return self.data_docs_index

    def _suite(self, suite: str, entries: list[dict]):
        """(GX expectation suite, batch definition) running ``suite`` as
        expanded in ``entries``.

        The suite is stored in GX's expectation store (Data Docs list it)
        only when its expanded expectations differ from this process's last
        use of it (storing costs ~15 ms a suite in GX's JSON store). Call under ``_LOCK``.
        """
        key = json.dumps(entries, sort_keys=True, default=str)
        cached = self._suites.get(suite)
        if cached and cached[0] == key:
            return cached[1]
        gx = self.gx
        expectations = [
            getattr(gx.expectations, e["type"])(**e["kwargs"], severity=e["severity"], meta={"name": e["name"]})
            for e in entries
        ]
        gx_suite = self.ctx.suites.add_or_update(gx.ExpectationSuite(name=suite, expectations=expectations))
        self._suites[suite] = (key, (gx_suite, self._batch_definition(suite)))
        return self._suites[suite][1]

    def _batch_definition(self, suite: str):
        try:
            asset = self.source.get_asset(suite)
        except (LookupError, ValueError):
            asset = self.source.add_dataframe_asset(suite)
        try:
            return asset.get_batch_definition("whole")
        except (LookupError, ValueError, KeyError):
            return asset.add_batch_definition_whole_dataframe("whole")

    def validate(self, suite: str, frame: pl.DataFrame, params: dict, subject: str, run_name: str) -> DQResult:
        """Validate ``frame`` with ``suite`` (parameters ``params``) and update Data Docs.

        ``subject`` names what was validated (a file path or table name);
        ``run_name`` groups results in Data Docs (e.g. the day). A profile
        frame (columns ``__n``, ``__first_row``) has its failures reported in
        file rows: unexpected_count = rows represented, rows = first file rows.
        """
        return self._validate_alone(suite, frame, params, subject, run_name)

    def _validate_alone(
        self, suite: str, frame: pl.DataFrame, params: dict, subject: str, run_name: str, only: set[str] | None = None
    ) -> DQResult:
        """:meth:`validate`, ``only``: run just
        the expectations of these names, the others being known to pass (GX
        decides each expectation on its own, so the failures are those of a
        run of the whole suite); the run is kept for Data Docs under the
        suite's name plus ``.failed``."""
        whole = frame
        profile = PROFILE_N in frame.columns and PROFILE_ROW in frame.columns
        if profile:
            frame = frame.drop(PROFILE_N, PROFILE_ROW)
        spec = load_spec(suite)
        entries = expand_spec(spec, params, frame.columns, self.severity)
        n_expectations = len(entries)
        gx_suite = suite
        if only is not None:
            entries, gx_suite = [e for e in entries if e["name"] in only], f"{suite}.failed"
        frame = frame.select(read_columns(entries, frame.columns))
        vr = self.run_checkpoint(gx_suite, entries, frame, "COMPLETE" if profile else "SUMMARY", subject, run_name)
        failures = []
        for r in vr.results:
            if r.success:
                continue
            res = r.result or {}
            if profile:
                idx = [i for i in res.get("unexpected_index_list") or [] if isinstance(i, int)]
                count, rows = profile_failure(whole, idx) if idx else (res.get("unexpected_count"), [])
            else:
                count = res.get("unexpected_count")
                rows = [i + 1 for i in res.get("partial_unexpected_index_list") or [] if isinstance(i, int)][:5]
            failures.append(failure(r, count, rows, res.get("partial_unexpected_list")))
        return DQResult(spec["table"], suite, subject, n_expectations, failures)

    def run_checkpoint(
        self,
        suite: str,
        entries: list[dict],
        frame: pl.DataFrame | pd.DataFrame,
        result_format: str,
        subject: str,
        run_name: str,
    ):
        """Run ``suite`` as expanded in ``entries`` (:func:`expand_spec`) on
        ``frame`` (polars, escaped by :func:`html_safe` and converted here, or
        a pandas frame so prepared) with GX's ``result_format`` ("COMPLETE" or "SUMMARY"): one
        validation, kept in GX's validation store for Data Docs under
        ``run_name`` and ``subject``. Returns GX's validation result
        (``.results``: one per entry).

        The suite runs through GX's validator as a GX checkpoint's validation
        definition runs it, with the same result stored, but with neither a
        checkpoint nor a validation definition stored and re-read: a
        checkpoint run re-reads and compares its stored suite twice (its
        freshness checks), which with storing the checkpoint and definition
        weighs on a day's few validations (bench/README.md "startup.py");
        fairmon's suites come from ``expectations/``, not from
        GX's stores, so that check guarded nothing here.

        The suite runs first with GX's pass/fail format, and only the
        expectations that fail run again with ``result_format``
        (:func:`_detail_failures`): a day's gates nearly always pass, and the
        unexpected counts, values and rows GX would gather for every
        expectation are read only for failures. A passing expectation's
        stored result (and its Data Docs row) therefore carries no observed
        value.
        """
        from great_expectations.data_context.types.resource_identifiers import (
            ExpectationSuiteIdentifier,
            ValidationResultIdentifier,
        )
        from great_expectations.validator.v1_validator import Validator

        gx = self.gx
        fmt = {"result_format": result_format, "partial_unexpected_count": 5, "return_unexpected_index_query": False}
        with _LOCK:  # GX's file stores are not thread-safe: every context operation under one lock
            data = {"dataframe": html_safe(frame).to_pandas() if isinstance(frame, pl.DataFrame) else frame}
            run_id = gx.RunIdentifier(run_name=f"{run_name}_{re.sub(r'[^A-Za-z0-9_.-]', '_', subject)[-80:]}")
            gx_suite, batch_definition = self._suite(suite, entries)
            validator = Validator(batch_definition=batch_definition, batch_parameters=data, result_format=PASS_FAIL)
            vr = _detail_failures(validator, gx_suite, validator.validate_expectation_suite(gx_suite), fmt)
            # the meta a validation definition's run adds (GX's ValidationDefinition.run)
            vr.meta.update(run_id=run_id, validation_time=run_id.run_time, batch_parameters={"dataframe": DATAFRAME})
            suite_id = ExpectationSuiteIdentifier(name=suite)
            key = ValidationResultIdentifier(
                batch_identifier=validator.active_batch_id, expectation_suite_identifier=suite_id, run_id=run_id
            )
            with _stored_briefly(vr):
                self.ctx.validation_results_store.store_validation_results(vr, key, suite_id)
        self.pending_docs.append(key)
        return vr

    def validate_many(self, suite: str, frames: list[tuple[pl.DataFrame, str, str]], params: dict) -> list[DQResult]:
        """:meth:`validate` for several subjects at once (``frames``: (frame,
        subject, run name) triples, e.g. the profiles of a backfill's files or
        one output table of each of its days), with the
        same results, in one GX run per group of frames that share their
        schema (columns and types, in any order) instead of one run per frame (GX costs 0.1–0.5 s a run
        whatever the frame's size).

        A group is validated as one frame only when every expectation of the
        suite is decided row by row (:data:`ROW_WISE`; uniqueness with the
        subject added to its key) or is a table-level one that holds for each
        member exactly when it holds for the group (a column's existence, a
        minimum of one row: same columns, at least one row each) or that is
        seen to hold for each member before the run (a column's distinct values
        containing a set: a member without them is validated alone). A
        subject passes when no row of its own failed. A subject with rows of
        its own failing has its failures read from the stacked run's
        unexpected rows that are its own
        (:func:`fairmon.pipelines.checks.split.member_failures`), or, where
        that cannot be relied on, is validated alone on just the
        expectations it failed (:meth:`_validate_alone` with ``only``: GX
        decides each expectation on its own, the others passed on its rows);
        either way its failure details (counts, rows, samples) are exactly
        those of a run on the subject alone (a warning failing on every day
        costs one more GX run per day). Every empty frame, every group that cannot be batched and every
        group where a table-level expectation failed is validated alone by
        :meth:`validate`. Returns one :class:`DQResult` per triple, in order.
        """
        out: list[DQResult | None] = [None] * len(frames)
        spec = load_spec(suite)
        groups: dict[tuple, list[int]] = {}
        for i, (frame, *_) in enumerate(frames):
            if frame.height:  # the same columns in another order (a pooled random file's ``arm``) still stack
                groups.setdefault(tuple(sorted(frame.schema.items())), []).append(i)
        for members in groups.values():
            check = [c for c in frames[members[0]][0].columns if c not in (PROFILE_N, PROFILE_ROW)]
            entries = expand_spec(spec, params, check, self.severity)
            if not all(batchable(e) for e in entries):
                continue
            members = [i for i in members if all(holds_for(e, frames[i][0]) for e in entries)]
            if len(members) >= 2:
                self._validate_stack(suite, [(i, *frames[i]) for i in members], params, entries, check, out)
        for i, (frame, subject, run_name) in enumerate(frames):
            if out[i] is None:
                out[i] = self.validate(suite, frame, params, subject, run_name)
        return out

    def _validate_stack(
        self,
        suite: str,
        members: list[tuple],
        params: dict,
        entries: list[dict],
        check: list[str],
        out: list,
        again: int | None = None,
    ) -> None:
        """:meth:`validate_many`'s one GX run on ``members`` ((position in
        ``out``, frame, subject, run name), sharing their columns ``check``
        and ``entries``, the suite as expanded for them), each member's
        result written to ``out``. When the members are profiles and every
        expectation is decided by the values of a column or pair
        (:func:`fairmon.pipelines.checks.cover.covered_columns`), each member
        is represented by its :func:`~fairmon.pipelines.checks.cover.covering_rows`;
        the members that fail there are run again, whole, stacked, on the
        expectations any of them failed (``again``: the suite's expectation
        count, the run kept as the suite's ``.failed``), for GX to count their
        rows. A member whose failures cannot be read from a stacked run
        (:func:`~fairmon.pipelines.checks.split.member_failures`) is validated
        alone on the expectations it failed. A failure GX decided for the
        stack (not row by row) leaves every member to be validated alone by
        the caller."""
        spec = load_spec(suite)
        # profiles only: their failures are an input's defects, rare; an output's warning can fail on every day
        # (no_small_groups at K = 4,096), cheaper read from the stack of whole frames (member_failures) than re-run
        cover = covered_columns(entries) if again is None and PROFILE_N in members[0][1].columns else None
        check = read_columns(entries, check)
        parts = [frame.select(check) for _, frame, *_ in members]
        if cover is not None:
            parts = [covering_rows(p, cover) for p in parts]
        whole = pl.concat([p.with_columns(pl.lit(pos).alias(SUBJECT)) for pos, p in enumerate(parts)], how="vertical")
        bounds = np.cumsum([0] + [p.height for p in parts])
        (_, _, first, first_run), (_, _, last, last_run) = members[0], members[-1]
        subject = f"{len(members)} subjects: {first} {first_run} .. {last} {last_run}"
        seen = html_safe(whole).to_pandas()  # kept: a failing member's unexpected values are read from it
        gx_suite = suite if again is None else f"{suite}.failed"
        vr = self.run_checkpoint(gx_suite, [per_subject(e) for e in entries], seen, "COMPLETE", subject, first_run)
        n = len(vr.results) if again is None else again
        failed: dict[int, set[str]] = {}  # member position -> names of the expectations its own rows failed
        unexpected: dict[str, np.ndarray] = {}  # expectation name -> the stack's unexpected rows
        for r in vr.results:
            if r.success:
                continue
            at = unexpected_rows((r.result or {}).get("unexpected_index_list"))
            if r.expectation_config.type not in ROW_WISE or at is None:
                return  # decided for the group: each alone, whole
            unexpected[r.expectation_config.meta["name"]] = at
            for pos in np.unique(np.searchsorted(bounds, at, side="right") - 1).tolist():
                failed.setdefault(pos, set()).add(r.expectation_config.meta["name"])
        rerun = []
        for pos, (i, frame, subj, _) in enumerate(members):
            if pos not in failed:
                out[i] = DQResult(spec["table"], suite, subj, n, [])
            elif cover is not None:
                rerun.append(members[pos])
            else:
                own = member_failures(vr, unexpected, seen, whole, frame, (bounds[pos], bounds[pos + 1]), failed[pos])
                out[i] = DQResult(spec["table"], suite, subj, n, own) if own is not None else None
        names = set().union(*failed.values())
        if len(rerun) > 1:
            self._validate_stack(suite, rerun, params, [e for e in entries if e["name"] in names], check, out, n)
        for pos, (i, frame, subj, run_name) in enumerate(members):
            if out[i] is None:
                out[i] = self._validate_alone(suite, frame, params, subj, run_name, only=failed[pos])


def _detail_failures(validator, gx_suite, vr, result_format: dict):
    """GX's validation result ``vr`` of ``gx_suite`` (run by ``validator`` with
    :data:`PASS_FAIL`) with each failed expectation's result replaced by a
    run of just the failed expectations with ``result_format`` on the same
    batch: each expectation's result (by name) is the one a run of the
    whole suite with ``result_format`` (GX's result-format dict) gives, in
    the order of the pass/fail run.

    Why it is the same: GX decides each expectation of a suite from its own
    metrics, and a result format adds metrics (unexpected values, rows,
    counts) without changing the ones success is decided from. Should a
    detailed run still disagree on an expectation's success, the whole
    suite is run again with ``result_format`` and that result returned."""
    failed = [r for r in vr.results if not r.success]
    if not failed or result_format["result_format"] == PASS_FAIL:
        return vr

    def name(r) -> str:
        return r.expectation_config.meta["name"]

    names = {name(r) for r in failed}
    again = type(gx_suite)(
        name=gx_suite.name, expectations=[e.configuration for e in gx_suite.expectations if e.meta["name"] in names]
    )
    validator.result_format = result_format
    detail = {name(r): r for r in validator.validate_expectation_suite(again).results}
    if any(n not in detail or detail[n].success for n in names):
        return validator.validate_expectation_suite(gx_suite)
    vr.results = [detail.get(name(r), r) for r in vr.results]
    return vr


#: Unexpected row indices a stored validation result keeps per expectation
#: (:func:`_stored_briefly`); its ``unexpected_count`` still gives them all.
STORED_INDICES = 20


@contextlib.contextmanager
def _stored_briefly(vr):
    """While storing ``vr`` (a GX validation result): each ``unexpected_index_list``
    cut to its first :data:`STORED_INDICES`, then restored for the gate. A warning failing on every
    row of a stacked check (all groups small at K = 4,096) otherwise serialised tens of thousands
    of indices no one reads (Data Docs show the partial lists)."""
    full = []
    for r in vr.results:
        idx = (r.result or {}).get("unexpected_index_list")
        if isinstance(idx, list) and len(idx) > STORED_INDICES:
            full.append((r.result, idx))
            r.result["unexpected_index_list"] = idx[:STORED_INDICES]
    try:
        yield
    finally:
        for res, idx in full:
            res["unexpected_index_list"] = idx


# GX contexts are a process-wide cache by nature: creating one costs seconds, and
# two contexts on one folder would race on its file stores (GX's stores are not
# thread-safe). One per project folder, shared by every run of this process.
_GATES: dict[Path, QualityGate] = {}
_GATES_LOCK = threading.Lock()  # held while a gate is created: a second thread waits for it


def drop_unreadable_suites(root: Path) -> list[Path]:
    """Delete the stored expectation suites under ``root`` that are not a
    JSON object: what a write cut short by a full disk leaves (an empty
    file), which GX would fail to read on every later run with a TypeError.
    The suites are fairmon's own (``expectations/``), so the next validation
    stores them again. Returns the files deleted. Raises nothing."""
    dropped = []
    for path in (root / "gx" / "expectations").glob("*.json"):
        try:
            ok = isinstance(json.loads(path.read_text(encoding="utf-8") or "null"), dict)
        except (OSError, ValueError):
            ok = False
        if not ok:
            with contextlib.suppress(OSError):
                path.unlink()
                dropped.append(path)
    return dropped


def gate_for(cfg: FairmonConfig) -> QualityGate:
    """The GX gate of ``cfg``'s project folder (created on first use), with
    ``cfg``'s severity overrides."""
    root = cfg.gx_root.resolve()
    with _GATES_LOCK:
        if root not in _GATES:
            _GATES[root] = QualityGate(root, spark=cfg.engine == "spark")
        gate = _GATES[root]
        gate.severity = dict(cfg.quality.severity)
        return gate


def prune_gx(root: Path, keep_days: int, now: float | None = None) -> int:
    """Delete GX validation results and their Data Docs pages (under
    ``<root>/gx/uncommitted/validations`` and ``.../data_docs/local_site/validations``)
    last written more than ``keep_days`` days before ``now`` (epoch seconds,
    default: the current time), then their empty folders. The warehouse's
    ``dq_results`` keeps every day's outcome; only GX's copies go. Returns the
    number of files deleted."""
    import time

    cutoff = (time.time() if now is None else now) - keep_days * 86400
    base = root / "gx" / "uncommitted"
    removed = 0
    for tree in (base / "validations", base / "data_docs" / "local_site" / "validations"):
        if not tree.is_dir():
            continue
        for f in tree.rglob("*"):
            if f.is_file() and f.stat().st_mtime < cutoff:
                f.unlink()
                removed += 1
        for d in sorted((d for d in tree.rglob("*") if d.is_dir()), key=lambda d: len(d.parts), reverse=True):
            if not any(d.iterdir()):
                d.rmdir()
    return removed


def build_docs(cfg: FairmonConfig) -> Path:
    """Render the validations run so far into GX Data Docs, unless the current
    run defers them to its end (a backfill; see
    :func:`fairmon.pipelines.orchestration.runner.docs_deferred`). Returns the Data Docs index page."""
    gate = gate_for(cfg)
    run = active_run()
    return gate.data_docs_index if run is not None and run.docs_deferred else gate.build_docs()
