"""What a CSV file's header says before its rows are read: a column it names
twice. The reader (:func:`fairmon.pipelines.ingest.adapters.read_table`) and
the pre-flight check (:mod:`fairmon.pipelines.ingest.preflight`) both refuse
such a file with :data:`REPEATED_COLUMN`; this module imports nothing heavy,
so the pre-flight's header check does not load the readers' dependencies.
"""

from __future__ import annotations

import re

#: Why a CSV whose header names a column twice is refused (which copy holds the values?).
REPEATED_COLUMN = "the header names this column more than once; give each column one name"
_COPY = re.compile(r"(.+)_duplicated_\d+")


def repeated_column(columns: list[str]) -> str | None:
    """The first column name a CSV header repeats, or None. Polars reads a
    repeated name's copies as ``<name>_duplicated_<i>``."""
    names = set(columns)
    for c in columns:
        m = _COPY.fullmatch(c)
        if m is not None and m.group(1) in names:
            return m.group(1)
    return None
