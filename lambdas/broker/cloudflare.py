"""The Cloudflare Queues face, sending: `POST /client/v4/accounts/{account_id}/queues/{queue_id}/messages`
and `.../messages/batch`, with Cloudflare's bodies. `account_id` is accepted and ignored; `queue_id` is
the queue name. Cloudflare answers a send with no result; so do we (`Idempotency-Key` works here too)."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from lambdas.broker import idempotency
from lambdas.broker.send import to_outgoing
from lambdas.common.http import ok
from lambdas.common.runtime import service
from lambdas.common.schemas import DelaySeconds, SendMessage, Strict

router = APIGatewayHttpRouter()
_CF_Q = "/client/v4/accounts/<account_id>/queues/<queue_id>"


class CfBatch(Strict):
    messages: list[SendMessage]
    delay_seconds: DelaySeconds | None = None


def _send(queue_id: str, messages: list[SendMessage], delay: int | None, request: Any) -> Response[dict]:
    def publish() -> dict:
        service().publisher.publish(queue_id, to_outgoing(messages, delay))
        return {}

    key = idempotency.header_key(router.current_event.headers)
    idempotency.once(queue_id, key, request, publish, router.lambda_context)
    return ok(None)


@router.post(f"{_CF_Q}/messages")
def push_message(account_id: str, queue_id: str, body: Annotated[SendMessage, Body()]) -> Response[dict]:
    return _send(queue_id, [body], None, body.model_dump(mode="json"))


@router.post(f"{_CF_Q}/messages/batch")
def push_batch(account_id: str, queue_id: str, body: Annotated[CfBatch, Body()]) -> Response[dict]:
    return _send(queue_id, body.messages, body.delay_seconds, body.model_dump(mode="json"))
