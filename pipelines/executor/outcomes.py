"""What a day's run ends in, and the seams through which an orchestrator wraps the executor.

The executor never imports Prefect: :class:`Hooks` is how a caller decides
how each unit of work runs (a plain call in process; a Prefect task or flow
run in :mod:`fairmon.pipelines.orchestration`). Its defaults run everything
in process, with no API and no server.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Mapping
from typing import Any


class DayFailed(RuntimeError):
    """A day could not be computed; the message names the day, the stage and the input."""


class DayQuarantined(RuntimeError):
    """A critical data-quality expectation failed; the message names it."""


class DayResult(Mapping):
    """A published day's result as one read-only mapping (``result["reo"]``,
    ``{**result}``, ``dict(result)``). An orchestrator may take it as one
    value: Prefect's flow engine walks a returned dict, list or dataclass
    object by object looking for futures
    (``prefect.utilities.collections.visit_collection``); a day's rows as
    dicts are thousands of objects with many groups (K = 4096: about 2 s a
    day), and this mapping is not one of the types it walks."""

    __slots__ = ("_items",)

    def __init__(self, items: dict) -> None:
        self._items = items

    def __getitem__(self, key: str):
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"DayResult({self._items!r})"


def step(name: str) -> Callable[[Callable], Callable]:
    """Mark a function as one named step of a day (``count-groups``,
    ``publish-day``, ...): the name an orchestrator gives its task run
    (:meth:`Hooks.step`). Returns the function itself, unchanged."""

    def mark(fn: Callable) -> Callable:
        fn.step_name = name
        return fn

    return mark


def summarise(ds: dt.date, finish: Callable[[], Mapping]) -> dict:
    """Run a day's last unit ``finish`` and summarise it:
    {ds, status: published | quarantined | failed, ...the day's result, or error}.
    Never raises for the day's own failure (the day is reported, the batch goes on)."""
    try:
        return {"ds": ds, "status": "published", **finish()}
    except DayQuarantined as e:
        return {"ds": ds, "status": "quarantined", "error": str(e)}
    except Exception as e:  # the day's own error: reported, the other days go on
        return {"ds": ds, "status": "failed", "error": f"{type(e).__name__}: {e}"}


class Hooks:
    """How the executor's units of work run; these defaults run them in
    process (no Prefect API, no server). An orchestrator subclasses it.

    - :meth:`start`: make ready what the days will need (while the gate's
      imports load in their own thread).
    - :meth:`around`: run the whole range's ``body`` (one parent run).
    - :meth:`step`: run one step of a day (a function marked by :func:`step`).
    - :meth:`day`: run a day's last unit (publish or quarantine, its run
      record closed) and return what the batch reports for the day.
    """

    def start(self) -> None:
        """Nothing to start in process."""

    def around(self, days: list[dt.date], body: Callable[[], list[Any]]) -> list[Any]:
        """Run ``body`` as it is. Returns its per-day outcomes."""
        return body()

    def step(self, fn: Callable, *args) -> Any:
        """Call ``fn(*args)``. Returns what it returns, raises what it raises."""
        return fn(*args)

    def day(self, ds: dt.date, finish: Callable[[], Mapping]) -> Any:
        """The day's summary (:func:`summarise`); never raises for the day's own failure."""
        return summarise(ds, finish)
