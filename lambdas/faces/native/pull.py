"""Pull consumers on the native face: pull, ack/retry, lease extension and peek."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from lambdas.common.http import RESPONSE_BUDGET_BYTES, encoded_size, ok
from lambdas.common.responses import Envelope
from lambdas.common.runtime import service
from lambdas.faces.native.responses import Acked, Extended, Peeked, Pulled
from lambdas.faces.native.schemas import Ack, ExtendLeases, Peek, Pull
from sluice.codec import body_to_native, delivery_to_native
from sluice.engine.consume import RetryRequest
from sluice.engine.peek import Peeker
from sluice.models import AckResult, Delivery

router = APIGatewayHttpRouter()


def native_message(d: Delivery) -> dict[str, Any]:
    """The native pull shape: what a push target receives, plus the lease."""
    return {**delivery_to_native(d), "lease_id": d.lease_id}


@router.post("/v1/queues/<queue_name>/messages/pull")
def pull(queue_name: str, body: Annotated[Pull, Body()]) -> Response[Envelope[Pulled]]:
    result = service().consumer.pull(
        queue_name,
        group=body.consumer_group,
        batch_size=body.batch_size,
        visibility_ms=body.visibility_ms,
        wait_ms=body.wait_time_ms,
        size_of=lambda d: encoded_size(native_message(d)),
        max_bytes=RESPONSE_BUDGET_BYTES,
        acks=None if body.acks is None else [a.lease_id for a in body.acks],
    )
    out: dict[str, Any] = {
        "messages": [native_message(d) for d in result.messages],
        "message_backlog_count": result.message_backlog_count,
        "backlog_exact": result.backlog_exact,
    }
    if result.backlog is not None:
        out["backlog"] = result.backlog.model_dump()
    if result.ack is not None:
        out["ack"] = ack_answer(result.ack)
    return ok(out)


def ack_answer(result: AckResult) -> dict[str, Any]:
    """The ack endpoint's answer; a pull that carried acks answers the same under `ack`."""
    return {"ackCount": result.ack_count, "retryCount": result.retry_count, "warnings": result.warnings}


@router.post("/v1/queues/<queue_name>/messages/ack")
def ack(queue_name: str, body: Annotated[Ack, Body()]) -> Response[Envelope[Acked]]:
    result = service().consumer.ack(
        queue_name,
        [a.lease_id for a in body.acks],
        [RetryRequest(r.lease_id, r.delay_seconds) for r in body.retries],
    )
    return ok(ack_answer(result))


@router.post("/v1/queues/<queue_name>/messages/lease")
def extend(queue_name: str, body: Annotated[ExtendLeases, Body()]) -> Response[Envelope[Extended]]:
    result = service().consumer.extend(queue_name, body.lease_ids, body.visibility_timeout_ms)
    return ok({"extendedCount": result.ack_count, "warnings": result.warnings})


@router.post("/v1/queues/<queue_name>/messages/peek")
def peek(queue_name: str, body: Annotated[Peek | None, Body()] = None) -> Response[Envelope[Peeked]]:
    """A group's unacked messages without leasing them or counting a delivery (docs/api.md "Peek")."""
    request = body or Peek()
    engine = service()
    peeked = Peeker(engine.operations, engine.consumer).peek(
        queue_name, request.batch_size, request.consumer_group
    )
    messages: list[dict[str, Any]] = []
    size = 0
    for m in peeked:
        shown = {
            "id": m.id,
            "body": body_to_native(m.body, m.content_type),
            "content_type": m.content_type,
            "timestamp_ms": m.timestamp_ms,
            "attempts": m.attempts,
            "attributes": m.attributes,
        }
        size += encoded_size(shown)
        if messages and size > RESPONSE_BUDGET_BYTES:
            break  # a peek leases nothing: what is left out is there for the next peek
        messages.append(shown)
    return ok({"messages": messages})
