"""Tables that fit the terminal without cutting a number.

Rich fits a table that is too wide by shrinking its columns, and a number
in a shrunk column is printed cut (``0.64…``): a reader then sees a
different number, or none. Here a table that does not fit is printed as
several tables instead, each with the row's key columns (day, arm,
attribute) and as many of the other columns as fit, the numbers whole; and
a reason that many rows share is written once, as a numbered footnote under
the table, its rows carrying the footnote's number.
"""

from __future__ import annotations

import copy
import re

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

#: Characters a text column (overflow ``fold``) is given at least when the columns are shared out:
#: below it, words wrap into columns too narrow to read.
TEXT_MIN = 16

#: Headers of the columns that say which row a row is: every part of a split table repeats them.
KEYS = ("ds", "arm", "attribute", "model", "group", "labeler", "control", "treatment")


class Footnotes:
    """Numbered notes: each distinct text gets a number once, in the order first marked.

    A row's reason written into the row repeats the reason as often as rows
    share it (every day of a backfill whose random traffic reaches past it);
    a footnote says it once and the rows say which note is theirs."""

    def __init__(self) -> None:
        self.notes: dict[str, int] = {}

    def mark(self, *texts: str | None) -> str:
        """The markers of ``texts`` (``[1] [2]``), numbering the new ones; empty for no text."""
        return " ".join(f"[{self.notes.setdefault(t, len(self.notes) + 1)}]" for t in texts if t)

    def lines(self, since: int = 0) -> list[str]:
        """``[n] text`` per note numbered after ``since`` (default: all), in number order."""
        return [f"[{n}] {t}" for t, n in self.notes.items() if n > since]

    def caption(self, *before: str | None) -> Text | None:
        """The notes as a table caption (plain text, no markup), after the lines ``before``; None when empty."""
        lines = [b for b in before if b] + self.lines()
        return Text("\n".join(lines)) if lines else None


class Fit:
    """``table`` printed whole at any width: when its columns do not fit the
    width it is printed as several tables, each with the key columns (their
    headers in ``keys``) and as many others as fit, in order; the title over
    the first. A key column whose one value the title already says (the day
    of "REO for 2026-01-02") is left out then. Columns whose overflow is
    ``fold`` are text and may wrap; every other column is kept on one line
    at its full width, so no number is ever cut. The caption (footnotes) is
    printed under the last part at the console's width."""

    def __init__(self, table: Table, keys: tuple[str, ...] = KEYS) -> None:
        self.table, self.keys = table, keys

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        caption = self.table.caption
        plain = copy.copy(self.table)
        plain.caption = None
        yield from split_columns(plain, console, options, self.keys)
        if caption:
            yield caption


def _width(column, console: Console, options: ConsoleOptions) -> int:
    """The characters ``column`` needs: its widest cell or header, for a text column at most :data:`TEXT_MIN`."""
    sizes = [Measurement.get(console, options, c) for c in (column.header, *column.cells)]
    widest = max(s.maximum for s in sizes)
    return min(widest, TEXT_MIN) if column.overflow == "fold" and not column.no_wrap else widest


def _said_by_title(table: Table, column) -> bool:
    """Whether every cell of ``column`` holds one value that the table's title already says."""
    values = {str(c) for c in column.cells}
    if len(values) != 1 or values == {""}:
        return False
    return re.search(rf"(?<![\w.-]){re.escape(values.pop())}(?![\w.-])", str(table.title or "")) is not None


def split_columns(table: Table, console: Console, options: ConsoleOptions, keys: tuple[str, ...]) -> list[Table]:
    """``table`` as the tables :class:`Fit` prints at ``options.max_width``
    (``[table]`` when it fits). Its non-text columns are set ``no_wrap``."""
    for c in table.columns:
        if c.overflow != "fold":
            c.no_wrap = True
    if not table.columns:
        return [table]
    _, right, _, left = table.padding
    per_column = left + right + (1 if table.box else 0)  # padding and the border to its right
    edge = 1 if table.box and table.show_edge else 0
    need = [_width(c, console, options) + per_column for c in table.columns]
    if edge + sum(need) <= options.max_width:
        return [table]
    key = [i for i, c in enumerate(table.columns) if str(c.header) in keys and not _said_by_title(table, c)]
    said = [i for i, c in enumerate(table.columns) if str(c.header) in keys and i not in key]
    rest = [i for i in range(len(table.columns)) if i not in key and i not in said]
    base = edge + sum(need[i] for i in key)
    chunks: list[list[int]] = [[]]
    used = base
    for i in rest:
        if chunks[-1] and used + need[i] > options.max_width:
            chunks.append([])
            used = base
        chunks[-1].append(i)
        used += need[i]
    parts = []
    for n, chunk in enumerate(chunks):
        part = copy.copy(table)
        part.columns = []
        for j, i in enumerate(sorted(key + chunk)):
            column = copy.copy(table.columns[i])
            column._index = j
            part.columns.append(column)
        part.title = table.title if n == 0 else "(continued)"
        parts.append(part)
    return parts
