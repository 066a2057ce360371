"""The Cloudflare Queues face, consumers: `.../queues/{queue_id}/consumers[/{consumer_id}]`.

- `http_pull` (one per queue) registers the queue's pull consumer: its `max_retries`, `retry_delay`,
  `visibility_timeout_ms` and `dead_letter_queue` are the queue's settings of those names; its
  `batch_size` is the default batch of Cloudflare-face pulls. Pulls work with or without one.
- `worker` is a Sluice push consumer of the `default` group: `script_name` names the target (a Lambda
  function ARN, an `https://` webhook URL, locally also `python:module:function`, as Workers do not run
  here); `batch_size` → `max_batch_size`, `max_wait_time_ms` → `max_batch_timeout_ms`,
  `max_concurrency`, `max_retries`, `retry_delay` → `retry_delay_seconds`; `dead_letter_queue` is
  the queue's setting.
"""

from __future__ import annotations

import secrets
from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from pydantic import Field

from lambdas.common.http import ok
from lambdas.common.responses import Envelope
from lambdas.common.runtime import service
from lambdas.faces.cloudflare.common import CF_Q, cf_consumers, pull_shape, push_shape, queue_name
from lambdas.faces.cloudflare.pullconsumers import PullConsumer, PullConsumers
from lambdas.faces.cloudflare.responses import CfConsumerView
from lambdas.faces.cloudflare.schemas import Lenient, seconds
from sluice import errors
from sluice.engine.push import ConsumerStore, PushConsumer, parse_consumer
from sluice.engine.queues import parse_settings
from sluice.models import MAX_DELAY_SECONDS, MAX_PULL_BATCH, Queue
from sluice.settings import get_settings

router = APIGatewayHttpRouter()
_CONSUMERS = f"{CF_Q}/consumers"


class CfConsumerSettings(Lenient):
    batch_size: int | None = Field(None, ge=1, le=MAX_PULL_BATCH)
    max_concurrency: int | None = None
    max_retries: int | None = None
    max_wait_time_ms: int | None = None
    retry_delay: float | None = Field(None, ge=0, le=MAX_DELAY_SECONDS)
    visibility_timeout_ms: int | None = None


class CfConsumer(Lenient):
    type: Literal["worker", "http_pull"]
    script_name: str | None = Field(None, description="worker: the push target (see the module doc)")
    dead_letter_queue: str | None = Field(
        None, pattern=r"^([A-Za-z0-9_-]{1,63})?$", description="'' clears it"
    )
    settings: CfConsumerSettings = Field(default_factory=CfConsumerSettings)


def _queue_settings(queue: Queue, body: CfConsumer) -> dict[str, Any]:
    """The queue settings this consumer sets, validated (a bad one is a 400 before anything changes)."""
    s = body.settings
    raw: dict[str, Any] = {}
    if body.dead_letter_queue is not None:
        raw["dead_letter_queue"] = body.dead_letter_queue or None
    if body.type == "http_pull":
        for name, value in (
            ("max_retries", s.max_retries),
            ("retry_delay_seconds", seconds(s.retry_delay)),
            ("visibility_timeout_ms", s.visibility_timeout_ms),
        ):
            if value is not None:
                raw[name] = value
    settings = parse_settings(raw, queue.settings)
    if settings.dead_letter_queue == queue.name:
        raise errors.InvalidSettings("a queue cannot be its own dead_letter_queue")
    return raw


def _push_consumer(body: CfConsumer, consumer_id: str, now: int) -> PushConsumer:
    target = body.script_name or ""
    s = body.settings
    raw: dict[str, Any] = {
        "id": consumer_id,
        "type": "webhook" if target.startswith(("https://", "http://")) else "lambda",
        "max_batch_size": s.batch_size,
        "max_batch_timeout_ms": s.max_wait_time_ms,
        "max_concurrency": s.max_concurrency,
        "max_retries": s.max_retries,
        "retry_delay_seconds": seconds(s.retry_delay),
    }
    raw["url" if raw["type"] == "webhook" else "function_arn"] = target
    allow_local = get_settings().allow_local_webhooks
    return parse_consumer(raw, allow_local=allow_local, now=now)


def _apply(queue: Queue, raw_settings: dict[str, Any]) -> Queue:
    return service().queues.update_settings(queue.name, raw_settings) if raw_settings else queue


@router.post(_CONSUMERS)
def create_consumer(
    account_id: str, queue_id: str, body: Annotated[CfConsumer, Body()]
) -> Response[Envelope[CfConsumerView]]:
    engine = service()
    queue = engine.queues.get(queue_name(queue_id))
    raw_settings = _queue_settings(queue, body)
    consumer_id, now = secrets.token_hex(16), engine.backend.clock()
    if body.type == "http_pull":
        pull = PullConsumer(consumer_id=consumer_id, created_ms=now, batch_size=body.settings.batch_size)
        PullConsumers(engine.backend).put(queue, pull, new=True)
        return ok(pull_shape(_apply(queue, raw_settings), pull))
    push = ConsumerStore(engine.backend).create(queue, _push_consumer(body, consumer_id, now))
    return ok(push_shape(_apply(queue, raw_settings), push))


def _pull_of(queue: Queue, consumer_id: str) -> PullConsumer | None:
    pull = PullConsumers(service().backend).get(queue)
    return pull if pull and pull.consumer_id == consumer_id else None


@router.put(f"{_CONSUMERS}/<consumer_id>")
def update_consumer(
    account_id: str, queue_id: str, consumer_id: str, body: Annotated[CfConsumer, Body()]
) -> Response[Envelope[CfConsumerView]]:
    engine = service()
    queue = engine.queues.get(queue_name(queue_id))
    raw_settings = _queue_settings(queue, body)
    pull = _pull_of(queue, consumer_id)
    store = ConsumerStore(engine.backend)
    if pull is not None:
        if body.type != "http_pull":
            raise errors.InvalidConsumer("an http_pull consumer cannot become a worker; create a new one")
        pull = pull.model_copy(update={"batch_size": body.settings.batch_size or pull.batch_size})
        PullConsumers(engine.backend).put(queue, pull, new=False)
        return ok(pull_shape(_apply(queue, raw_settings), pull))
    existing = store.get(queue, consumer_id)
    if body.type != "worker":
        raise errors.InvalidConsumer("a worker consumer cannot become http_pull; create a new one")
    push = store.replace(queue, _push_consumer(body, existing.id, existing.created_ms))
    return ok(push_shape(_apply(queue, raw_settings), push))


@router.get(_CONSUMERS)
def list_consumers(account_id: str, queue_id: str) -> Response[Envelope[list[CfConsumerView]]]:
    return ok(cf_consumers(service().queues.get(queue_name(queue_id))))


@router.get(f"{_CONSUMERS}/<consumer_id>")
def get_consumer(account_id: str, queue_id: str, consumer_id: str) -> Response[Envelope[CfConsumerView]]:
    queue = service().queues.get(queue_name(queue_id))
    pull = _pull_of(queue, consumer_id)
    if pull is not None:
        return ok(pull_shape(queue, pull))
    return ok(push_shape(queue, ConsumerStore(service().backend).get(queue, consumer_id)))


@router.delete(f"{_CONSUMERS}/<consumer_id>")
def delete_consumer(account_id: str, queue_id: str, consumer_id: str) -> Response[Envelope[None]]:
    queue = service().queues.get(queue_name(queue_id))
    if _pull_of(queue, consumer_id) is not None:
        PullConsumers(service().backend).delete(queue)
    else:
        ConsumerStore(service().backend).delete(queue, consumer_id)
    return ok(None)
