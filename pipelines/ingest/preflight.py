"""The pre-flight check: the mistakes a newcomer makes with their own files,
found in a second from the files' headers, before Prefect's server or Great
Expectations start.

A day's inputs are the units :mod:`fairmon.pipelines.ingest.sources` names
(the same that are staged); for each the check reads what costs nothing:
whether the day's own file exists, the first 64 KiB of a CSV (its encoding)
and its header (Polars, the reader of the real run,
:func:`fairmon.pipelines.ingest.adapters.read_table`), a Parquet file's
schema. It reports only what the run would surely stop on: a day with no
default-traffic file (``default_traffic_present``), a file without a column
its raw suite requires (``column_exists[...]``, with the columns the file
has and the config key that names the column), an empty file
(``has_rows``), a CSV that is not UTF-8 (the reader fails on it); an
expectation a config's ``[quality] severity`` makes a warning is not
reported. A one-column header holding ``;``, a tab or ``|`` is named as a
wrong delimiter. Values are read by the second part of the check
(:mod:`fairmon.pipelines.ingest.preflight_values`), for days whose headers pass.
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from fairmon.pipelines.checks.suites import DQResult, expand_spec, load_spec
from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.ingest.headers import REPEATED_COLUMN, repeated_column
from fairmon.pipelines.ingest.sources import LogInput, file_units
from fairmon.pipelines.ingest.windows import matches
from fairmon.transforms.contract import InputContractError, adapt_impressions
from fairmon.transforms.contract_values import ZONED_DAY, ZONED_SUFFIX

#: Bytes of a CSV file read for its encoding and header.
HEAD_BYTES = 64 * 1024
#: Delimiters a one-column header is searched for (fairmon reads comma-separated CSV).
OTHER_DELIMITERS = {";": "';'", "\t": "tab", "|": "'|'"}


@dataclass(frozen=True)
class Finding:
    """One reason day ``ds`` would not publish: ``check`` is the expectation
    the gate would fail (``default_traffic_present``, ``column_exists[c]``,
    ``has_rows``, a value rule such as ``signal_is_boolean[c]``), ``readable``
    or ``cluster_id_not_empty``; ``file`` the file as the config's folder
    sees it; ``message`` says what is wrong, what was found and which config
    key to edit."""

    ds: dt.date
    source: str
    check: str
    file: str
    message: str


def raw_params(cfg: FairmonConfig, source: str) -> dict:
    """The parameters of input ``source``'s raw suite (``impressions_raw``,
    ``scores_raw``, ``labels_raw``): its required columns, signals,
    attributes and traffic values. One definition for the gate
    (:func:`fairmon.pipelines.ingest.staging.input_source`) and this check."""
    if source == "impressions":
        imp = cfg.impressions
        return {
            "required_columns": ["ds", "traffic", "arm", *imp.signals, *imp.attributes],
            "signals": imp.signals,
            "attributes": imp.attributes,
            "traffic_values": ["default", "random", *imp.stages, *(["swap"] if cfg.envy else [])],
        }
    sc = getattr(cfg, source)
    cols = (
        ["ds", "model", "item_id", "score", "outcome"]
        if source == "scores"
        else ["ds", "item_id", "labeler_id", "label", "gold_label"]
    )
    return {"required_columns": [*cols, *sc.attributes], "attributes": sc.attributes}


def column_key(cfg: FairmonConfig, source: str, column: str) -> str:
    """The config key that names ``column`` of input ``source`` (e.g.
    ``[impressions] signals``), or the format whose fixed column it is."""
    sec = getattr(cfg, source)
    for key in ("signals", "attributes"):
        if column in (getattr(sec, key, None) or []):
            return f"[{source}] {key}"
    fmt = getattr(sec, "format", "contract")
    return f'a fixed column of [{source}] format = "{fmt}" (docs "Input formats")'


def _critical(cfg: FairmonConfig, name: str, default: str = "critical") -> bool:
    sev = cfg.quality.severity
    return sev.get(name, sev.get(name.split("[")[0], default)) == "critical"


def _no_default_file(cfg: FairmonConfig, ds: dt.date, units: list) -> tuple[str, str] | None:
    """(the expected path as shown, why) when day ``ds`` of a file-based impressions config has no
    default-traffic file among ``units`` (its :func:`~fairmon.pipelines.ingest.sources.file_units`), else None."""
    imp = cfg.impressions
    if any(u.ds_start == ds and u.scope != "random" and u.traffic in (None, "default") for u in units):
        return None
    expected = shown_path(cfg, cfg.resolve(imp.path.replace("{ds}", ds.isoformat())))
    return expected, (
        f"no default-traffic file for {ds}: {expected} does not exist "
        f"([impressions] path = {imp.path!r}, {{ds}} = {ds})"
    )


def missing_default_note(cfg: FairmonConfig, ds: dt.date) -> str | None:
    """Why day ``ds`` has no default traffic when it is that its file does not exist (the pre-flight's
    sentence, for the day gate's ``default_traffic_present``); None when the file exists (its rows then
    hold no default traffic of the day), for a catalog table or Coat, or when the inputs cannot be listed."""
    units = file_units(cfg, ds)
    missing = None if units is None else _no_default_file(cfg, ds, units)
    return None if missing is None else missing[1]


def shown_path(cfg: FairmonConfig, path: Path) -> str:
    """``path`` relative to the config's folder when inside it."""
    try:
        return path.resolve().relative_to(cfg.base_dir.resolve()).as_posix()
    except (ValueError, RuntimeError, OSError):  # outside it, or a loop of symbolic links (the run names it)
        return str(path)


