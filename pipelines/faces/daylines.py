"""Each computed day in a few lines: its status and, when published, its REO,
interval and verdict per arm × attribute.

Why: a run that says only "published" sends its user to ``fairmon sql``
for the number it exists to compute. These lines come from the day's
result (the ``reo`` rows a run carries, :func:`fairmon.pipelines.executor.batch.summary_tables`),
not from a second read of the warehouse, and are printed as each day of a
backfill finishes; a reason many rows share is a numbered footnote printed
once, where it first appears.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from fairmon.pipelines.faces.fitting import Footnotes
from fairmon.pipelines.faces.views import VERDICT_STYLE, fmt, row_notes
from fairmon.transforms.alerts.words import status_words

#: Decimals of the REO and its interval in a day line (the tables print 4).
DIGITS = 3

STATUS_STYLE = {"published": "green", "quarantined": "yellow"}


def reo_words(r: dict, digits: int = DIGITS) -> str:
    """``REO 0.143 [0.101, 0.190]`` for a ``reo`` row, ``REO undefined`` when its point is not a number."""
    x = r.get("reo")
    if x is None or x != x:
        return "REO undefined"
    return f"REO {fmt(x, digits)} [{fmt(r.get('ci_low'), digits)}, {fmt(r.get('ci_high'), digits)}]"


def day_lines(result: dict, notes: Footnotes) -> tuple[str, list[str]]:
    """One day's summary (a runner's result dict) as Rich markup: its head
    ``2026-01-02 published`` and one line per ``reo`` row (arm × attribute,
    in the table's order), ``control/gender  REO 0.143 [0.101, 0.190]
    within``, the verdict word being the row's ``verdict_80pct`` (the
    interval against the line; ``undefined`` without one) and a ``[n]``
    per note of the row (numbered in ``notes``). A published day without REO
    rows (a project without impressions) has none; a day not published has
    its status and the first line of its error as its head."""
    ds, status = result["ds"], result["status"]
    colour = STATUS_STYLE.get(status, "red")
    head = f"{ds} [{colour}]{status}[/{colour}]"
    if status != "published":
        error = (result.get("error") or "").strip().splitlines()
        return head + escape(status_words(ds, status, error[0] if error else None)), []
    lines = []
    for r in result.get("reo") or []:
        verdict = r.get("verdict_80pct") or "undefined"
        marks = notes.mark(*row_notes(r))
        lines.append(
            f"{escape(r['arm'])}/{escape(r['attribute'])}  {reo_words(r)}  "
            f"[{VERDICT_STYLE.get(verdict, '')}]{verdict}[/]" + (f" {marks}" if marks else "")
        )
    return head, lines


def print_day(out: Console, result: dict, notes: Footnotes) -> None:
    """Print :func:`day_lines` of ``result`` on console ``out``: each row
    beside the day's head when the line fits the console, else the head
    alone and the rows indented under it; then the notes they numbered
    first (each footnote once per ``notes``, i.e. per command)."""
    seen = len(notes.notes)
    head, lines = day_lines(result, notes)
    wide = max((Text.from_markup(f"{head}  {line}").cell_len for line in lines), default=0)
    if not lines or wide > out.width:
        out.print(head)
        for line in lines:
            out.print(f"  {line}")
    else:
        for line in lines:
            out.print(f"{head}  {line}")
    for line in notes.lines(since=seen):
        out.print(f"  {escape(line)}")
