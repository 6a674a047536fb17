"""The words of a line about a day that was not published, shared by the alerts' messages and the
command line's day lines and run summary, so that none says the day or its status twice ("2026-01-04
quarantined: 2026-01-04: quarantined at stage ..."). Only the standard library: the command line loads it early."""

from __future__ import annotations

import datetime as dt


def status_words(ds: dt.date, status: str, detail: str | None, limit: int | None = None) -> str:
    """What follows ``2026-01-04 quarantined`` in a line about a day that was not published: its run's
    ``detail`` (an error or quarantine reason, at most ``limit`` characters) without the words the line
    already has: a leading ``"2026-01-04: "`` (after fairmon's own ``DayFailed: ``, a wrapper's name) and,
    when the reason then names the status ("quarantined at stage impressions: ..."), that word too; so
    ``" at stage impressions: ..."``, ``": <error>"`` or ``""`` without a detail. Raises nothing."""
    text = (detail or "").strip().removeprefix("DayFailed: ").removeprefix(f"{ds}: ")[:limit]
    if text.startswith(f"{status} "):
        return text.removeprefix(status)
    return f": {text}" if text else ""
