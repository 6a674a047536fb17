"""The data-quality checks a batch of days makes on its counts and outputs, one GX run per suite for all its days.

The suites are in ``expectations/`` and run through the gate
(:mod:`fairmon.pipelines.checks.gate`); the frames they check are built by
:mod:`fairmon.transforms.gate_frames`. Days checked together get the results
each would get alone (:meth:`fairmon.pipelines.checks.gate.QualityGate.validate_many`),
at one GX run (0.1-0.5 s) per suite instead of one per day.
"""

from __future__ import annotations

import datetime as dt
import time

import polars as pl

from fairmon.pipelines.checks.gate import gate_for
from fairmon.pipelines.checks.suites import DQResult, dq_frame
from fairmon.pipelines.core import timing
from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.core.config_sections import PYTHON_CHECKS
from fairmon.pipelines.executor.outcomes import DayFailed, step
from fairmon.pipelines.ingest.file_summaries import FileSummaries, file_summaries
from fairmon.pipelines.ingest.identity import unit_key
from fairmon.pipelines.ingest.preflight import missing_default_note
from fairmon.pipelines.ingest.shared_ids import overlapping_pairs, shared_ids
from fairmon.pipelines.ingest.sources import ImpressionsInput, day_files, file_units
from fairmon.pipelines.ingest.staging import run_logger
from fairmon.pipelines.ingest.windows import random_window_note, tiktok_pools
from fairmon.pipelines.storage import db
from fairmon.transforms.contract import InputContractError
from fairmon.transforms.gate_frames import day_check_frame, output_check_frame


def validate_days(
    cfg: FairmonConfig, suite: str, frames: dict[dt.date, tuple[pl.DataFrame, str]], params: dict
) -> dict[dt.date, DQResult]:
    """``suite`` (parameters ``params``) on each day's frame, ``frames``:
    {day: (frame, subject)}, in one GX run for the frames that share a schema
    (:meth:`fairmon.pipelines.checks.gate.QualityGate.validate_many`). Its
    seconds go to the days' ``checks`` in equal parts. Returns {day: result}.
    Raises what GX raises."""
    days = list(frames)
    t0 = time.perf_counter()
    try:
        triples = [(frame, subject, str(ds)) for ds, (frame, subject) in frames.items()]
        results = gate_for(cfg).validate_many(suite, triples, params)
    finally:
        timing.share(days, "checks", time.perf_counter() - t0)
    return dict(zip(days, results, strict=True))


@step("check-day")
def check_days(cfg: FairmonConfig, counts: dict[dt.date, pl.DataFrame]) -> dict[dt.date, DQResult]:
    """The ``impressions_day`` suite on each day's group counts, ``counts``:
    {day: counts} (traffic present, positives per group, positive-rate
    bounds, random-traffic sufficiency), a failed random_traffic_present
    explained (:func:`explain_missing_traffic`). Returns {day: result}.
    Raises what GX raises."""
    q = cfg.quality
    frames = {
        ds: (day_check_frame(c, q.sufficiency_epsilon, q.sufficiency_delta), f"impressions {ds}")
        for ds, c in counts.items()
    }
    params = {"positive_rate_min": q.positive_rate_min, "positive_rate_max": q.positive_rate_max}
    checked = validate_days(cfg, "impressions_day", frames, params)
    return {ds: explain_missing_traffic(cfg, ds, explain_groups(frames[ds][0], r)) for ds, r in checked.items()}


def explain_groups(frame: pl.DataFrame, result: DQResult) -> DQResult:
    """Name the cells behind each failed row check of ``result`` (the
    ``impressions_day`` suite on ``frame``: group_has_positives,
    positive_rate_in_bounds, random_traffic_sufficient): the ``note`` of a
    failure, shown in the quarantine message and dq_results details, says
    for each failing row its traffic, arm, attribute and group with n_pos of
    n (e.g. ``random traffic, arm all, young_adult = 1: n_pos 0 of n 523``),
    with the rate or the random rows the window needs where that is the rule.
    ``rows`` are 1-based rows of ``frame``. Returns ``result``, updated in place."""
    for f in result.failures:
        rows = [r for r in f.get("rows") or [] if isinstance(r, int) and 1 <= r <= frame.height]
        if not rows or not {"traffic", "attribute", "group", "n", "n_pos"} <= set(frame.columns):
            continue
        cells = []
        for r in frame[[r - 1 for r in rows]].iter_rows(named=True):
            arm = f", arm {r['arm']}" if "arm" in r else ""
            cell = f"{r['attribute']} = {r['group']}: n_pos {r['n_pos']} of n {r['n']}"
            if f["name"] == "positive_rate_in_bounds" and r.get("rate") is not None:
                cell += f" (rate {r['rate']:.4g})"
            if f["name"] == "random_traffic_sufficient" and r.get("rand_required") is not None:
                cell += f" (the window needs {r['rand_required']:,.0f} random rows, seed 001 Thm E.1)"
            cells.append(f"{r['traffic']} traffic{arm}, {cell}")
        f["note"] = "; ".join(cells)
    return result


