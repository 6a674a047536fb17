"""Value ranges of output columns, declared with the column and checked by the
data-quality gate (DESIGN §1: checks come from column metadata). Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Bounds:
    """The range of a column's values, checked by the gate as a critical
    ``ExpectColumnValuesToBeBetween`` named ``name`` (the name published in
    ``dq_results``). ``None`` leaves a side open; ``strict_min`` excludes the
    minimum (e.g. a positive ratio). Nulls and NaN are not range violations
    (GX skips nulls; a NaN is a defined "undefined")."""

    name: str
    min_value: float | None = None
    max_value: float | None = None
    strict_min: bool = False

    def kwargs(self, column: str) -> dict:
        """The GX kwargs of the check on ``column`` (only the bounds that are set)."""
        kw: dict[str, Any] = {"column": column}
        if self.min_value is not None:
            kw["min_value"] = self.min_value
        if self.max_value is not None:
            kw["max_value"] = self.max_value
        if self.strict_min:
            kw["strict_min"] = True
        return kw


def probability(name: str) -> Bounds:
    """[0, 1]: a probability, share or rate."""
    return Bounds(name, 0, 1)


def non_negative(name: str) -> Bounds:
    """≥ 0: a count, a standard error, a dispersion."""
    return Bounds(name, 0)


def positive(name: str) -> Bounds:
    """> 0: a ratio that cannot be 0."""
    return Bounds(name, 0, strict_min=True)
