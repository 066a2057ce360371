"""The Cloudflare Queues face, consuming: `.../messages/pull` and `.../messages/ack` with Cloudflare's
bodies and result shapes. Bodies follow Cloudflare's pull rule: `json` and `bytes` base64, `text` plain;
each message's `metadata` carries `CF-Content-Type` and `CF-sourceMessageSource` like Cloudflare's."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from pydantic import Field

from lambdas.common.http import RESPONSE_BUDGET_BYTES, encoded_size, ok
from lambdas.common.runtime import service
from lambdas.common.schemas import Ack, Lenient
from sluice.codec import body_to_cloudflare
from sluice.engine.consume import RetryRequest
from sluice.models import DEFAULT_GROUP, MAX_PULL_BATCH, MAX_VISIBILITY_MS, Delivery

router = APIGatewayHttpRouter()
_CF_Q = "/client/v4/accounts/<account_id>/queues/<queue_id>"


class CfPull(Lenient):
    batch_size: int = Field(5, ge=1, le=MAX_PULL_BATCH)
    visibility_timeout_ms: int | None = Field(None, ge=1, le=MAX_VISIBILITY_MS)
    visibility_timeout: int | None = Field(None, ge=1, le=MAX_VISIBILITY_MS, description="synonym, in ms")


def cloudflare_message(d: Delivery) -> dict[str, Any]:
    return {
        "body": body_to_cloudflare(d.body, d.content_type),
        "id": d.id,
        "timestamp_ms": d.timestamp_ms,
        "attempts": d.attempts,
        "lease_id": d.lease_id,
        "metadata": {**d.attributes, "CF-sourceMessageSource": "api", "CF-Content-Type": d.content_type},
    }


@router.post(f"{_CF_Q}/messages/pull")
def pull(account_id: str, queue_id: str, body: Annotated[CfPull, Body()]) -> Response[dict]:
    result = service().consumer.pull(
        queue_id,
        group=DEFAULT_GROUP,
        batch_size=body.batch_size,
        visibility_ms=body.visibility_timeout_ms or body.visibility_timeout,
        size_of=lambda d: encoded_size(cloudflare_message(d)),
        max_bytes=RESPONSE_BUDGET_BYTES,
    )
    return ok(
        {
            "messages": [cloudflare_message(d) for d in result.messages],
            "message_backlog_count": result.message_backlog_count,
        }
    )


@router.post(f"{_CF_Q}/messages/ack")
def ack(account_id: str, queue_id: str, body: Annotated[Ack, Body()]) -> Response[dict]:
    result = service().consumer.ack(
        queue_id,
        [a.lease_id for a in body.acks],
        [RetryRequest(r.lease_id, r.delay_seconds) for r in body.retries],
    )
    return ok({"ackCount": result.ack_count, "retryCount": result.retry_count, "warnings": result.warnings})
