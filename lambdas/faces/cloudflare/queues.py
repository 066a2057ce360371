"""The Cloudflare Queues face, administration: queues (create/list/get/update/edit/delete), metrics
and purge, with Cloudflare's bodies and result shapes, over the engine's queue registry.

Cloudflare's queue settings map onto Sluice's: `delivery_delay` → `delivery_delay_seconds` (rounded up),
`message_retention_period` → `retention_seconds`, `delivery_paused` → pause/resume. `PUT` replaces
them (absent ones return to their defaults), `PATCH` changes only those given. Renaming is refused:
a Sluice queue's name is its storage key."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from pydantic import Field

from lambdas.common.http import ok
from lambdas.common.responses import Envelope
from lambdas.common.runtime import service
from lambdas.faces.cloudflare.common import CF_Q, CF_QUEUES, iso, metrics_of, queue_name, queue_shape
from lambdas.faces.cloudflare.responses import CfMetrics, CfPurgeStatus, CfQueueView
from lambdas.faces.cloudflare.schemas import Lenient, seconds
from sluice import errors
from sluice.engine.queues import parse_settings
from sluice.models import MAX_DELAY_SECONDS, Queue, QueueSettings

router = APIGatewayHttpRouter()


class CfQueueSettings(Lenient):
    delivery_delay: float | None = Field(None, ge=0, le=MAX_DELAY_SECONDS)
    delivery_paused: bool | None = None
    message_retention_period: float | None = Field(None, ge=60)


class CfCreateQueue(Lenient):
    queue_name: str = Field(min_length=1)
    jurisdiction: str | None = Field(None, description="accepted and ignored (eu | us | fedramp)")
    settings: CfQueueSettings | None = Field(None, description="as wrangler sends them")


class CfUpdateQueue(Lenient):
    queue_name: str | None = None
    jurisdiction: str | None = Field(None, description="accepted and ignored (eu | us | fedramp)")
    settings: CfQueueSettings | None = None


class CfPurge(Lenient):
    delete_messages_permanently: bool = Field(False, description="must be true, as on Cloudflare")


@router.post(CF_QUEUES)
def create_queue(account_id: str, body: Annotated[CfCreateQueue, Body()]) -> Response[Envelope[CfQueueView]]:
    given = body.settings or CfQueueSettings()
    registry = service().queues
    queue = registry.create(body.queue_name, _raw_settings(given, replace=False))
    if given.delivery_paused:
        queue = registry.set_paused(queue.name, True)
    return ok(queue_shape(queue, with_consumers=False))


@router.get(CF_QUEUES)
def list_queues(
    account_id: str,
    name: Annotated[str | None, Query(description="only the queue of this name (wrangler's lookup)")] = None,
    page: Annotated[int, Query(ge=1)] = 1,
    per_page: Annotated[int, Query(ge=1, le=1000)] = 1000,
) -> Response[Envelope[list[CfQueueView]]]:
    """Every queue, in name order, `per_page` at a time (a page past the end is empty)."""
    registry = service().queues
    if name is not None:
        try:
            return ok([queue_shape(registry.get(name))])
        except (errors.QueueNotFound, errors.InvalidQueueName):
            return ok([])
    after, page_queues = None, []
    for _ in range(page):
        page_queues = registry.list(limit=per_page, after=after)
        if not page_queues:
            break
        after = page_queues[-1].name
    return ok([queue_shape(q) for q in page_queues])


@router.get(CF_Q)
def get_queue(account_id: str, queue_id: str) -> Response[Envelope[CfQueueView]]:
    return ok(queue_shape(service().queues.get(queue_name(queue_id))))


def _raw_settings(given: CfQueueSettings, *, replace: bool) -> dict[str, Any]:
    """Cloudflare's settings as Sluice's; with `replace`, those not given return to their defaults."""
    defaults = QueueSettings()
    raw: dict[str, Any] = {}
    if given.delivery_delay is not None or replace:
        delay = seconds(given.delivery_delay)
        raw["delivery_delay_seconds"] = defaults.delivery_delay_seconds if delay is None else delay
    if given.message_retention_period is not None or replace:
        period = given.message_retention_period
        raw["retention_seconds"] = defaults.retention_seconds if period is None else int(period)
    return raw


def _change(queue_id: str, body: CfUpdateQueue, *, replace: bool) -> Queue:
    registry = service().queues
    queue = registry.get(queue_name(queue_id))
    if body.queue_name is not None and body.queue_name != queue.name:
        raise errors.InvalidRequest("renaming a queue is not supported; create a new queue instead")
    given = body.settings or CfQueueSettings()
    raw = _raw_settings(given, replace=replace)
    parse_settings(raw, queue.settings)  # a bad value is a 400 before anything changes
    paused = given.delivery_paused if given.delivery_paused is not None else (False if replace else None)
    queue = registry.update_settings(queue.name, raw)
    if paused is not None and paused != queue.paused:
        queue = registry.set_paused(queue.name, paused)
    return queue


@router.put(CF_Q)
def update_queue(
    account_id: str, queue_id: str, body: Annotated[CfUpdateQueue, Body()]
) -> Response[Envelope[CfQueueView]]:
    return ok(queue_shape(_change(queue_id, body, replace=True)))


@router.patch(CF_Q)
def edit_queue(
    account_id: str, queue_id: str, body: Annotated[CfUpdateQueue, Body()]
) -> Response[Envelope[CfQueueView]]:
    return ok(queue_shape(_change(queue_id, body, replace=False)))


@router.delete(CF_Q)
def delete_queue(account_id: str, queue_id: str) -> Response[Envelope[None]]:
    service().queues.delete(queue_name(queue_id))
    return ok(None)


@router.get(f"{CF_Q}/metrics")
def get_metrics(account_id: str, queue_id: str) -> Response[Envelope[CfMetrics]]:
    return ok(metrics_of(queue_name(queue_id)))


@router.post(f"{CF_Q}/purge")
def start_purge(
    account_id: str, queue_id: str, body: Annotated[CfPurge | None, Body()] = None
) -> Response[Envelope[CfQueueView]]:
    if body is None or not body.delete_messages_permanently:
        raise errors.InvalidRequest("purging deletes every message: send delete_messages_permanently: true")
    engine = service()
    name = queue_name(queue_id)
    engine.operations.purge(name)
    return ok(queue_shape(engine.queues.get(name)))


@router.get(f"{CF_Q}/purge")
def purge_status(account_id: str, queue_id: str) -> Response[Envelope[CfPurgeStatus]]:
    """Purges complete before they answer, so the last one that started has completed."""
    started = service().operations.last_purge_ms(queue_name(queue_id))
    if started is None:
        return ok({"started_at": None, "completed": None})
    return ok({"started_at": iso(started), "completed": "true"})
