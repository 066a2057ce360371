"""What the open Durable Streams protocol's handlers share (broker: PUT/POST/DELETE/OPTIONS; consumer:
GET/HEAD): the stream path, the request body as bytes, the protocol's response headers, and errors
rendered as plain text with the same security headers as every other answer (PROTOCOL.md 12.7).

Routes use a regex rule because Powertools' `<name>` does not match `/`: the stream path is API
Gateway's greedy `{path+}` parameter, decoded.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from lambdas.common.errors import error_headers, status_of
from sluice import errors
from sluice.constants import OPEN_STREAM_ROUTE_PREFIX

RULE = OPEN_STREAM_ROUTE_PREFIX + ".+"
EXPOSED = (
    "Stream-Next-Offset, Stream-Cursor, Stream-Up-To-Date, Stream-Closed, Stream-TTL, Stream-Expires-At, "
    "Stream-SSE-Data-Encoding, ETag, Location, Producer-Epoch, Producer-Seq, Producer-Expected-Seq, "
    "Producer-Received-Seq, Content-Type"
)
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Cross-Origin-Resource-Policy": "cross-origin",
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Expose-Headers": EXPOSED,
}
CATCH_UP_CACHE = "private, max-age=60, stale-while-revalidate=300"
NO_STORE = "no-store"


def stream_path(router: APIGatewayHttpRouter) -> str:
    params = router.current_event.path_parameters or {}
    path = params.get("path")
    if path is None:  # invoked without API Gateway's parameters: the raw path after the prefix
        path = router.current_event.path.split(OPEN_STREAM_ROUTE_PREFIX, 1)[1]
    return path


def header(router: APIGatewayHttpRouter, name: str) -> str | None:
    return router.current_event.headers.get(name.lower())


def query(router: APIGatewayHttpRouter) -> dict[str, str]:
    return router.current_event.query_string_parameters or {}


def body_bytes(router: APIGatewayHttpRouter) -> bytes:
    event = router.current_event
    raw = event.body or ""
    return base64.b64decode(raw) if event.is_base64_encoded else raw.encode()


def closed_flag(router: APIGatewayHttpRouter) -> bool:
    """`Stream-Closed` counts only as exactly `true` (any case); other values are ignored."""
    return (header(router, "Stream-Closed") or "").strip().lower() == "true"


def respond(
    status: int,
    headers: dict[str, str] | None = None,
    body: bytes | str = b"",
    content_type: str | None = None,
) -> Response[Any]:
    merged = {**SECURITY_HEADERS, **(headers or {})}
    return Response(status_code=status, content_type=content_type, body=body, headers=merged)


def error(exc: errors.SluiceError) -> Response[Any]:
    return respond(status_of(exc), error_headers(exc), f"{exc.message}\n", "text/plain; charset=utf-8")


def protocol_errors(fn: Callable[[], Response[Any]]) -> Callable[[], Response[Any]]:
    """Render domain errors in this face's shape (plain text, security headers).

    The wrapper has no return annotation on purpose: Powertools' validation then passes the Response
    through as built instead of serialising its body as a model (bodies here are raw bytes)."""

    def wrapper():
        try:
            return fn()
        except errors.SluiceError as exc:
            return error(exc)

    wrapper.__name__, wrapper.__doc__ = fn.__name__, fn.__doc__
    return wrapper