def read_header(path: Path) -> tuple[list[str], str | None]:
    """The column names of a CSV or Parquet file and, for a CSV, what keeps
    it from being read (not UTF-8, UTF-16, empty or a header alone), else None. Reads at most
    :data:`HEAD_BYTES` of a CSV and a Parquet file's footer only."""
    if path.suffix.lower() in (".parquet", ".pq"):
        try:
            return list(pl.read_parquet_schema(path)), None
        except (OSError, pl.exceptions.PolarsError) as e:
            return [], f"cannot read its Parquet schema: {e}"
    with open(path, "rb") as f:
        head = f.read(HEAD_BYTES)
    if not head:
        return [], "the file is empty (0 bytes)"
    if head[:2] in (b"\xff\xfe", b"\xfe\xff") or b"\x00" in head[:200]:
        return [], "the file is UTF-16 (or binary); fairmon reads UTF-8 CSV: save it as UTF-8"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 4:  # not a character cut at the end of the chunk
            line = head[: e.start].count(b"\n") + 1
            return [], (
                f"the file is not UTF-8 (byte {head[e.start]:#04x} on line {line}, e.g. Latin-1 or Windows-1252); "
                "fairmon reads UTF-8 CSV: save it as UTF-8"
            )
    try:
        columns = pl.read_csv(path, n_rows=0, infer_schema=False, glob=False).columns
    except (OSError, pl.exceptions.PolarsError) as e:
        return [], f"cannot read its header: {e}"
    twice = repeated_column(columns)
    if twice is not None:
        return columns, f"column {twice!r}: {REPEATED_COLUMN}"
    if len(head) < HEAD_BYTES and not any(line.strip() for line in head.splitlines()[1:]):  # the whole file read
        return columns, "the file is empty: a header and no rows"  # the gate said only "has_rows" later
    return columns, None


#: Columns fairmon knows by name in some format (never a suggestion for a misnamed configured column).
_KNOWN = {"ds", "traffic", "arm", "request_id", "item_id", "user_id", "policy_user_id", "policy_group"}


