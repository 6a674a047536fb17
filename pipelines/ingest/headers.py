"""What a CSV file's header says before its rows are read: a column it names
twice; and, once the reader has refused the file, the first row with more
fields than the header (:func:`ragged_row`). The reader (:func:`fairmon.pipelines.ingest.adapters.read_table`) and
the pre-flight check (:mod:`fairmon.pipelines.ingest.preflight`) both refuse
such a file with :data:`REPEATED_COLUMN`; this module imports nothing heavy,
so the pre-flight's header check does not load the readers' dependencies.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

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


def ragged_row(path: Path, delimiter: str = ",", fewer: bool = False) -> str | None:
    """Why a CSV reader refused ``path`` as having more fields than its schema, in words: the first data row
    with more fields than the header, numbered as the gate numbers rows (row 1 is the file's second line; a
    quoted value spanning lines is one row), e.g. ``"row 50 has 11 fields where the header has 10 (quote a value
    that holds a comma)"``; with ``fewer``, also a row with fewer fields, which Polars reads with nulls for the
    missing values, silently, and a blank line before a row (read as a row of nulls, which the gate refused as
    an empty id or signal, with advice for a value the author never meant to write); blank lines that end the
    file are no rows (:func:`trailing_blank_lines`). None when no row has more (or fewer) fields
    (then the reader's own message stands) or the file cannot be read as UTF-8 text. Reads the whole file:
    for an error message, or after the read found the last column null somewhere (a short row's sign)."""
    blank = None  # the first blank line's row, said only when a row follows it
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.reader(f, delimiter=delimiter)
            header = next(reader, None) or []
            for row, fields in enumerate(reader, start=1):
                has = f"row {row} has {len(fields)} field{'s' * (len(fields) != 1)} where the header has {len(header)}"
                if len(fields) > len(header):
                    return f"{has} (quote a value that holds a {'comma' if delimiter == ',' else repr(delimiter)})"
                if fewer and blank is not None and fields:
                    return f"row {blank} is a blank line (delete it: a row needs the header's {len(header)} fields)"
                if fewer and not fields and len(header) > 1:
                    blank = row if blank is None else blank
                if fewer and 0 < len(fields) < len(header):
                    return f"{has} ({'a value is' if len(header) - len(fields) == 1 else 'values are'} missing)"
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    return None


def trailing_blank_lines(path: Path) -> int:
    """How many blank lines end ``path`` after its last line's own line break (``"…\n\n"`` gives 1, ``"…\r\n"``
    or no final break 0), read from its last 4 KiB; 0 when it cannot be read. Why: Polars reads each such line as
    a row of nulls, which the gate then refused as a row with an empty id or signal, naming a row the file's
    author never wrote (an editor's or an export's trailing newline)."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - 4096))
            tail = f.read()
    except OSError:
        return 0
    return max(0, tail[len(tail.rstrip(b"\r\n")) :].count(b"\n") - 1)
