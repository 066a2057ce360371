"""The Cloudflare Queues face, sending: `POST .../queues/{queue_id}/messages` and `.../messages/batch`
with Cloudflare's bodies (`Idempotency-Key` works here too). The result carries Cloudflare's
best-effort queue metrics, read after the messages are stored."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from lambdas.common import idempotency
from lambdas.common.http import ok
from lambdas.common.responses import Envelope
from lambdas.common.runtime import service
from lambdas.faces.cloudflare.common import CF_Q, metrics_of, queue_name
from lambdas.faces.cloudflare.responses import CfSent
from lambdas.faces.cloudflare.schemas import CfBatch, CfMessage
from lambdas.faces.native.schemas import SendMessage
from lambdas.faces.native.send import to_outgoing

router = APIGatewayHttpRouter()


def _send(queue_id: str, messages: list[SendMessage], request: Any) -> Response[Envelope[CfSent]]:
    name = queue_name(queue_id)

    def publish() -> dict:
        service().publisher.publish(name, to_outgoing(messages, None))
        return {}

    key = idempotency.header_key(router.current_event.headers)
    idempotency.once(name, key, request, publish, router.lambda_context)
    return ok({"metadata": {"metrics": metrics_of(name)}})


@router.post(f"{CF_Q}/messages")
def push_message(
    account_id: str, queue_id: str, body: Annotated[CfMessage, Body()]
) -> Response[Envelope[CfSent]]:
    return _send(queue_id, [body.to_send()], body.model_dump(mode="json"))


@router.post(f"{CF_Q}/messages/batch")
def push_batch(
    account_id: str, queue_id: str, body: Annotated[CfBatch, Body()]
) -> Response[Envelope[CfSent]]:
    messages = [m.to_send(body.delay_seconds) for m in body.messages]
    return _send(queue_id, messages, body.model_dump(mode="json"))
