"""Expectation suites as data: loading a suite (generated checks of a declared
table plus its JSON domain checks, or an input suite's JSON), expanding it
against a frame's columns and the config's parameters and severities, and the
result of one suite on one subject (:class:`DQResult`, a ``dq_results`` row).
No Great Expectations here: :mod:`fairmon.pipelines.checks.gate` runs them.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from functools import cache

import polars as pl

from fairmon.pipelines.checks.cover import snake_type
from fairmon.resources import suite_file
from fairmon.transforms.registry import INPUT_SUITES, TABLES, generated_checks, polars_schema, table

SEVERITIES = ("critical", "warning")


@dataclass
class DQResult:
    """Outcome of one suite on one subject (a file or an output table).

    ``success`` is False only when a *critical* expectation failed; failed
    warnings are listed but do not block publication.
    """

    table: str
    suite: str
    subject: str
    n_expectations: int
    failures: list[dict] = field(default_factory=list)

    @property
    def failed_critical(self) -> list[str]:
        """Names of the failed critical expectations."""
        return [f["name"] for f in self.failures if f["severity"] == "critical"]

    @property
    def failed_warning(self) -> list[str]:
        """Names of the failed warning expectations."""
        return [f["name"] for f in self.failures if f["severity"] == "warning"]

    @property
    def success(self) -> bool:
        """True when no critical expectation failed."""
        return not self.failed_critical

    def row(self, ds: dt.date) -> dict:
        """One dq_results row (DESIGN §3 plus subject and the failed names)."""
        return {
            "ds": ds,
            "table": self.table,
            "suite": self.suite,
            "subject": self.subject,
            "success": self.success,
            "n_expectations": self.n_expectations,
            "n_failed": len(self.failures),
            "n_warnings": len(self.failed_warning),
            "failed_critical": ", ".join(self.failed_critical),
            "failed_warning": ", ".join(self.failed_warning),
            "details": json.dumps(self.failures, default=str),
        }

    def summary(self) -> str:
        """e.g. ``impressions_raw on day.csv: traffic_known (3 unexpected: 'explore')``."""
        parts = []
        for f in self.failures:
            if f["severity"] != "critical":
                continue
            extra = ""
            if f.get("unexpected_count"):
                rows = f", rows {', '.join(map(str, f['rows']))}" if f.get("rows") else ""
                extra = f" ({f['unexpected_count']} unexpected{rows}: {quoted(f['sample'])})"
            note = f": {f['note']}" if f.get("note") else ""  # why, when fairmon knows (e.g. the pool policy)
            parts.append(f"{f['name']}{extra}{note}")
        return f"{self.suite} on {self.subject}: " + "; ".join(parts)


#: Characters of one quoted value in a message (a group name of a megabyte is cut, and says so).
QUOTED_CHARS = 1_000


def quoted(sample) -> str:
    """A failure's sample as a message quotes it: each value's repr cut to
    :data:`QUOTED_CHARS` characters (a list stays a list); anything else as ``str``."""
    if not isinstance(sample, list | tuple):
        return str(sample)

    def one(v) -> str:
        text = repr(v)
        return text if len(text) <= QUOTED_CHARS else f"{text[:QUOTED_CHARS]}… ({len(text):,} characters)"

    return "[" + ", ".join(map(one, sample)) + "]"


def dq_frame(ds: dt.date, results: list[DQResult]) -> pl.DataFrame:
    """dq_results rows for one day."""
    return pl.DataFrame([r.row(ds) for r in results], schema=polars_schema("dq_results"))


@cache
def load_spec(suite: str) -> dict:
    """The spec of ``suite``. For a declared output table (the flow names its
    suite after the table): the checks its declaration generates (key unique,
    not null, ranges; :func:`fairmon.transforms.registry.generated_checks`)
    followed by the domain checks of the JSON suite the declaration names
    (``Table.suite``; none when None). Any other name (an input suite) is read
    from ``expectations/<suite>.json``. Raises FileNotFoundError for a suite
    without a file."""
    if suite in INPUT_SUITES or suite not in TABLES:  # an input suite needs no family module imported
        return _read_suite(suite)
    t = table(suite)
    extra = _read_suite(t.suite) if t.suite else {"description": f"Output {t.name} (DESIGN §3).", "expectations": []}
    return {
        "suite": suite,
        "table": t.name,
        "description": extra["description"],
        "expectations": generated_checks(t) + extra["expectations"],
    }


def _read_suite(suite: str) -> dict:
    node = suite_file(suite)
    if not node.is_file():
        raise FileNotFoundError(f"no expectation suite {suite}.json in the fairmon package")
    return json.loads(node.read_text())


def _fill(value, params: dict, item: str | None):
    if isinstance(value, str):
        if value.startswith("$"):
            key = value[1:]
            if key not in params:
                raise KeyError(f"suite parameter {key!r} is not set")
            return params[key]
        return value.replace("{item}", item) if item is not None else value
    if isinstance(value, list):
        return [_fill(v, params, item) for v in value]
    return value


#: HTML's special characters and their entities (``&`` first).
_HTML = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;"), ("'", "&#x27;"))


def html_safe(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with HTML's special characters escaped in every text column.

    GX Data Docs render unexpected values raw into HTML, so an input cell such
    as ``<script>`` would run in the page fairmon links to. Only the copy GX
    sees is escaped: the checks fairmon's suites make on text (value sets of
    known words, dates, not-null) decide the same on the escaped values, and
    failure samples read as escaped text.

    Escaping leaves a column without any of the characters as it is, so
    only the columns that hold one are rewritten (one scan per text column
    decides): five replacements on every text cell would cost a noticeable
    share of the checks where, as usual, no value has one."""
    text = [c for c, dtype in frame.schema.items() if dtype == pl.String]
    if not text:
        return frame
    special = [raw for raw, _ in _HTML]
    holds = frame.select(pl.col(c).str.contains_any(special).any() for c in text).row(0)
    text = [c for c, has in zip(text, holds, strict=True) if has]
    if not text:
        return frame
    exprs = []
    for c in text:
        e = pl.col(c)
        for raw, entity in _HTML:
            e = e.str.replace_all(raw, entity, literal=True)
        exprs.append(e.alias(c))
    return frame.with_columns(exprs)