def window_files(cfg: FairmonConfig, ds: dt.date) -> dict[str, str]:
    """{path: why day ``ds`` reads it} for the impressions files of ``ds``'s random window that are
    not its own (another day's file whose random rows it pools): a failure of such a file quarantines
    ``ds`` too, and the quarantine message says why ("a file of 2026-03-05's random window, …").
    Empty for a catalog table (its subjects name their partition's day), when the files cannot be listed
    (:func:`~fairmon.pipelines.ingest.sources.file_units`) or in a project without impressions (labels,
    scores or a reachability snapshot only, whose subjects name their files)."""
    if cfg.impressions is None:
        return {}
    why = f" (a file of {ds}'s random window, random_window_days = {cfg.impressions.random_window_days})"
    return {str(u.file): why for u in file_units(cfg, ds) or [] if u.ds_start != ds or u.ds_end != ds}


def explain_missing_traffic(cfg: FairmonConfig, ds: dt.date, result: DQResult) -> DQResult:
    """Give a failed ``random_traffic_present`` of day ``ds``'s ``result`` the
    reason (``note``, shown in the quarantine message, its alert and
    dq_results details): the day's window, the pool policy and the pools it
    left out (DESIGN §2 "Random-traffic windows"); and a failed
    ``default_traffic_present`` the missing file, where that is why (the
    pre-flight's sentence: a backfill's day without its file says so, not only
    the expectation's name). Returns ``result``, updated in place."""
    for f in result.failures:
        if f["name"] == "random_traffic_present":
            try:
                f["note"] = random_window_note(cfg, ds)
            except InputContractError as e:
                f["note"] = str(e)
        elif f["name"] == "default_traffic_present" and (why := missing_default_note(cfg, ds)):
            f["note"] = why
    return result


@step("check-outputs")
def check_outputs(cfg: FairmonConfig, frames: dict[dt.date, dict[str, pl.DataFrame]]) -> dict[dt.date, list[DQResult]]:
    """The output suites (``expectations/<table>.json``) on each day's new
    rows, ``frames``: {day: {table: frame as :func:`output_check_frames`
    builds it}}; one GX run per table for all the days. Returns {day: its
    results, in its tables' order}. Raises what GX raises."""
    out: dict[dt.date, list[DQResult]] = {ds: [] for ds in frames}
    tables = list(dict.fromkeys(name for day in frames.values() for name in day))
    for name in tables:
        having = {ds: (day[name], name) for ds, day in frames.items() if name in day}
        for ds, result in validate_days(cfg, name, having, {}).items():
            out[ds].append(result)
    order = {ds: list(day) for ds, day in frames.items()}
    return {ds: sorted(rs, key=lambda r, o=order[ds]: o.index(r.subject)) for ds, rs in out.items()}


def output_check_frames(tables: dict[str, pl.DataFrame], totals: pl.DataFrame | None) -> dict[str, pl.DataFrame]:
    """The frames the output suites check, per table of ``tables``: each as
    :func:`fairmon.transforms.gate_frames.output_check_frame` builds it
    (group_counts beside ``totals``, rows staged per traffic and arm; reo
    with its √(K−1) bound; reo_ab with its undefined rows that lack a
    reason; the others as they are). Raises KeyError for a table the registry
    does not declare and what the frame builders raise."""
    return {name: output_check_frame(name, frame, {"totals": totals}) for name, frame in tables.items()}


