"""Queue administration and tokens (`/v1/queues`, `/v1/tokens`)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from lambdas.common.http import ok, principal_of
from lambdas.common.responses import Envelope
from lambdas.common.runtime import service
from lambdas.faces.native.responses import AccessKeyIssued, QueueList, QueueView, TokenCreated, TokenView
from lambdas.faces.native.schemas import CreateQueue, CreateToken, UpdateQueue
from sluice import errors
from sluice.models import Queue
from sluice.names import ALL_QUEUES

router = APIGatewayHttpRouter()


@router.post("/v1/queues", status_code=201)
def create_queue(body: Annotated[CreateQueue, Body()]) -> Response[Envelope[QueueView]]:
    queue = service().queues.create(body.queue_name, body.settings)
    return ok(queue.public(), status=201)


@router.get("/v1/queues")
def list_queues(
    limit: Annotated[int, Query(ge=1, le=1000)] = 100, cursor: Annotated[str | None, Query()] = None
) -> Response[Envelope[QueueList]]:
    """Every queue for a token bound to all (`*`); the one it is bound to otherwise."""
    principal = principal_of(router)
    if principal.queue != ALL_QUEUES:
        return ok({"queues": [q.public() for q in _bound_queue(principal.queue)], "cursor": None})
    queues = service().queues.list(limit=limit, after=cursor)
    next_cursor = queues[-1].name if len(queues) == limit else None
    return ok({"queues": [q.public() for q in queues], "cursor": next_cursor})


def _bound_queue(name: str) -> list[Queue]:
    """The queue a token is bound to, if it exists (a token may be bound to a stream name instead)."""
    try:
        return [service().queues.get(name)]
    except (errors.QueueNotFound, errors.InvalidQueueName):
        return []


@router.get("/v1/queues/<queue_name>")
def get_queue(queue_name: str) -> Response[Envelope[QueueView]]:
    return ok(service().queues.get(queue_name).public())


@router.patch("/v1/queues/<queue_name>")
def update_queue(queue_name: str, body: Annotated[UpdateQueue, Body()]) -> Response[Envelope[QueueView]]:
    return ok(service().queues.update_settings(queue_name, body.settings).public())


@router.delete("/v1/queues/<queue_name>")
def delete_queue(queue_name: str) -> Response[Envelope[None]]:
    service().queues.delete(queue_name)
    return ok(None)


@router.post("/v1/tokens", status_code=201)
def create_token(body: Annotated[CreateToken, Body()]) -> Response[Envelope[TokenCreated]]:
    tokens = service().tokens
    expires = None if body.expires_in_seconds is None else tokens.expiry_after(body.expires_in_seconds)
    token_id, token = tokens.create(body.queue, body.scopes, expires_ms=expires)
    created = {"token_id": token_id, "token": token, "queue": body.queue, "scopes": body.scopes}
    return ok({**created, "expires_on": expires}, status=201)


@router.post("/v1/tokens/<token_id>/access-key", status_code=201)
def issue_access_key(token_id: str) -> Response[Envelope[AccessKeyIssued]]:
    """SigV4 credentials for the SQS face that act as this token (a key issued before stops working)."""
    access_key_id, secret = service().access_keys.issue(token_id)
    return ok({"token_id": token_id, "access_key_id": access_key_id, "secret_access_key": secret}, status=201)


@router.get("/v1/tokens")
def list_tokens() -> Response[Envelope[list[TokenView]]]:
    return ok(service().tokens.list())


@router.delete("/v1/tokens/<token_id>")
def revoke_token(token_id: str) -> Response[Envelope[None]]:
    service().tokens.revoke(token_id)
    return ok(None)
