"""Push consumers of a queue (`/v1/queues/{q}/consumers`): admin routes."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from lambdas.common.http import ok
from lambdas.common.responses import Envelope
from lambdas.common.runtime import service
from lambdas.faces.native.responses import Consumers, ConsumerView
from lambdas.faces.native.schemas import CreateConsumer
from sluice.engine.push import ConsumerStore, parse_consumer
from sluice.settings import get_settings

router = APIGatewayHttpRouter()


def _store() -> ConsumerStore:
    return ConsumerStore(service().backend)


@router.post("/v1/queues/<queue_name>/consumers", status_code=201)
def create_consumer(
    queue_name: str, body: Annotated[CreateConsumer, Body()]
) -> Response[Envelope[ConsumerView]]:
    engine = service()
    queue = engine.queues.get(queue_name)
    raw: dict[str, Any] = body.model_dump(exclude_none=True)
    allow_local = get_settings().allow_local_webhooks
    consumer = parse_consumer(raw, allow_local=allow_local, now=engine.backend.clock())
    return ok(_store().create(queue, consumer).public(), status=201)


@router.get("/v1/queues/<queue_name>/consumers")
def list_consumers(queue_name: str) -> Response[Envelope[Consumers]]:
    queue = service().queues.get(queue_name)
    return ok({"consumers": [x.public() for x in _store().list(queue)]})


@router.get("/v1/queues/<queue_name>/consumers/<consumer_id>")
def get_consumer(queue_name: str, consumer_id: str) -> Response[Envelope[ConsumerView]]:
    queue = service().queues.get(queue_name)
    return ok(_store().get(queue, consumer_id).public())


@router.delete("/v1/queues/<queue_name>/consumers/<consumer_id>")
def delete_consumer(queue_name: str, consumer_id: str) -> Response[Envelope[None]]:
    queue = service().queues.get(queue_name)
    _store().delete(queue, consumer_id)
    return ok(None)
