"""Where alerts go beyond the warehouse: Prefect events and Apprise notification URLs (DESIGN §4.9).

A notification that fails never fails a day: its outcome is recorded on the
alert (``delivered``, ``delivery``) and the targets that failed are tried
again by the next run. A URL may hold a token (``slack://TokenA/TokenB``), so
it is never printed, logged or written: a target is named by its position in
``[alerts] notify`` and its scheme.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterable
from urllib.parse import unquote

from fairmon.pipelines.ingest.staging import run_logger


def target_name(i: int) -> str:
    """``notify[i]``: how a target is named in an alert's ``delivery`` (never the URL, which may hold a
    token). A target is its position: an alert whose notification failed is retried at that position,
    whatever URL stands there now (a typo fixed), and one delivered there is not sent again."""
    return f"notify[{i}]"


def describe(i: int, url: str) -> str:
    """``notify[i] (scheme)``: a target in a message (the scheme only, never the rest of the URL)."""
    return f"{target_name(i)} ({url.split('://', 1)[0].lower()})"


#: Apprise's notification type per alert kind (how a chat or mail client styles it).
_TYPES = {"exceeds": "warning", "ab_change": "warning", "budget_low": "warning", "back_within": "success"}


def _body(alert: dict, project: str) -> tuple[str, str]:
    title = f"fairmon {project}: {alert['message'].split(': ', 1)[0]}"
    body = f"{alert['message']}\n\nday {alert['ds']}; since {alert['since']}; alert {alert['alert_id']}"
    return title, body


#: Why a target is never sent to until the config is mended (a URL of a scheme Apprise does not know, a typo).
NOT_A_URL = "not a URL Apprise can send to (see its wiki)"

#: Characters of Apprise's reason kept in a warning.
CAUSE_CHARS = 200


def masked(message: str, url: str) -> str:
    """``message`` with every part of ``url`` after its scheme (host, user, password, path segments, query
    values: each run of 3 or more characters between ``: / @ ? & = #``, as written and URL-decoded) replaced
    by ``…``, cut to :data:`CAUSE_CHARS`. Why: Apprise names the endpoint in its warnings, and a URL's parts
    may be tokens (``slack://TokenA/TokenB``); the cause ("connection error", "403 Forbidden") is what to act
    on. Raises nothing."""
    rest = url.split("://", 1)[-1]
    parts = {p for raw in re.split(r"[:/@?&=#]+", rest) for p in (raw, unquote(raw)) if len(p) >= 3}
    for part in sorted(parts, key=len, reverse=True):
        message = message.replace(part, "…")
    return message if len(message) <= CAUSE_CHARS else message[: CAUSE_CHARS - 1] + "…"


class _Warnings(logging.Handler):
    """Collects the messages of Apprise's warnings and errors while one target is tried."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def send(
    urls: list[str], alert: dict, project: str, done: dict[str, bool], new: bool, causes: dict[str, str] | None = None
) -> dict[str, bool]:
    """Send ``alert`` (an ``alerts`` row as a dict) through Apprise to the
    targets of ``urls`` that are due: those whose last try failed
    (``done[name]`` false), and, for an alert first seen now (``new``), those
    not tried yet; a target added after an alert was raised does not get it.
    Returns ``done`` with the outcomes ({target name: sent}) of the targets
    that still exist (a removed one is forgotten); ``causes``, when given,
    gets {target name: Apprise's last warning, :func:`masked`, or
    :data:`NOT_A_URL`} of each target that failed (without ``causes`` a URL
    Apprise cannot read is warned here). Apprise's log reaches no other handler meanwhile
    (its debug lines name the URL). Never raises: a URL Apprise does not
    know (warned, by position and scheme), a dead endpoint or a timeout is
    recorded as not sent."""
    done = dict(done)
    title, body = _body(alert, project)
    log = logging.getLogger("apprise")
    saved = log.level, log.propagate, log.handlers[:]
    caught = _Warnings()
    log.setLevel(logging.WARNING)
    log.propagate, log.handlers = False, [caught]
    try:
        import apprise

        for i, url in enumerate(urls):
            name = target_name(i)
            if done.get(name) or (name not in done and not new):
                continue
            caught.messages.clear()
            try:
                ap = apprise.Apprise()
                if not ap.add(url):
                    done[name] = False
                    if causes is None:
                        run_logger().warning("alerts: %s is %s", describe(i, url), NOT_A_URL)
                    else:
                        causes[name] = NOT_A_URL
                    continue
                done[name] = bool(ap.notify(title=title, body=body, notify_type=_TYPES.get(alert["kind"], "failure")))
            except Exception as e:  # a plugin's own error: not sent, retried next run
                done[name] = False
                caught.messages.append(type(e).__name__)
            if not done[name] and caught.messages and causes is not None:
                causes[name] = masked(caught.messages[-1], url)
    finally:
        log.level, log.propagate, log.handlers = saved
    return {target_name(i): done[target_name(i)] for i in range(len(urls)) if target_name(i) in done}


def delivery_state(delivery: str | None) -> dict[str, bool]:
    """{target name: sent} from an ``alerts`` row's ``delivery`` (JSON; {} when null or unreadable)."""
    try:
        out = json.loads(delivery) if delivery else {}
    except ValueError:
        return {}
    return {str(k): bool(v) for k, v in out.items()} if isinstance(out, dict) else {}


def _plain(v):
    """A JSON value: dates as ISO text, NaN as null."""
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return None if isinstance(v, float) and v != v else v


def prefect_events_on() -> bool:
    """Whether alerts go to Prefect as events: Prefect is already imported by
    this run (an orchestrated run) and an API is configured. An in-process run
    never imports Prefect for this."""
    if "prefect" not in sys.modules:
        return False
    from prefect.settings import PREFECT_API_URL

    return bool(PREFECT_API_URL.value())


def emit_events(alerts: Iterable[dict], project: str) -> int:
    """Emit one Prefect event per alert, ``fairmon.alert.<kind>``, whose
    resource names the project, attribute and arm (labels ``fairmon.*``; the
    row as payload), so a Prefect automation can send it on (docs
    "Alerts"). Returns how many were emitted. Never raises (logged)."""
    n = 0
    try:
        from prefect.events import emit_event

        for a in alerts:
            resource = {
                "prefect.resource.id": f"fairmon.{project}.{a['attribute'] or '-'}.{a['arm'] or '-'}",
                "prefect.resource.name": a["subject"],
                "fairmon.project": project,
                "fairmon.attribute": str(a["attribute"] or ""),
                "fairmon.arm": str(a["arm"] or ""),
                "fairmon.kind": a["kind"],
                "fairmon.alert_id": a["alert_id"],
            }
            payload = {k: _plain(v) for k, v in a.items()}
            emit_event(event=f"fairmon.alert.{a['kind']}", resource=resource, payload=payload)
            n += 1
    except Exception as e:
        run_logger().warning("alerts: Prefect events not emitted (%s)", type(e).__name__)
    return n
