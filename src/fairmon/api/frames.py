"""Frames in, frames out: the caller's pandas, Polars or PyArrow frame becomes a
Polars frame for fairmon's transforms (the row counts convert only the columns
they count), and a result goes back as the caller's kind, through Narwhals
(https://narwhals-dev.github.io/narwhals/), as Fairlearn accepts data frames.
Also the column checks every facade runs first, so a missing column is named
together with the columns present.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import narwhals as nw
import polars as pl

from fairmon.transforms.contract import InputContractError

#: Output kinds :func:`to_kind` understands by name (``read_table``'s ``backend``).
KINDS = ("polars", "pandas", "pyarrow")


def eager(frame: Any, what: str = "rows") -> tuple[nw.DataFrame, nw.Implementation]:
    """``frame`` (an eager pandas, Polars or PyArrow frame, or any other
    Narwhals-supported eager frame) seen through Narwhals, not converted, with
    its kind: a facade reads the column names off it and converts only the
    columns it uses (:func:`polars_columns`), as a caller's frame may hold
    many more, and converting one costs a copy of it.

    Raises TypeError naming ``what`` when ``frame`` is not a data frame (a
    Polars LazyFrame: collect it first)."""
    try:
        native = nw.from_native(frame, eager_only=True)
    except TypeError:
        lazy = "; call .collect() on it first" if type(frame).__name__ == "LazyFrame" else ""
        raise TypeError(
            f"{what}: expected a pandas, Polars or PyArrow data frame, got {type(frame).__module__}."
            f"{type(frame).__name__}{lazy}"
        ) from None
    return native, native.implementation


def as_polars(frame: Any, what: str = "rows") -> tuple[pl.DataFrame, nw.Implementation]:
    """``frame`` (as :func:`eager` takes it) as a Polars frame, every column, with its kind.

    Raises TypeError naming ``what`` when ``frame`` is not a data frame."""
    native, kind = eager(frame, what)
    return native.to_polars(), kind


def polars_columns(frame: pl.DataFrame | nw.DataFrame, columns: Sequence[str]) -> pl.DataFrame:
    """The ``columns`` of ``frame`` (a Polars frame, or a caller's frame from :func:`eager`) as a
    Polars frame, in that order: only they are converted. Names must be present (:func:`require_columns`).

    Raises :class:`fairmon.transforms.contract.InputContractError` naming the column and its first
    (1-based) row whose value Arrow cannot convert (e.g. a Python object in a pandas object column),
    or its type when no value converts, rather than Arrow's own message, which names neither."""
    picked = frame.select(list(dict.fromkeys(columns)))
    if not isinstance(picked, nw.DataFrame):
        return picked
    try:
        return picked.to_polars()
    except Exception as exc:  # Arrow's or Polars' conversion error, of types that depend on the frame's library
        for column in picked.columns:
            values = picked.get_column(column)
            if not _converts(values):
                raise _unconvertible(values, column) from exc
        raise


def _unconvertible(values: nw.Series, column: str) -> InputContractError:
    """The refusal of a caller's column that Arrow cannot convert. When even none of its values
    convert, its type is at fault (a complex or sparse column, categories of mixed types) and no row
    is named. Else the row named ends the shortest leading part of the column that fails (a bad
    value, or the first whose type does not go with the values before it), found by bisection
    since a part that fails fails longer."""
    if not _converts(values[:0]):
        native = values.to_native()  # the caller's own type name (Narwhals calls a complex column Unknown)
        kind = getattr(native, "dtype", getattr(native, "type", values.dtype))
        return InputContractError(
            f"its type {kind} cannot be read as text, numbers or booleans", file="rows", column=column
        )
    lo, hi = 0, len(values)  # values[:lo] converts, values[:hi] does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _converts(values[:mid]) else (lo, mid)
    value = values[hi - 1]
    shown = f"{type(value).__name__} {str(value)[:40]!r}" + (
        f" after {type(values[0]).__name__} values" if hi > 1 else ""
    )
    why = f"its values cannot be read as one type of text, numbers or booleans ({shown})"
    return InputContractError(why, file="rows", column=column, row=hi)


def _converts(values: nw.Series) -> bool:
    """Whether Arrow converts ``values`` (a caller's column or part of it) to a Polars series."""
    try:
        values.to_polars()
    except Exception:  # Arrow's or Polars' conversion error
        return False
    return True


def as_caller(result: pl.DataFrame, kind: nw.Implementation) -> Any:
    """``result`` as a frame of the caller's ``kind`` (the second value of :func:`as_polars`)."""
    if kind is nw.Implementation.POLARS:
        return result
    return nw.from_arrow(result.to_arrow(), backend=kind).to_native()


def to_kind(result: pl.DataFrame, backend: str) -> Any:
    """``result`` as a ``backend`` frame: one of :data:`KINDS`. Raises ValueError for another name."""
    if backend not in KINDS:
        raise ValueError(f"backend {backend!r}: choose one of {', '.join(KINDS)}")
    return as_caller(result, nw.Implementation.from_backend(backend))


def names(value: str | Sequence[str], what: str) -> list[str]:
    """One column name or a list of them as a non-empty list. Raises TypeError/ValueError otherwise."""
    out = [value] if isinstance(value, str) else list(value)
    if not out or not all(isinstance(v, str) and v for v in out):
        raise TypeError(f"{what}: expected a column name or a non-empty list of column names, got {value!r}")
    return out


def require_columns(frame: pl.DataFrame | nw.DataFrame, columns: Sequence[str], what: str = "rows") -> None:
    """Raise ValueError naming the first of ``columns`` that ``frame`` lacks and the columns it has."""
    present = frame.columns
    for c in columns:
        if c not in present:
            raise ValueError(f"{what}: no column {c!r}; columns present: {', '.join(map(repr, present)) or 'none'}")


def reject_reserved(columns: Sequence[str], reserved: Sequence[str], what: str) -> None:
    """Raise ValueError when a group or label column takes a name the facade uses for another role."""
    clash = sorted(set(columns) & set(reserved))
    if clash:
        raise ValueError(
            f"{what}: column(s) {clash} are reserved ({', '.join(reserved)}); rename them before calling fairmon"
        )
