"""The open Durable Streams protocol, writes: create (`PUT`), append and close (`POST`), `DELETE`,
and CORS preflights (`OPTIONS`) on `/v1/stream/{path+}`."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from lambdas.common.runtime import service
from lambdas.faces.openstreams.common import (
    EXPOSED,
    RULE,
    body_bytes,
    closed_flag,
    header,
    protocol_errors,
    respond,
    stream_path,
)
from lambdas.faces.openstreams.headers import parse_expires_at, parse_fork, parse_producer, parse_ttl
from sluice import errors
from sluice.constants import OPEN_STREAM_ROUTE_PREFIX
from sluice.engine.openstreams import StreamInfo

router = APIGatewayHttpRouter()

# Status of each append outcome (PROTOCOL.md 5.2, 5.2.1, 5.3).
_APPEND_STATUS = {
    "appended": 204,
    "duplicate": 204,
    "closed": 204,
    "closed_conflict": 409,
    "type_conflict": 409,
    "seq_conflict": 409,
    "stale_epoch": 403,
    "seq_gap": 409,
    "epoch_seq": 400,
}


def _stream_headers(info: StreamInfo) -> dict[str, str]:
    headers = {"Content-Type": info.meta.content_type, "Stream-Next-Offset": info.tail_offset}
    if info.closed:
        headers["Stream-Closed"] = "true"
    return headers


def _absolute_url(path: str) -> str:
    """The stream's URL as the client reached it (API Gateway sets X-Forwarded-Proto)."""
    host = header(router, "Host") or "localhost"
    scheme = header(router, "X-Forwarded-Proto") or "http"
    return f"{scheme}://{host}{path}"


def _source_path(forked_from: str | None) -> str | None:
    """`Stream-Forked-From` is the source's URL path on this server; the engine takes the stream path
    after the route prefix (as API Gateway's `{path+}` gives it, decoded). Any other path names no
    stream here (404)."""
    if forked_from is None:
        return None
    value = unquote(forked_from.strip())
    if not value.startswith(OPEN_STREAM_ROUTE_PREFIX):
        raise errors.NotFound("Stream-Forked-From names no stream on this server")
    return value.removeprefix(OPEN_STREAM_ROUTE_PREFIX)


@router.put(RULE)
@protocol_errors
def create() -> Response[Any]:
    path = stream_path(router)
    result = service().open_streams.create(
        path,
        header(router, "Content-Type"),
        parse_ttl(header(router, "Stream-TTL")),
        header(router, "Stream-Expires-At"),
        parse_expires_at(header(router, "Stream-Expires-At")),
        closed_flag(router),
        body_bytes(router),
        parse_fork(
            _source_path(header(router, "Stream-Forked-From")),
            header(router, "Stream-Fork-Offset"),
            header(router, "Stream-Fork-Sub-Offset"),
        ),
    )
    headers = _stream_headers(result.info)
    if result.created:
        headers["Location"] = _absolute_url(router.current_event.path)
        return respond(201, headers)
    return respond(200, headers)


@router.post(RULE)
@protocol_errors
def append() -> Response[Any]:
    producer = parse_producer(
        header(router, "Producer-Id"), header(router, "Producer-Epoch"), header(router, "Producer-Seq")
    )
    body = body_bytes(router)
    done = service().open_streams.append(
        stream_path(router),
        header(router, "Content-Type"),
        body,
        closed=closed_flag(router),
        producer=producer,
        stream_seq=header(router, "Stream-Seq"),
    )
    status = _APPEND_STATUS[done.outcome]
    if done.outcome == "appended" and producer is not None and body:
        status = 200  # new data from an idempotent producer (204: a duplicate, or a close-only request)
    headers = dict(done.headers)
    if status < 400 or done.outcome == "closed_conflict":
        headers["Stream-Next-Offset"] = f"{done.tail:016d}"
    if done.closed:
        headers["Stream-Closed"] = "true"
    return respond(status, headers)


@router.delete(RULE)
@protocol_errors
def delete() -> Response[Any]:
    service().open_streams.delete(stream_path(router))
    return respond(204)


@router.route(RULE, method="OPTIONS")
def preflight() -> Response[Any]:
    """CORS preflight: any origin, the protocol's methods and headers (no token: browsers send none)."""
    return respond(
        204,
        {
            "Access-Control-Allow-Methods": "GET, HEAD, PUT, POST, DELETE, OPTIONS",
            "Access-Control-Allow-Headers": "*, Authorization, If-None-Match, Content-Type, Stream-Seq, "
            "Stream-TTL, Stream-Expires-At, Stream-Closed, Stream-Forked-From, Stream-Fork-Offset, "
            "Stream-Fork-Sub-Offset, Producer-Id, Producer-Epoch, Producer-Seq",
            "Access-Control-Max-Age": "86400",
            "Access-Control-Expose-Headers": EXPOSED,
        },
    )