def expand_spec(spec: dict, params: dict, columns: list[str], severity: dict[str, str]) -> list[dict]:
    """Concrete expectation entries: placeholders filled, ``for_each`` expanded,
    entries on absent columns dropped, severities overridden by name.

    ``severity`` maps an expectation name (or its name before ``[``) to
    "critical" or "warning". Raises ValueError on an unknown severity.
    """
    out = []
    present = set(columns)
    for entry in spec["expectations"]:
        items = params[entry["for_each"]] if "for_each" in entry else [None]
        for item in items:
            kwargs = {k: _fill(v, params, item) for k, v in entry["kwargs"].items()}
            if entry["type"] != "ExpectColumnToExist":
                needed = [kwargs[k] for k in ("column", "column_A", "column_B") if k in kwargs]
                needed += kwargs.get("column_list", []) + entry.get("requires", [])
                if any(c not in present for c in needed):
                    continue
            name = entry["name"].replace("{item}", item) if item is not None else entry["name"]
            sev = severity.get(name, severity.get(name.split("[")[0], entry["severity"]))
            if sev not in SEVERITIES:
                raise ValueError(f"severity of {name!r} must be one of {SEVERITIES}, got {sev!r}")
            out.append({"name": name, "type": entry["type"], "severity": sev, "kwargs": kwargs})
    return out


#: Expectation kwargs naming the columns an expectation reads.
COLUMN_KWARGS = ("column", "column_A", "column_B", "column_list")
#: Expectation kwargs known to name no column (values, bounds, options).
VALUE_KWARGS = frozenset(
    {"value_set", "regex", "min_value", "max_value", "strict_min", "strict_max", "or_equal", "ignore_row_if", "mostly"}
)


def read_columns(entries: list[dict], columns: list[str]) -> list[str]:
    """The columns of ``columns`` (a frame's, in its order) that the expanded
    expectations ``entries`` name (:func:`expand_spec`), or all of them when
    an entry has a kwarg not known to name no column, or names none, or is a
    check on the table's columns (their count, list or set: a cut frame would
    pass it), any ``expect_table_*`` type but the row count.

    GX filters the whole pandas frame for each expectation's rows (its nulls
    ignored), every column taken along: a frame cut to the columns its suite
    reads gives every expectation the same values and row positions, and
    cost ~40 % less GX time on reo_ab at K = 4,096 (20 columns, 10 read)."""
    named: set[str] = set()
    for e in entries:
        kw, kind = e["kwargs"], snake_type(e["type"])
        if any(k not in VALUE_KWARGS and k not in COLUMN_KWARGS for k in kw):
            return list(columns)
        if kind.startswith("expect_table_") and not kind.startswith("expect_table_row_count_"):
            return list(columns)
        for k in COLUMN_KWARGS:
            v = kw.get(k)
            named.update([v] if isinstance(v, str) else v or [])
    kept = [c for c in columns if c in named]
    return kept or list(columns)