def ab_config_check(cfg: FairmonConfig, counts: pl.DataFrame) -> list[DQResult]:
    """A warning (in dq_results and the run summary) when ``[ab] control`` or
    a configured pair names an arm the day's default traffic (``counts``)
    does not have: the A/B comparison it asks for cannot be made, and must
    not vanish silently: the warning is also logged (``fairmon`` logger: on
    the command's stderr) naming the arm and the [ab] key. Returns [] or one
    warning result."""
    arms = set(counts.filter(pl.col("traffic") == "default").get_column("arm").to_list())
    wanted = ([cfg.ab.control] if cfg.ab.control else []) + [a for p in cfg.ab.pairs for a in p]
    missing = sorted({a for a in wanted if a not in arms})
    if not missing or not arms:
        return []
    keys = (["[ab] control"] if cfg.ab.control in missing else []) + (
        ["[ab] pairs"] if any(a in missing for p in cfg.ab.pairs for a in p) else []
    )
    run_logger().warning(
        "%s: %s names arm(s) %s, which the day's default traffic does not have (its arms: %s): "
        "reo_ab has no rows for them; rename the arm in the config or in the logs",
        counts.get_column("ds")[0] if "ds" in counts.columns and counts.height else "day",
        " and ".join(keys),
        ", ".join(missing),
        ", ".join(sorted(arms)),
    )
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


def donor_group_check(cfg: FairmonConfig, ds: dt.date, unresolved: pl.DataFrame, group_rows: int = 0) -> DQResult:
    """The ``swap_donor_group_resolved`` expectation of day ``ds`` (DESIGN
    §4.7): every swap row of the envy window has a donor group (from ``[envy]
    user_table``, the donor's own rows anywhere in the window, or its
    policy_group). ``unresolved`` (sql/envy_unresolved_donors.sql): per donor,
    the rows left out of group envy, of the day (n_day) and of the window
    (n_window). A failure counts the window's rows (``unexpected_count``, the
    rows the day's bounds lose), names the day's and up to 5 donor ids
    (``sample``) and the attributes. Its severity is ``[quality.severity]``'s
    when set, else a warning while the day's group_envy table has rows
    (``group_rows``: the rows left out are counted in its
    ``donor_rows_left_out``, and the per-user certificates need no donor
    group) and critical when it would be empty. Returns a :class:`DQResult`
    (no failure when all resolve)."""
    total = int(unresolved.get_column("n_window").sum() or 0)
    if total == 0:
        return DQResult("group_envy", "envy_donors", f"swap rows {cfg.envy.start}..{ds}", 1)
    name = "swap_donor_group_resolved"
    ids = [
        r["donor_user_id"] if r["donor_user_id"] is not None else f"policy_group={r['policy_group']}"
        for r in unresolved.head(5).iter_rows(named=True)
    ]
    attrs = sorted({a for s in unresolved.get_column("attributes").to_list() for a in s.split(", ")})
    day = int(unresolved.get_column("n_day").sum() or 0)
    failure = {
        "name": name,
        "severity": cfg.quality.severity.get(name, "warning" if group_rows else "critical"),
        "type": "envy_donors",
        "column": "policy_user_id",
        "unexpected_count": total,
        "n_day": day,
        "n_donors": unresolved.height,
        "attributes": attrs,
        "rows": [],
        "sample": ids,
        "note": (
            f"{total} swap row(s) since {cfg.envy.start} ({day} of the day) have a donor whose group "
            f"({', '.join(attrs)}) is in neither [envy] user_table nor any row of the donor's own in the "
            "window (nor a policy_group for the group attribute); they are left out of group_envy "
            "(its donor_rows_left_out)"
        ),
    }
    return DQResult("group_envy", "envy_donors", f"swap rows {cfg.envy.start}..{ds}", 1, [failure])


def dq_tables(cfg: FairmonConfig, results: dict[dt.date, list[DQResult]]) -> dict[dt.date, pl.DataFrame]:
    """Each day's dq_results rows from its ``results``, checked by the
    dq_results suite (one GX run for the days). Returns {day: frame}.
    Raises :class:`DayFailed` (naming the first day whose frame fails) or
    what GX raises; a caller that must tell the days apart checks one a call."""
    frames = {ds: dq_frame(ds, rs) for ds, rs in results.items()}
    checked = validate_days(cfg, "dq_results", {ds: (f, "dq_results") for ds, f in frames.items()}, {})
    for ds, meta in checked.items():
        if not meta.success:
            raise DayFailed(f"{ds}: stage dq_results: {meta.summary()}")
    return frames


#: The check of :func:`file_copies_check` (severity overridable in ``[quality.severity]``).
FILE_COPIES = PYTHON_CHECKS[0]


