"""Random-traffic windows and pool policies (DESIGN §2 "Random-traffic
windows"), in one place: a day's trailing window (``random_window_days``,
counted back from ds), which pooled random-traffic files without per-row
dates serve it (``pool_policy``: ``contained`` or ``overlap``, the latter
with ``reo.look_ahead``), and why a day may have no random traffic. Rows
that carry their own ds are windowed by that ds in SQL
(sql/count_random_shares.sql, which sql/group_counts_pooled.sql and
sql/count_spans.sql read, bound ``window_days`` and ``pool_policy``).
"""

from __future__ import annotations

import datetime as dt
import glob
import re
from pathlib import Path

from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.ingest.identity import unit_key
from fairmon.transforms.contract import InputContractError


def window_start(ds: dt.date, days: int) -> dt.date:
    """First day of the trailing random-traffic window of ``days`` days ending at ds."""
    return ds - dt.timedelta(days=days - 1)


def pool_admitted(start: dt.date, end: dt.date, ds: dt.date, window_days: int, policy: str) -> bool:
    """Whether a pooled random-traffic file declared for ``start``..``end`` (no
    per-row dates) serves day ``ds`` with a trailing window of ``window_days``
    (DESIGN §2 "Random-traffic windows"): ``contained`` when the range lies
    inside ds - window_days + 1 .. ds, ``overlap`` when it meets that window."""
    w0 = window_start(ds, window_days)
    if policy == "contained":
        return w0 <= start and end <= ds
    if policy == "overlap":
        return start <= ds and end >= w0
    raise ValueError(f"unknown pool_policy {policy!r}; expected 'contained' or 'overlap'")


def pools_left_out(cfg: FairmonConfig, ds: dt.date) -> list[tuple[Path, dt.date, dt.date]]:
    """The pools (path, start, end) that overlap day ``ds``'s window but that
    ``pool_policy`` does not admit (it admits every overlapping pool under
    ``overlap``); none for formats without pools."""
    imp = cfg.impressions
    if imp is None or imp.format != "tiktok":
        return []
    w = imp.random_window_days
    return [
        (path, a, b)
        for path, a, b in tiktok_pools(cfg)
        if pool_admitted(a, b, ds, w, "overlap") and not pool_admitted(a, b, ds, w, imp.pool_policy)
    ]


def random_window_note(cfg: FairmonConfig, ds: dt.date) -> str:
    """Why day ``ds`` may have no random traffic, for the day's gate and log:
    its window, the pool policy and the pools that overlap the window but lie
    partly outside it (with what to change)."""
    imp = cfg.impressions
    w0 = window_start(ds, imp.random_window_days)
    where = f"no random traffic in the window {w0}..{ds} (random_window_days = {imp.random_window_days}"
    if imp.format != "tiktok":
        return where + "): no random rows dated in it were staged from the day's files"
    left = pools_left_out(cfg, ds)
    where += f', pool_policy = "{imp.pool_policy}")'
    if not left:
        return where + ": no pooled random file overlaps it"
    names = ", ".join(f"{unit_key(cfg, path)} ({a}..{b})" for path, a, b in left)
    return (
        f"{where}: pool(s) {names} overlap the window but are not contained in it; set [impressions] "
        f'pool_policy = "overlap" (their rows may then come from after {ds}: reo.look_ahead) '
        "or widen random_window_days to cover a whole pool"
    )


def matches(template: str, cfg: FairmonConfig, **fields: str) -> list[Path]:
    """The files a path ``template`` of the config names, its ``{fields}``
    filled (a field may be ``*``), resolved against the config's folder and
    sorted; no file gives an empty list. The template may hold glob
    characters; the config's folder is a name, not a pattern (``proj[x]``:
    escaped), and a path that exists as written is itself."""
    filled = template.format(**fields)
    path = Path(filled).expanduser()
    pattern = str(path) if path.is_absolute() else str(Path(glob.escape(str(cfg.base_dir))) / path)
    found = {Path(p) for p in glob.glob(pattern)}
    literal = cfg.resolve(filled)
    if not found and literal.exists():  # an absolute path whose own folders hold [ ] * ?
        found.add(literal)
    return sorted(found)


def tiktok_pools(cfg: FairmonConfig) -> list[tuple[Path, dt.date, dt.date]]:
    """Every pooled random-traffic file (path, start, end) of a TikTok config:
    the declared ``random_pools`` and the files ``random_path`` matches (its
    ``{start}``/``{end}`` read off the name). Raises
    :class:`InputContractError` naming the file for a pool whose end is
    before its start or whose name holds an impossible date (2026-02-30)."""
    imp = cfg.impressions
    pools = [(cfg.resolve(p.path), p.start, p.end) for p in imp.random_pools]
    if imp.random_path:
        regex = re.escape(str(cfg.resolve(imp.random_path)))
        regex = regex.replace(re.escape("{start}"), r"(\d{4}-\d{2}-\d{2})").replace(
            re.escape("{end}"), r"(\d{4}-\d{2}-\d{2})"
        )
        for p in matches(imp.random_path, cfg, start="*", end="*"):
            m = re.fullmatch(regex, str(p))
            if m:
                try:
                    a, b = dt.date.fromisoformat(m.group(1)), dt.date.fromisoformat(m.group(2))
                except ValueError as e:
                    raise InputContractError(
                        f"the pool range in the file name is not a pair of dates ({e})", file=str(p)
                    ) from None
                if b < a:
                    raise InputContractError(f"pool range end {b} is before start {a}", file=str(p))
                pools.append((p, a, b))
    return pools


def days_between(first: dt.date, last: dt.date) -> list[dt.date]:
    """Every day from ``first`` to ``last`` inclusive."""
    return [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]


def not_begun(day: dt.date, today: dt.date | None = None) -> str | None:
    """Why ``day`` cannot be run yet, or None: a day after tomorrow (UTC) has
    begun in no time zone (the earliest, UTC+14, is at most one day ahead of
    UTC), so no log of it can exist, let alone be complete; running it would
    only record a refusal that stays open as an alert until that day comes (a
    mistyped year or month). ``today``: the current UTC date by default.
    Raises nothing."""
    today = today or dt.datetime.now(dt.UTC).date()
    if (day - today).days < 2:
        return None
    return f"{day} has not begun in any time zone yet (today is {today}, UTC): no log of it can be complete"
