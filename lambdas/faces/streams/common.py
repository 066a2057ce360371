"""What the Durable Streams face's handlers share (broker: POST/DELETE; consumer: GET).

Errors on this face are `{"error": "..."}` (plus details such as the fenced versions): `as_plain` marks
an error for `plain_response`, which the one error registry then calls. Routes use a regex rule because
Powertools' `<name>` does not match `/`: the stream name is API Gateway's greedy `{name+}`
path parameter, decoded, so `P` and `P/child` are separate streams.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from lambdas.common.errors import error_headers, rendered_by, status_of
from sluice import errors

STREAM_RULE = "/streams/.+"
ALLOW = "GET, POST, DELETE"


def plain_body(exc: errors.SluiceError) -> dict[str, Any]:
    """This face's error body: `{"error": "...", **details}` (no envelope)."""
    details = {k: v for k, v in exc.details.items() if k != "retry_after_seconds"}
    return {"error": exc.message, **details}


def plain_response(exc: errors.SluiceError) -> Response[Any]:
    return Response(
        status_code=status_of(exc),
        content_type=content_types.APPLICATION_JSON,
        body=plain_body(exc),
        headers=error_headers(exc),
    )


def as_plain(exc: errors.SluiceError) -> errors.SluiceError:
    return rendered_by(exc, plain_response)


@contextmanager
def plain_errors() -> Iterator[None]:
    try:
        yield
    except errors.SluiceError as exc:
        raise as_plain(exc) from None


def stream_name(router: APIGatewayHttpRouter) -> str:
    params = router.current_event.path_parameters or {}
    name = params.get("name")
    if name is None:  # invoked without API Gateway's parameters: the raw path after /streams/
        name = router.current_event.path.split("/streams/", 1)[1]
    return name


def query(router: APIGatewayHttpRouter) -> dict[str, str]:
    return router.current_event.query_string_parameters or {}


def json_response(body: str | dict[str, Any], status: int = 200) -> Response[Any]:
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=body)


_NOT_ALLOWED: OpenAPIResponse = {
    "description": "Method not allowed",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/StreamsError"}}},
}


def register_method_not_allowed(
    router: APIGatewayHttpRouter, methods: list[str]
) -> Callable[[], Response[Any]]:
    # Never a 200: only the 405 (and the auth gate's errors) are documented.
    @router.route(STREAM_RULE, method=methods, responses={405: _NOT_ALLOWED})
    def method_not_allowed() -> Response[Any]:
        raise as_plain(errors.MethodNotAllowed("Method not allowed", allow=ALLOW))

    return method_not_allowed
