"""Sending on the native face: `POST /v1/queues/{q}/messages`."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from lambdas.common import idempotency
from lambdas.common.http import ok
from lambdas.common.responses import Envelope
from lambdas.common.runtime import service
from lambdas.faces.native.responses import Sent
from lambdas.faces.native.schemas import SendBatch, SendMessage
from sluice import errors
from sluice.codec import body_from_request
from sluice.models import MAX_SEND_BYTES, MAX_VERSION, OutgoingMessage

router = APIGatewayHttpRouter()


def to_outgoing(messages: list[SendMessage], default_delay: int | None) -> list[OutgoingMessage]:
    """Request messages → engine messages; a body that does not fit its content type is a 400."""
    out = []
    for index, msg in enumerate(messages):
        try:
            body = body_from_request(msg.body, msg.content_type)
        except ValueError as exc:
            raise errors.InvalidRequest(f"message {index}: {exc}") from exc
        delay = msg.delay_seconds if msg.delay_seconds is not None else default_delay
        out.append(
            OutgoingMessage(
                body=body,
                content_type=msg.content_type,
                delay_seconds=delay,
                partition_key=msg.partition_key,
                attributes=msg.attributes,
            )
        )
    return out


@router.post("/v1/queues/<queue_name>/messages")
def send(
    queue_name: str,
    body: Annotated[SendBatch, Body()],
    version: Annotated[int | None, Query(ge=0, le=MAX_VERSION)] = None,
) -> Response[Envelope[Sent]]:
    def publish() -> dict:
        result = service().publisher.publish(
            queue_name,
            to_outgoing(body.messages, body.delay_seconds),
            version=version,
            max_bytes=MAX_SEND_BYTES,
        )
        return {"message_ids": result.message_ids, "offsets": result.offsets}

    key = idempotency.header_key(router.current_event.headers)
    request = {"body": body.model_dump(mode="json"), "version": version}
    return ok(idempotency.once(queue_name, key, request, publish, router.lambda_context))
