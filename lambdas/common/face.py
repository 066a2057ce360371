"""What the shared HTTP gate (lambdas/common/http.py) knows of a protocol face. Each face declares one
`FACE` in its package (lambdas/faces/<face>/__init__.py): its routers per function, where its callers
put their token, how its paths name a queue, and how it answers an error raised before its routes run.
The gate asks the face of the matched route, so common code has no branch per face."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools.event_handler import content_types
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from lambdas.common.errors import envelope, status_of
from sluice import errors
from sluice.constants import Route

LambdaResponse = dict[str, Any]


def bearer(headers: Mapping[str, str]) -> str | None:
    """`Authorization: Bearer <token>` (headers lower-cased)."""
    return headers.get("authorization")


def envelope_rejection(exc: errors.SluiceError) -> LambdaResponse:
    """The error envelope (native and Cloudflare faces), as a Lambda proxy response."""
    return {
        "statusCode": status_of(exc),
        "headers": {"Content-Type": content_types.APPLICATION_JSON},
        "body": json.dumps(envelope(errors_=[{"code": exc.code, "message": exc.message}])),
        "isBase64Encoded": False,
    }


@dataclass(frozen=True)
class Face:
    name: str  # the `Route.face` of its routes in sluice.constants.ROUTES
    routers: Mapping[str, tuple[APIGatewayHttpRouter, ...]] = field(default_factory=dict)  # by function
    raw_body: bool = False  # bodies are bytes of any content type: no JSON checks before the routes
    credential: Callable[[Mapping[str, str]], str | None] = bearer
    queue_of: Callable[[str], str] = str  # the queue a path parameter names (token bindings are names)
    tokenless: Callable[[Route, dict[str, Any]], bool] = lambda _route, _event: False
    reject: Callable[[errors.SluiceError], LambdaResponse] = envelope_rejection


def routers_of(faces: tuple[Face, ...], function: str) -> list[APIGatewayHttpRouter]:
    """Every router `function` serves, face by face in the order given."""
    return [router for face in faces for router in face.routers.get(function, ())]
