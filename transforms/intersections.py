"""Intersectional groupings (DESIGN §2 ``intersections``): the grouping
column ``attr__a×b`` of staged rows whose value joins the attributes'
values, so the count stage counts a cell of several attributes in the
same scan as each attribute alone.
"""

from __future__ import annotations

import polars as pl

from fairmon.transforms.contract import ATTR_PREFIX, INTERSECTION_SEP, InputContractError


def intersection_name(attributes: list[str] | tuple[str, ...]) -> str:
    """The attribute name of an intersectional grouping: ``young_adult×region`` (DESIGN §2)."""
    return INTERSECTION_SEP.join(attributes)


def add_intersections(staged: pl.DataFrame, intersections: list[list[str]]) -> pl.DataFrame:
    """Add one grouping column per intersection to staged rows (DESIGN §2 ``intersections``).

    Input: staged rows with ``attr__<a>`` columns (:data:`ATTR_PREFIX`) for
    every attribute named in ``intersections`` (lists of ≥ 2 attribute names).
    Adds ``attr__a×b`` whose value is ``<a value>×<b value>`` (e.g. ``1×north``),
    null when any part is null (counted as the group ``(missing)``), so the
    count stage counts intersections in the same scan as single attributes.
    Cells cannot collide: a value of an intersected attribute that contains
    the separator (``1×x`` with ``y`` would read as ``1`` with ``x×y``) is
    refused. Raises KeyError naming an attribute that is not staged,
    :class:`InputContractError` naming the file, column and row of such a value.
    """
    cols = []
    for names in intersections:
        missing = [a for a in names if ATTR_PREFIX + a not in staged.columns]
        if missing:
            raise KeyError(f"intersection {intersection_name(names)}: attribute(s) {missing} are not staged")
        for a in names:
            _no_separator(staged, a, names)
        cols.append(
            pl.concat_str([pl.col(ATTR_PREFIX + a) for a in names], separator=INTERSECTION_SEP).alias(
                ATTR_PREFIX + intersection_name(names)
            )
        )
    return staged.with_columns(cols) if cols else staged


def _no_separator(staged: pl.DataFrame, attribute: str, names: list[str]) -> None:
    """Raise :class:`InputContractError` for the first value of ``attribute``
    holding :data:`INTERSECTION_SEP` (its cell of ``names`` could equal
    another's), naming the first file row (``src_row``) that holds one."""
    bad = staged.get_column(ATTR_PREFIX + attribute).str.contains(INTERSECTION_SEP, literal=True).fill_null(False)
    if not bad.any():
        return
    at = bad.arg_true()
    if "src_row" in staged.columns:  # the first file row: a profile's bucket rows are staged in no order
        i = int(at[staged.get_column("src_row").gather(at).arg_min()])
        row = staged.get_column("src_row")[i]
    else:
        i = int(at[0])
        row = i + 1
    raise InputContractError(
        f"value {staged.get_column(ATTR_PREFIX + attribute)[i]!r} contains {INTERSECTION_SEP!r}, the separator of the "
        f"intersection {intersection_name(names)}: two different cells could read the same; rename the value",
        file=staged.get_column("src_file")[i] if "src_file" in staged.columns else None,
        column=attribute,
        row=int(row) if row is not None else None,
    )
