"""Flow-run heartbeats that stop as soon as the flow's work is done.

Prefect 3.8 sends a flow run's heartbeat, the event
``prefect.flow-run.heartbeat`` every ``flows.heartbeat_frequency`` seconds
(default 180), which is how its zombie-run detection tells a crashed process
from a long run. Its thread sleeps in steps of one second, and every flow run
waits for that thread when it ends: up to a second per ``fairmon run`` or
``fairmon backfill`` (bench/README.md). The runner therefore calls its flows with Prefect's own
heartbeat off (:func:`prefect_heartbeat_off`), and the flows send the same
event, at the configured frequency, from a thread that stops at once when
their body returns (:func:`beating`). A flow called some other way (e.g. by
a deployment) keeps Prefect's heartbeat, and :func:`beating` adds none.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: Seconds between heartbeats for flows the runner calls with Prefect's heartbeat off; unset otherwise.
_SECONDS: contextvars.ContextVar[int | None] = contextvars.ContextVar("fairmon_heartbeat_seconds")


@contextmanager
def prefect_heartbeat_off() -> Iterator[None]:
    """Around a flow call: Prefect's heartbeat thread off for the flow runs
    started in the block, and the configured frequency (``flows.heartbeat_frequency``;
    None: no heartbeats) kept for :func:`beating` inside them."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, get_current_settings, temporary_settings

    token = _SECONDS.set(get_current_settings().flows.heartbeat_frequency)
    try:
        with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
            yield
    finally:
        _SECONDS.reset(token)


@contextmanager
def beating() -> Iterator[None]:
    """Inside a flow function: send the flow run's heartbeat event now and
    every configured number of seconds until the block ends, from a daemon
    thread that stops without waiting. The event is Prefect's own (name,
    resource and related flow, deployment and tags as its flow engine builds
    them). Does nothing outside a flow run, or when the flow was not called
    under :func:`prefect_heartbeat_off` (Prefect's heartbeat then runs) or
    heartbeats are off."""
    from prefect.context import FlowRunContext

    seconds = _SECONDS.get(None)
    ctx = FlowRunContext.get()
    if not seconds or ctx is None or ctx.flow_run is None:
        yield
        return
    resource, related = _event_template(ctx)
    stop = threading.Event()

    def loop() -> None:
        from prefect.events import emit_event

        while not stop.is_set():
            try:
                emit_event(event="prefect.flow-run.heartbeat", resource=resource, related=related)
            except Exception:  # as Prefect's own loop: a missed beat is logged, the next one is tried
                logging.getLogger(__name__).debug("flow-run heartbeat not sent", exc_info=True)
            stop.wait(seconds)

    thread = threading.Thread(
        target=contextvars.copy_context().run, args=(loop,), name="fairmon-heartbeat", daemon=True
    )
    thread.start()
    try:
        yield
    finally:
        stop.set()


def _event_template(ctx) -> tuple[dict[str, str], list]:
    """(resource, related) of the heartbeat event of the flow run in ``ctx``,
    as Prefect 3.8's ``FlowRunEngine._build_heartbeat_event_template`` builds them."""
    from prefect import __version__
    from prefect.events.related import tags_as_related_resources

    run = ctx.flow_run
    resource = {
        "prefect.resource.id": f"prefect.flow-run.{run.id}",
        "prefect.resource.name": run.name or "",
        "prefect.version": __version__,
    }
    related: list = []  # dicts and Prefect's RelatedResource (tags): the event validates both
    if run.flow_id:
        flow = {"prefect.resource.id": f"prefect.flow.{run.flow_id}", "prefect.resource.role": "flow"}
        related.append({**flow, "prefect.resource.name": ctx.flow.name if ctx.flow else ""})
    if run.deployment_id:
        related.append(
            {"prefect.resource.id": f"prefect.deployment.{run.deployment_id}", "prefect.resource.role": "deployment"}
        )
    related += tags_as_related_resources(set(run.tags or []))
    return resource, related
