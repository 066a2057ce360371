"""The Cloudflare Queues face, consuming: `.../messages/pull` and `.../messages/ack` with Cloudflare's
bodies and result shapes. Bodies follow Cloudflare's pull rule: `json` and `bytes` base64, `text` plain;
each message's `metadata` carries `CF-Content-Type` and `CF-sourceMessageSource` like Cloudflare's.
An empty request body means the defaults. `.../messages/peek` reads without leasing; `.../messages/purge`
removes peeked messages by `ref` (see sluice/engine/peek.py for which ones it can)."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from lambdas.common.http import RESPONSE_BUDGET_BYTES, encoded_size, ok
from lambdas.common.responses import Envelope
from lambdas.common.runtime import service
from lambdas.faces.cloudflare.common import CF_Q, ack_warnings, metrics_of, queue_name, warnings_as_list
from lambdas.faces.cloudflare.pullconsumers import PullConsumers
from lambdas.faces.cloudflare.responses import CfAcked, CfPeeked, CfPulled, CfPurgedRefs
from lambdas.faces.cloudflare.schemas import CfAck, CfPeek, CfPull, CfPurgeRefs, seconds
from sluice.codec import body_to_cloudflare
from sluice.engine.consume import RetryRequest
from sluice.engine.peek import Peeker
from sluice.models import DEFAULT_GROUP, Delivery

router = APIGatewayHttpRouter()
DEFAULT_BATCH = 5


def cloudflare_message(d: Delivery) -> dict[str, Any]:
    return {
        "body": body_to_cloudflare(d.body, d.content_type),
        "id": d.id,
        "timestamp_ms": d.timestamp_ms,
        "attempts": d.attempts,
        "lease_id": d.lease_id,
        "metadata": {**d.attributes, "CF-sourceMessageSource": "api", "CF-Content-Type": d.content_type},
    }


def _batch_size(name: str, asked: int | None) -> int:
    """The request's batch size, else the registered http_pull consumer's, else Cloudflare's 5."""
    if asked is not None:
        return asked
    engine = service()
    registered = PullConsumers(engine.backend).get(engine.directory.get(name))
    return (registered.batch_size if registered else None) or DEFAULT_BATCH


@router.post(f"{CF_Q}/messages/pull")
def pull(
    account_id: str, queue_id: str, body: Annotated[CfPull | None, Body()] = None
) -> Response[Envelope[CfPulled]]:
    body = body or CfPull()
    name = queue_name(queue_id)
    result = service().consumer.pull(
        name,
        group=DEFAULT_GROUP,
        batch_size=_batch_size(name, body.batch_size),
        visibility_ms=body.visibility_timeout_ms or body.visibility_timeout,
        size_of=lambda d: encoded_size(cloudflare_message(d)),
        max_bytes=RESPONSE_BUDGET_BYTES,
    )
    metrics = metrics_of(name)
    return ok(
        {
            "messages": [cloudflare_message(d) for d in result.messages],
            "message_backlog_count": metrics["backlog_count"],
            "metadata": {"metrics": metrics},
        }
    )


@router.post(f"{CF_Q}/messages/ack")
def ack(
    account_id: str, queue_id: str, body: Annotated[CfAck | None, Body()] = None
) -> Response[Envelope[CfAcked]]:
    body = body or CfAck()
    name = queue_name(queue_id)
    leases = [a.lease_id for a in body.acks] + [r.lease_id for r in body.retries]
    result = service().consumer.ack(
        name,
        [a.lease_id for a in body.acks],
        [RetryRequest(r.lease_id, seconds(r.delay_seconds)) for r in body.retries],
    )
    as_list = warnings_as_list(router.current_event.headers)
    return ok(
        {
            "ackCount": result.ack_count,
            "retryCount": result.retry_count,
            "warnings": ack_warnings(name, result.warnings, leases, as_list),
        }
    )


@router.post(f"{CF_Q}/messages/peek")
def peek(
    account_id: str, queue_id: str, body: Annotated[CfPeek | None, Body()] = None
) -> Response[Envelope[CfPeeked]]:
    engine = service()
    peeked = Peeker(engine.operations, engine.consumer).peek(
        queue_name(queue_id), (body or CfPeek()).batch_size
    )
    messages: list[dict[str, Any]] = []
    size = 0
    for m in peeked:
        shown = {
            "body": body_to_cloudflare(m.body, m.content_type),
            "id": m.id,
            "timestamp_ms": m.timestamp_ms,
            "attempts": m.attempts,
            "ref": m.ref,
            "metadata": {**m.attributes, "CF-sourceMessageSource": "api", "CF-Content-Type": m.content_type},
        }
        size += encoded_size(shown)
        if messages and size > RESPONSE_BUDGET_BYTES:
            break  # a peek leases nothing: what is left out stays for the next peek or pull
        messages.append(shown)
    return ok({"messages": messages})


@router.post(f"{CF_Q}/messages/purge")
def purge_refs(
    account_id: str, queue_id: str, body: Annotated[CfPurgeRefs, Body()]
) -> Response[Envelope[CfPurgedRefs]]:
    """Purging a ref acks it: a message delivered at least once goes; one never delivered is reported."""
    engine = service()
    name = queue_name(queue_id)
    refs = [r.ref for r in body.refs]
    result = engine.consumer.ack(name, refs)
    warnings = ack_warnings(name, result.warnings, refs, as_list=False)
    queue = engine.directory.get(name)
    for ref in list(warnings):
        lease = engine.consumer.signer.verify(queue.lease_key, ref)
        if lease is not None and lease.attempt == 0:
            warnings[ref] = (
                "a message never delivered cannot be removed out of order; pull and ack it, "
                "or purge the queue"
            )
    return ok({"errors": [], "warnings": warnings})
