"""Resolver factory, envelope responses and the auth gate shared by the HTTP handlers."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from aws_lambda_powertools.utilities.typing import LambdaContext

from lambdas.common import errors as error_registry
from lambdas.common.face import Face, envelope_rejection
from lambdas.common.observability import http_function
from lambdas.common.runtime import service
from sluice import errors
from sluice.constants import LAMBDA_SYNC_PAYLOAD_BYTES, ROUTES, Route
from sluice.engine.auth import Principal

LambdaHandler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]
StaticHandler = Callable[[dict[str, Any]], dict[str, Any]]  # no token, no resolver: files, not API


def build_app(*routers: APIGatewayHttpRouter) -> APIGatewayHttpResolver:
    """One resolver per function: validation and OpenAPI from the route signatures, one error registry.
    An answer off its response model is our bug: a 500 (logged), never the caller's 400."""
    app = APIGatewayHttpResolver(enable_validation=True, response_validation_error_http_code=500)
    error_registry.register(app)
    for router in routers:
        app.include_router(router)
    return app


# What the items of one response (pulled messages, stream records) may take in their encoded form: the
# Lambda limit less room for the envelope, the headers and the one item a call always returns.
RESPONSE_BUDGET_BYTES = LAMBDA_SYNC_PAYLOAD_BYTES - 1_000_000


def encoded_size(value: Any) -> int:
    """Bytes `value` adds to the Lambda response as an item of a JSON list: Powertools serializes the
    body (compact, ASCII-only JSON) and the runtime serializes the response object again, escaping
    the body string a second time ('"' and '\\' doubled). One more byte for the separating comma."""
    return encoded_text_size(json.dumps(value, separators=(",", ":")))


def encoded_text_size(text: str) -> int:
    """`encoded_size` of text already serialized (the Durable Streams face writes its body itself)."""
    return len(json.dumps(text)) - 2 + 1


def ok(result: Any = None, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=error_registry.envelope(result),
        headers=headers or {},
    )


def principal_of(router: APIGatewayHttpRouter) -> Principal:
    return router.context["principal"]


def authorize(route: Route, face: Face, event: dict[str, Any]) -> Principal:
    """Check the token against the route's scopes before anything else runs, so a caller without
    access never learns whether a queue exists, and bad input from strangers costs nothing."""
    tokens = service().tokens
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    principal = tokens.authenticate(face.credential(headers))
    queue = (event.get("pathParameters") or {}).get(route.queue_param) if route.queue_param else None
    if queue:
        queue = face.queue_of(queue)
    for scope in route.scopes:
        tokens.authorize(principal, scope, queue)  # type: ignore[arg-type]
    return principal


def _treat_body_as_json(event: dict[str, Any]) -> None:
    """Bodies are JSON whatever Content-Type says (curl -d sends a form type), as Cloudflare's API does."""
    headers = event.setdefault("headers", {})
    if event.get("body") and "json" not in headers.get("content-type", ""):
        headers["content-type"] = "application/json"


MAX_JSON_DEPTH = 128  # far beyond any real message; Python's parser recurses, so bound it first


def _check_body(event: dict[str, Any]) -> None:
    """Refuse, before any parser sees them, bodies that would crash it: bytes that are not UTF-8 (API
    Gateway passes them base64-encoded) and JSON nested deeper than MAX_JSON_DEPTH."""
    body = event.get("body") or ""
    if event.get("isBase64Encoded") and body:
        try:
            body = base64.b64decode(body).decode("utf-8")
        except (ValueError, UnicodeDecodeError) as exc:
            raise errors.MalformedJson("the request body is not UTF-8 JSON") from exc
    if _too_deep(body):
        raise errors.InvalidRequest(f"the body nests deeper than {MAX_JSON_DEPTH} levels")


def _too_deep(body: str) -> bool:
    """True when `body` nests arrays/objects deeper than MAX_JSON_DEPTH (a stack-exhaustion attempt).
    Bodies with few brackets are never scanned."""
    if body.count("[") + body.count("{") <= MAX_JSON_DEPTH:
        return False
    depth, in_string, escaped = 0, False, False
    for char in body:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return True
        elif char in "]}":
            depth -= 1
    return False


def make_handler(
    app: APIGatewayHttpResolver,
    function: str,
    faces: tuple[Face, ...],
    static: Mapping[str, StaticHandler] | None = None,
) -> LambdaHandler:
    """The Lambda entry point of `function`: auth gate from the route table, then the resolver. Routes
    whose `face` is a key of `static` (the console's files) go to that handler instead, untouched."""
    static = static or {}
    by_name = {face.name: face for face in faces}
    routes = {
        route.route_key: (route, by_name[route.face])
        for route in ROUTES
        if route.function == function and route.face not in static
    }
    static_routes = {
        r.route_key: static[r.face] for r in ROUTES if r.function == function and r.face in static
    }

    @http_function
    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        serve = static_routes.get(event.get("routeKey", ""))
        if serve is not None:
            return serve(event)
        route, face = routes.get(event.get("routeKey", ""), (None, None))
        reject = face.reject if face is not None else envelope_rejection
        raw_body = face is not None and face.raw_body
        if not raw_body:
            _treat_body_as_json(event)
        if route is not None and face is not None and route.scopes and not face.tokenless(route, event):
            try:
                app.append_context(principal=authorize(route, face, event))
            except errors.SluiceError as exc:
                return reject(exc)
        try:
            if not raw_body:
                _check_body(event)
        except errors.SluiceError as exc:
            return reject(exc)
        return app.resolve(event, context)

    return handler
