"""The pre-flight check's value scan: each day's own impressions files (not
the random pools or envy window it shares with other days) not yet staged
are read (their profile, as staging reads them) and the raw suite's
critical value expectations are evaluated on it without Great Expectations
(:mod:`fairmon.pipelines.checks.value_checks`), so a label written "yes", a
traffic value outside the set, an empty signal or a repeated id is an
``error:`` line naming the file, the first row, the column and the values
accepted, within seconds; an empty cluster id or a CSV row with more fields
than the header likewise. Each profile is kept
for the staging of the same process
(:func:`fairmon.pipelines.ingest.adapters.keep_read`): a file is read once a
run. Only the first :data:`KEPT_DAYS` days of a range are scanned. Files
already staged and unchanged are not read again (their recorded result
stands), nor are catalog tables, Coat matrices or scores and labels logs
(their gate runs as before).
"""

from __future__ import annotations

import datetime as dt

import duckdb

from fairmon.pipelines.checks.suites import expand_spec, load_spec
from fairmon.pipelines.checks.value_checks import dated_outside, failing_values, shown_as_checked
from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.ingest.adapters import forget_kept, keep_read, profile_files
from fairmon.pipelines.ingest.preflight import Finding, repeated_keys_note, shown_path, zoned_day_note
from fairmon.pipelines.ingest.profiles import DONOR_COLUMNS, ENVY_FLAGS, NullClusterId, RaggedRow
from fairmon.pipelines.ingest.sources import ImpressionsInput
from fairmon.pipelines.ingest.staging import input_source, unchanged_files
from fairmon.transforms.contract import InputContractError, without_buckets
from fairmon.transforms.gate_frames import raw_check_frame

#: Days whose files one pre-flight reads and keeps for staging: a batch's first
#: chunk (pipelines/executor/days.py), so a long backfill's profiles are not all
#: held at once; later days' values are the gate's, as before.
KEPT_DAYS = 31

#: Characters of a quoted value in a finding (the rest is cut, with its length said).
VALUE_CHARS = 40


def value_findings(cfg: FairmonConfig, days: list[dt.date]) -> dict[dt.date, list[Finding]]:
    """Per day of ``days`` with one, the :class:`Finding` of each critical
    value expectation its unstaged impressions files fail (module
    docstring); days without are left out. A file that cannot be read is
    left to the run, which reports it. Raises nothing of its own."""
    imp = cfg.impressions
    if imp is None or imp.format == "coat" or imp.table is not None or not days:
        return {}
    forget_kept()
    units = {}
    for ds in sorted(days)[:KEPT_DAYS]:
        try:
            units[ds] = ImpressionsInput(cfg).units(ds)
        except InputContractError:
            continue
    # a day's own files only (not the random pools or envy window it shares): a failing own file surely
    # quarantines the day, while a shared file's failure is the gate's to weigh for each day that reads it
    units = {ds: [u for u in us if u.ds_start == u.ds_end == ds and u.scope != "random"] for ds, us in units.items()}
    todo = {u.file: u for us in units.values() for u in us if u.file.is_file()}
    staged = _staged(cfg, list(todo.values()))
    src = input_source(cfg, "impressions")
    spec, severity = load_spec(src.suite), dict(cfg.quality.severity)
    fresh = {file: unit for file, unit in todo.items() if file not in staged}
    profiles = profile_files(cfg, list(fresh)) if len(fresh) > 1 else {}  # one scan per Parquet schema
    by_file: dict = {}
    for file, unit in fresh.items():
        try:
            raw = keep_read(cfg, unit, profiles.pop(str(file), None))
        except (NullClusterId, RaggedRow) as e:  # its own finding: the run would fail on it
            by_file[file] = [(e.check, shown_path(cfg, file), f"{shown_path(cfg, file)}: {e.message_at}")]
            continue
        except InputContractError:
            continue
        raw = without_buckets(raw)
        checked = raw_check_frame(raw, src.text_columns)
        entries = expand_spec(spec, src.params, checked.columns, severity)
        shown = shown_as_checked(raw, checked)
        found = failing_values(entries, checked, shown=shown)
        found += dated_outside(checked, unit.ds_start, unit.ds_end, shown)
        by_file[file] = [_finding(cfg, file, f) for f in found]
    out = {}
    for ds, us in units.items():
        found = [Finding(ds, "impressions", *f) for u in us for f in by_file.get(u.file, [])]
        if found:
            out[ds] = found
    return out


def _staged(cfg: FairmonConfig, units: list) -> set:
    """The files of ``units`` staged unchanged
    (:func:`fairmon.pipelines.ingest.staging.unchanged_files`), read from the DuckDB file opened
    read-only: the pre-flight check creates, writes and locks nothing. None
    when the file or its ingest log does not exist yet, or another process
    writes it now (every file is then read)."""
    if not units or not cfg.duckdb_path.is_file():
        return set()
    try:
        con = duckdb.connect(str(cfg.duckdb_path), read_only=True)
    except (duckdb.Error, OSError):
        return set()
    try:
        return set(unchanged_files(cfg, con, units))
    except duckdb.Error:
        return set()
    finally:
        con.close()


def _quoted(value: str) -> str:
    text = repr(value)
    return text if len(text) <= VALUE_CHARS else f"{text[:VALUE_CHARS]}… ({len(value):,} characters)"


def _finding(cfg: FairmonConfig, file, failure: dict) -> tuple[str, str, str]:
    """(check, shown file, message) of one failing value expectation; a ``ds``
    that is no day because it is a zoned instant (shown in UTC) says why."""
    shown = shown_path(cfg, file)
    if failure["name"] == "ids_unique" and file.is_file():  # its column is the profile's count of copies
        note = repeated_keys_note(file)
        return failure["name"], shown, f"{shown}: {note} ({failure['rows']:,} row(s) fail ids_unique)"
    if failure["column"] in ENVY_FLAGS:  # a flag the profile derives: name the file's own columns
        what = (
            "a default or swap row without a user_id"
            if failure["column"] == "has_user_id"
            else f"a traffic = 'swap' row naming no donor: neither {' nor '.join(DONOR_COLUMNS)}"
        )
        message = f"{shown}: row {failure['first_row']} is {what} ({failure['rows']:,} row(s) fail {failure['name']})"
        return failure["name"], shown, message + "; [envy] needs them (docs: Envy)"
    values = ", ".join(_quoted(v) for v in failure["values"])
    message = (
        f"{shown}: column {failure['column']!r}, row {failure['first_row']}: {values} "
        f"({failure['rows']:,} row(s) fail {failure['name']})"
    )
    if "value_set" in failure:
        message += f"; accepted: {', '.join(failure['value_set'])}"
    note = zoned_day_note(failure["name"], failure["values"])
    return failure["name"], shown, message + (f"; {note}" if note else "")
