"""The open Durable Streams protocol (`/v1/stream/{path}`, ElectricSQL's PROTOCOL.md): PUT, POST, DELETE
and OPTIONS (broker), GET and HEAD (consumer). Bodies are bytes of any content type; errors plain text
with the protocol's security headers. Paths under `Settings.open_stream_prefix` need no token."""

from __future__ import annotations

from typing import Any

from lambdas.common.errors import status_of
from lambdas.common.face import Face
from lambdas.faces.openstreams import broker, consumer
from lambdas.faces.openstreams.common import SECURITY_HEADERS
from sluice import errors
from sluice.constants import FN_BROKER, FN_CONSUMER, OPEN_STREAMS, Route
from sluice.settings import get_settings


def open_without_token(route: Route, event: dict[str, Any]) -> bool:
    """The opt-in of `Settings.open_stream_prefix`: open-protocol stream paths under that prefix (`*`: all)
    are served without a token. Off unless the stack (CDK context) or `sluice local` sets it."""
    prefix = get_settings().open_stream_prefix
    if not prefix:
        return False
    path = (event.get("pathParameters") or {}).get(route.queue_param or "", "")
    return prefix == "*" or path.startswith(prefix)


def _reject(exc: errors.SluiceError) -> dict[str, Any]:
    return {
        "statusCode": status_of(exc),
        "headers": {**SECURITY_HEADERS, "Content-Type": "text/plain; charset=utf-8"},
        "body": f"{exc.message}\n",
        "isBase64Encoded": False,
    }


FACE = Face(
    OPEN_STREAMS,
    routers={FN_BROKER: (broker.router,), FN_CONSUMER: (consumer.router,)},
    raw_body=True,
    tokenless=open_without_token,
    reject=_reject,
)