def _suggest(cfg: FairmonConfig, source: str, missing: str, found: list[str]) -> str:
    """``(did you mean 'x'?)`` for the found column most like ``missing``
    among those neither the config nor the format names, or ''."""
    named = set(raw_params(cfg, source)["required_columns"]) | _KNOWN
    free = [c for c in found if c not in named]
    close = [c for c in free if c and (c in missing or missing in c)]
    close = close or difflib.get_close_matches(missing, free, n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


def missing_columns_message(cfg: FairmonConfig, source: str, shown: str, missing: list[str], columns: list[str]) -> str:
    """What to tell about file ``shown`` of input ``source`` whose header
    (``columns``) lacks the required ``missing`` columns: each with the
    config key that names it and a close match, the columns found, the edit
    to make; a one-column header holding another delimiter is named as
    such."""
    if len(columns) == 1:
        for d, name in OTHER_DELIMITERS.items():
            if d in columns[0]:
                return (
                    f"{shown} looks {name}-delimited: its header is one column, {columns[0][:120]!r}; "
                    f"fairmon reads comma-separated CSV: re-export it with ',' "
                    f"(the columns {', '.join(missing)} are not found)"
                )
    by_key: dict[str, list[str]] = {}
    for c in missing:
        by_key.setdefault(column_key(cfg, source, c), []).append(f"{c!r}{_suggest(cfg, source, c, columns)}")
    parts = "; ".join(f"{', '.join(cs)}, named by {key}" for key, cs in by_key.items())
    keys = [k for k in by_key if k.startswith("[")]
    edit = f"rename the column in the file or edit {' / '.join(keys)} in the config" if keys else "add the column"
    return f"{shown} has no column {parts}; its columns: {', '.join(columns) or '(none)'}; {edit}"


class _Checker:
    """The checks of one config, each file's header read once however many days need it."""

    def __init__(self, cfg: FairmonConfig):
        self.cfg = cfg
        self.headers: dict[Path, tuple[list[str], str | None]] = {}

    def header(self, path: Path) -> tuple[list[str], str | None]:
        if path not in self.headers:
            self.headers[path] = read_header(path)
        return self.headers[path]

    def file_findings(self, ds: dt.date, source: str, path: Path, unit=None) -> list[Finding]:
        """What keeps file ``path`` of input ``source`` from passing its raw suite's column checks."""
        cfg, shown = self.cfg, shown_path(self.cfg, path)
        if not path.is_file():
            return []
        columns, unreadable = self.header(path)
        if unreadable:
            check = "has_rows" if "empty" in unreadable else "readable"
            if check == "has_rows" and not _critical(cfg, check):
                return []
            return [Finding(ds, source, check, shown, f"{shown}: {unreadable}")]
        seen = columns
        if source == "impressions":
            imp = cfg.impressions
            empty = pl.DataFrame(schema={c: pl.String for c in columns})
            seen = adapt_impressions(empty, ds=unit.ds_end, traffic=unit.traffic, default_arm=imp.default_arm).columns
        spec = load_spec(f"{source}_raw")
        entries = expand_spec(spec, raw_params(cfg, source), seen, dict(cfg.quality.severity))
        missing = [
            e["kwargs"]["column"]
            for e in entries
            if e["type"] == "ExpectColumnToExist" and e["severity"] == "critical" and e["kwargs"]["column"] not in seen
        ]
        out = []
        if missing:
            checks = ", ".join(f"column_exists[{c}]" for c in missing)
            out.append(
                Finding(ds, source, checks, shown, missing_columns_message(cfg, source, shown, missing, columns))
            )
        by = cfg.estimation.cluster_by
        if source == "impressions" and by not in ("auto", "none") and by not in seen:  # ingest would stop on it
            out.append(
                Finding(
                    ds, source, "cluster_column", shown,
                    f"{shown} has no column {by!r}, which [estimation] cluster_by = {by!r} makes every impressions "
                    f"file carry; its columns: {', '.join(columns) or '(none)'}; add it, or set cluster_by = 'auto' "
                    "(request_id where present) or 'none' (rows independent)",
                )
            )  # fmt: skip
        return out

    def impressions(self, ds: dt.date) -> list[Finding]:
        cfg = self.cfg
        units = file_units(cfg, ds)
        if units is None:
            return []
        out = []
        missing = _no_default_file(cfg, ds, units)
        if missing is not None and _critical(cfg, "default_traffic_present"):
            out.append(Finding(ds, "impressions", "default_traffic_present", missing[0], missing[1]))
        for u in units:
            out += self.file_findings(ds, "impressions", u.file, u)
        return out

    def log(self, ds: dt.date, source: str) -> list[Finding]:
        sc = getattr(self.cfg, source)
        if getattr(sc, "format", "contract") != "contract":
            return []
        log = LogInput(self.cfg, source)
        try:
            units = log.units(ds)
        except InputContractError:
            return []
        missing = log.missing_own_file(ds)
        shown = None if missing is None else shown_path(self.cfg, Path(missing.file))  # as the other findings
        own = [] if missing is None else [Finding(ds, source, missing.check, shown, missing.message)]
        return own + [f for u in units for f in self.file_findings(ds, source, u.file)]


def preflight(cfg: FairmonConfig, days: list[dt.date]) -> dict[dt.date, list[Finding]]:
    """The :class:`Finding` of each day of ``days`` under ``cfg`` (a day
    with none is left out): what its run would surely stop on, found from
    file listings and headers alone (module docstring). Raises nothing for
    a file it cannot read: that is a finding."""
    checker = _Checker(cfg)
    out: dict[dt.date, list[Finding]] = {}
    for ds in days:
        found = checker.impressions(ds) if cfg.impressions is not None else []
        for source in ("scores", "labels"):
            if getattr(cfg, source) is not None:
                found += checker.log(ds, source)
        if found:
            out[ds] = found
    return out


def latest_day(cfg: FairmonConfig, template: str) -> dt.date | None:
    """The latest day ``template`` (a path with ``{ds}``) has a file for,
    read off the names of the files it matches with any ``{ds}``; None when
    none matches. A date in a name is taken only when filling ``{ds}`` with
    it matches a file (a date in a folder name is not a day)."""
    if "{ds}" not in template:
        return None
    found = {m for f in matches(template, cfg, ds="*") for m in re.findall(r"\d{4}-\d{2}-\d{2}", str(f))}
    for text in sorted(found, reverse=True):
        try:
            day = dt.date.fromisoformat(text)
        except ValueError:
            continue
        if matches(template, cfg, ds=text):
            return day
    return None


def preflight_inputs(cfg: FairmonConfig) -> tuple[dict[dt.date, list[Finding]], list[str]]:
    """The config's inputs as a whole, for ``fairmon serve``, which has no
    day of its own until its schedule fires: each configured file input
    (impressions, scores, labels; a catalog table, the Coat and COMPAS
    files are left to the run) checked at the latest day its files are
    named for, with the random traffic of that day's window: the files the
    next scheduled run reads, in the layout the feed writes now. An older
    file is left to the run that recomputes its day.

    Returns (findings by day as :func:`preflight`, one line per input that
    has no file at all: its ``path`` matches nothing yet). Raises nothing
    for a file it cannot read: that is a finding."""
    checker = _Checker(cfg)
    found: dict[dt.date, list[Finding]] = {}
    empty: list[str] = []
    imp = cfg.impressions
    inputs = []
    if imp is not None and imp.format != "coat" and imp.table is None:
        inputs.append(("impressions", imp.path))
    for source in ("scores", "labels"):
        sc = getattr(cfg, source)
        if sc is not None and getattr(sc, "format", "contract") == "contract":
            inputs.append((source, sc.path))
    for source, template in inputs:
        day = latest_day(cfg, template)
        if day is None:
            empty.append(
                f"no file matches [{source}] path = {template!r} (under {cfg.base_dir}): "
                "each scheduled day is quarantined until its file arrives"
            )
            continue
        more = checker.impressions(day) if source == "impressions" else checker.log(day, source)
        if more:
            found.setdefault(day, []).extend(more)
    return found, empty


def describe(findings: dict[dt.date, list[Finding]]) -> list[str]:
    """One line per distinct problem of ``findings``, naming its days
    (a file every day of a range needs is said once), in the order of the days."""
    by_message: dict[str, list[dt.date]] = {}
    for ds, found in sorted(findings.items()):
        for f in found:
            by_message.setdefault(f.message, []).append(ds)
    lines = []
    for message, days in by_message.items():
        when = str(days[0]) if len(days) == 1 else f"{len(days)} days, {days[0]}..{days[-1]}"
        lines.append(f"{message} [{when}]")
    return lines


def preflight_summary(ds: dt.date, found: list[Finding]) -> dict:
    """A run summary of day ``ds`` stopped by its pre-flight ``found``
    (the shape of :func:`fairmon.pipelines.executor.outcomes.summarise`):
    status ``quarantined``, ``stage`` ``preflight``, ``error`` the findings'
    messages, ``preflight`` each finding as {check, source, file, message}."""
    return {
        "ds": ds,
        "status": "quarantined",
        "stage": "preflight",
        "error": f"{ds}: quarantined at pre-flight: " + "; ".join(f.message for f in found),
        "preflight": [{"check": f.check, "source": f.source, "file": f.file, "message": f.message} for f in found],
    }


def preflight_results(found: list[Finding], suite: str = "preflight") -> list[DQResult]:
    """The ``dq_results`` of a day its pre-flight check refused (``found``): one result per input file, suite
    ``suite`` (``reader`` for a file the run's reader refused), each finding a failed critical expectation named
    by its check with its message as note. Why: the day's dq_results partition must say why it did not publish,
    not keep the rows of an earlier run that passed (the gate's results when it runs; DESIGN §3). Raises nothing."""
    failures: dict[tuple[str, str], list[dict]] = {}
    for f in found:
        failure = {"name": f.check, "severity": "critical", "type": suite, "note": f.message}
        failures.setdefault((f.source, f.file), []).append(failure)
    return [DQResult(source, suite, file, len(fs), fs) for (source, file), fs in failures.items()]


def explain_raw(cfg: FairmonConfig, source: str, path: Path, result: DQResult) -> DQResult:
    """Give the failures of a raw suite's ``result`` on file ``path`` of
    input ``source`` what to act on (the ``note`` shown in the quarantine
    message and in dq_results details): a ``column_exists[c]`` the config
    key that names ``c``, a close match and the columns the file has (its
    header, :func:`read_header`); an ``ids_unique`` the key columns and up
    to five duplicated keys with their copies (:func:`duplicated_keys`); a
    ``ds`` that is a zoned instant why it is no day (:func:`zoned_day_note`).
    Files that are no local file (a catalog table's partition) are left as
    they are. Returns ``result``, updated in place."""
    if result.success or not path.is_file():
        return result
    columns: list[str] | None = None  # the header, read once and listed with the first missing column
    for f in result.failures:
        name = f["name"]
        if name == "has_rows":  # said in words where the quarantine is read, not only the expectation's name
            f["note"] = "the file holds no rows (a header alone, or nothing)"
        if name.startswith("column_exists["):
            c = name[len("column_exists[") : -1]
            f["note"] = f"named by {column_key(cfg, source, c)}"
            if columns is None:
                columns = read_header(path)[0]
                found = ", ".join(columns) or "(none)"
                f["note"] += f"{_suggest(cfg, source, c, columns)}; the file's columns: {found}"
            else:
                f["note"] += _suggest(cfg, source, c, columns)
        elif name == "ids_unique":
            f["note"] = repeated_keys_note(path)
        elif note := zoned_day_note(name, f.get("sample")):
            f["note"] = note
    return result


def zoned_day_note(name: str, values) -> str:
    """Why a ``ds`` is no day when the failing ``values`` of check ``name``
    (the suite's ``ds_is_date`` or ``ds_is_a_real_day``) are zoned instants
    shown in UTC (:func:`fairmon.transforms.contract_values.zoned_day_text`), else ""."""
    if name not in ("ds_is_date", "ds_is_a_real_day") or not isinstance(values, list):
        return ""
    return ZONED_DAY if any(str(v).endswith(ZONED_SUFFIX) for v in values) else ""


def repeated_keys_note(path: Path) -> str:
    """What an ``ids_unique`` failure of impressions file ``path`` should say: the key columns, up to five
    repeated keys with their copies (:func:`duplicated_keys`) and the first data row (1-based, header
    excluded) whose key an earlier row already has, so the reader goes straight to a repeat."""
    keys, dups = duplicated_keys(path)
    shown = ", ".join(f"({', '.join(map(str, k))}) ×{n}" for *k, n in dups)
    note = f"key ({', '.join(keys)}) repeated" + (f": {shown}" if dups else "")
    row = first_repeated_row(path, keys)
    return note + (f"; first repeat at row {row}" if row is not None else "")


def _scan(path: Path) -> pl.LazyFrame:
    """File ``path`` as a lazy frame of text (CSV) or of its own types (Parquet)."""
    if path.suffix.lower() in (".parquet", ".pq"):
        return pl.scan_parquet(path, glob=False)
    return pl.scan_csv(path, infer_schema=False, glob=False)


def first_repeated_row(path: Path, keys: list[str]) -> int | None:
    """The first data row (1-based) of ``path`` whose ``keys`` values an earlier row already has; None when
    no key repeats or there are no key columns."""
    if not keys:
        return None
    rows = (
        _scan(path)
        .select(keys)
        .with_row_index("__row", offset=1)
        .filter(~pl.struct(keys).is_first_distinct())
        .select("__row")
        .head(1)
        .collect()
    )
    return int(rows.item()) if rows.height else None


def duplicated_keys(path: Path, limit: int = 5) -> tuple[list[str], list[tuple]]:
    """The id key columns of impressions file ``path`` (those of
    ds, traffic, request_id, item_id it has: ids_unique's key within a file)
    and up to ``limit`` duplicated keys, each a tuple of its values and
    the number of rows sharing it, most copied first. One scan, made only
    for a file that failed ``ids_unique``."""
    frame = _scan(path)
    present = frame.collect_schema().names()
    keys = [c for c in ("ds", "traffic", "request_id", "item_id") if c in present]
    if not keys:
        return [], []
    dups = (
        frame.group_by(keys)
        .len()
        .filter(pl.col("len") > 1)
        .sort(["len", *keys], descending=[True, *[False] * len(keys)])
        .head(limit)
        .collect()
    )
    return keys, [tuple(r) for r in dups.iter_rows()]