def file_copies_check(cfg: FairmonConfig, ds: dt.date, known: FileSummaries | None = None) -> list[DQResult]:
    """Whether two of day ``ds``'s impressions files hold the same rows
    (sql/impressions_file_copies.sql over the signatures of their staged
    rows, each file's read once a batch: ``known``): a random
    pool copied under a second name, with another declared range, would
    count its traffic twice and narrow every interval. Critical by default,
    like repeated ids within one file (``ids_unique``); the failure names
    both files. Returns [] or one failed result. Raises what DuckDB raises."""
    files = day_files(cfg, [ds]).get_column("file").unique().sort().to_list()
    if len(files) < 2:
        return []
    with timing.clock(ds, "checks"), db.connect(cfg.duckdb_path) as con:
        signatures = file_summaries(con, "signatures", files, pool_keys(cfg), known)
        con.register("file_signatures", signatures)
        try:
            pairs = db.rows(con, "impressions_file_copies")
        finally:
            con.unregister("file_signatures")
    if not pairs:  # like ab_config_check: a result only when it fails, so dq_results of clean days are as before
        return []
    failure = {
        "name": FILE_COPIES,
        "severity": cfg.quality.severity.get(FILE_COPIES, "critical"),
        "type": "files",
        "column": "src_file",
        "unexpected_count": len(pairs),
        "rows": [],
        "sample": [f"{a} = {b}" for a, b, _ in pairs[:5]],
        "note": "; ".join(
            f"files {a} and {b} hold the same {n} rows (a copy: their traffic would count twice)" for a, b, n in pairs
        ),
    }
    return [DQResult("impressions", "impressions_files", f"impressions files of {ds}", 1, [failure])]


#: The check of :func:`shared_ids_check` (severity overridable in ``[quality.severity]``).
SHARED_IDS = PYTHON_CHECKS[2]


def shared_ids_check(cfg: FairmonConfig, ds: dt.date, known: FileSummaries | None = None) -> list[DQResult]:
    """Whether two of day ``ds``'s impressions files hold the same id key
    (ds, traffic, request_id, item_id; DESIGN §2 makes it unique over the
    log, not only within a file): a pool copied with a few extra rows, rows
    pasted into another day's file. Only pairs whose staged rows share a
    traffic and dates are read again
    (:mod:`fairmon.pipelines.ingest.shared_ids`), so clean inputs cost no
    input row. Critical by default, like repeats within one file
    (``ids_unique``); the failure names each pair's two files, its count of
    shared keys and up to 5 of them. Returns [] or one failed result.
    Raises what DuckDB raises, :class:`InputContractError` for an unreadable file."""
    imp = cfg.impressions
    if imp is None or imp.table is not None or imp.format == "coat":
        return []  # a catalog partition holds one day and never shares it; Coat is one file
    try:
        units = {unit_key(cfg, u.file): u for u in ImpressionsInput(cfg).units(ds)}
    except InputContractError:
        return []  # the day's ingest reports it
    if len(units) < 2:
        return []
    found = []
    with timing.clock(ds, "checks"):
        for a, b in overlapping_pairs(cfg, list(units), pool_keys(cfg), known):
            shared = shared_ids(cfg, units[a], units[b])
            if shared.height:
                found.append((a, b, shared))
    if not found:  # like file_copies_check: a result only when it fails
        return []
    total = sum(int(s.get_column("n_shared")[0]) for _, _, s in found)
    failure = {
        "name": SHARED_IDS,
        "severity": cfg.quality.severity.get(SHARED_IDS, "critical"),
        "type": "files",
        "column": "request_id, item_id",
        "unexpected_count": total,
        "rows": [],
        "sample": [f"{a} & {b}: " + ", ".join(_key_text(r) for r in s.iter_rows(named=True)) for a, b, s in found[:5]],
        "note": "; ".join(
            f"files {a} and {b} share {int(s.get_column('n_shared')[0])} id key(s) (ds, traffic, request_id, "
            "item_id): those rows would count twice"
            for a, b, s in found
        ),
    }
    return [DQResult("impressions", "impressions_files", f"impressions files of {ds}", 1, [failure])]


def _key_text(row: dict) -> str:
    """One shared key as text: ``(ds, traffic, request_id, item_id)``, without ds between pools (no row date)."""
    return "(" + ", ".join(str(row[c]) for c in ("ds", "traffic", "request_id", "item_id") if row[c] is not None) + ")"


def pool_keys(cfg: FairmonConfig) -> list[str]:
    """Identities of the config's pooled random-traffic files (TikTok format),
    whose staged dates are their declared range rather than the rows' own."""
    imp = cfg.impressions
    if imp is None or imp.format != "tiktok":
        return []
    return [unit_key(cfg, p) for p, _, _ in tiktok_pools(cfg)]
