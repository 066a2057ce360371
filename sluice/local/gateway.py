"""What API Gateway's HTTP API does in front of Lambda: match a route, build the v2 event, unpack the
response, and refuse what the deployed path would refuse. The local runtime uses it so the handlers
see exactly what they see when deployed.

Limits (docs/design.md, "Local runtime"): Lambda refuses a synchronous invocation whose event is over
6,291,456 bytes and a response over 6,291,556 bytes; an HTTP API waits 30 s for its integration,
takes at most 10,240 bytes of request line and headers, and throttles each route to the `$default`
stage's `DefaultRouteSettings` within the account's 10,000 requests a second (bursts of 5,000). The
gateway's own refusals carry API Gateway's `{"message": ...}` and the error envelope with a stable code
(docs/api.md).
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote

from lambdas.common.errors import envelope, status_of
from sluice import errors
from sluice.constants import ROUTES, Route
from sluice.local.template import ACCOUNT_THROTTLE, ThrottleLimits

API_GATEWAY_PAYLOAD_BYTES = 10 * 1024 * 1024  # HTTP API's payload quota
LAMBDA_REQUEST_LIMIT_BYTES = 6 * 1024 * 1024  # a synchronous Invoke's event
LAMBDA_RESPONSE_LIMIT_BYTES = 6 * 1024 * 1024 + 100  # what Lambda returns (its error names this figure)
REQUEST_LINE_AND_HEADERS_BYTES = 10_240  # HTTP API's quota on the request line and header values
JSON_TYPE = {"Content-Type": "application/json"}
# API Gateway's own answers, as an HTTP API sends them.
INTERNAL_SERVER_ERROR = (500, JSON_TYPE, b'{"message":"Internal Server Error"}')
SERVICE_UNAVAILABLE = (503, JSON_TYPE, b'{"message":"Service Unavailable"}')
NOT_FOUND = (404, JSON_TYPE, b'{"message":"Not Found"}')


def _template_regex(path: str) -> re.Pattern[str]:
    pattern = re.sub(r"\{(\w+)\+\}", r"(?P<\1>.+)", path)
    pattern = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", pattern)
    return re.compile(f"^{pattern}$")


@dataclass(frozen=True)
class CompiledRoute:
    route: Route
    regex: re.Pattern[str]


_COMPILED = [CompiledRoute(r, _template_regex(r.path)) for r in ROUTES]


def match(method: str, path: str) -> tuple[Route, dict[str, str]] | None:
    """The route for a request and its decoded path parameters; literal segments win over parameters."""
    candidates = []
    for compiled in _COMPILED:
        if compiled.route.method not in (method, "ANY"):
            continue
        found = compiled.regex.match(path)
        if found:
            literal = len(re.sub(r"\{[^}]+\}", "", compiled.route.path))
            exact = compiled.route.method == method
            candidates.append(((exact, literal), compiled.route, found.groupdict()))
    if not candidates:
        return None
    _, route, params = max(candidates, key=lambda c: c[0])
    return route, {k: unquote(v) for k, v in params.items()}


def build_event(
    route: Route,
    params: dict[str, str],
    method: str,
    raw_path: str,
    raw_query: str,
    headers: list[tuple[str, str]],
    body: bytes,
    source_ip: str = "127.0.0.1",
) -> dict[str, Any]:
    """An API Gateway HTTP API (payload 2.0) event, as the deployed API would send it."""
    merged: dict[str, str] = {}
    for name, value in headers:
        key = name.lower()
        merged[key] = f"{merged[key]},{value}" if key in merged else value
    query: dict[str, str] = {}
    for name, value in parse_qsl(raw_query, keep_blank_values=True):
        query[name] = f"{query[name]},{value}" if name in query else value
    try:
        text, encoded = body.decode("utf-8"), False
    except UnicodeDecodeError:
        text, encoded = base64.b64encode(body).decode(), True
    now = time.time()
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route.route_key,
        "rawPath": raw_path,
        "rawQueryString": raw_query,
        "headers": merged,
        "requestContext": {
            "accountId": "000000000000",
            "apiId": "local",
            "domainName": merged.get("host", "localhost"),
            "domainPrefix": "local",
            "http": {
                "method": method,
                "path": raw_path,
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": merged.get("user-agent", ""),
            },
            "requestId": uuid.uuid4().hex,
            "routeKey": route.route_key,
            "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "timeEpoch": int(now * 1000),
        },
        "isBase64Encoded": encoded,
    }
    if body:
        event["body"] = text
    if query:
        event["queryStringParameters"] = query
    if params:
        event["pathParameters"] = params
    return event


def unpack_response(response: dict[str, Any]) -> tuple[int, dict[str, str], list[str], bytes]:
    """(status, headers, cookies, body bytes) of a Lambda proxy response."""
    body = response.get("body") or ""
    data = base64.b64decode(body) if response.get("isBase64Encoded") else body.encode()
    headers = {k: str(v) for k, v in (response.get("headers") or {}).items()}
    for name, values in (response.get("multiValueHeaders") or {}).items():
        headers[name] = ",".join(str(v) for v in values)
    return int(response.get("statusCode", 200)), headers, list(response.get("cookies") or []), data


# API Gateway's message for each status the gateway itself answers with (the registry decides the status).
_MESSAGES = {
    400: "Bad Request",
    413: "Request Entity Too Large",
    414: "Request-URI Too Long",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
}


def refusal(exc: errors.SluiceError) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of a request the gateway refuses before any function runs: API Gateway's
    `message` and the error envelope with the stable code."""
    status = status_of(exc)
    body = {
        "message": _MESSAGES.get(status, "Bad Request"),
        **envelope(errors_=[{"code": exc.code, "message": exc.message}]),
    }
    return status, dict(JSON_TYPE), json.dumps(body).encode()


def event_too_large(event: dict[str, Any]) -> bool:
    """Whether Lambda would refuse this event for a synchronous invocation."""
    return len(json.dumps(event, separators=(",", ":")).encode()) > LAMBDA_REQUEST_LIMIT_BYTES


def response_too_large(response: Any) -> bool:
    """Whether Lambda would refuse to return this result (`Function.ResponseSizeTooLarge`)."""
    return len(json.dumps(response, separators=(",", ":")).encode()) > LAMBDA_RESPONSE_LIMIT_BYTES


class TokenBucket:
    """API Gateway's throttle: `burst` requests at once, then `rate` a second; it starts full. Locked:
    the local server answers each connection on a thread of its own."""

    def __init__(self, limits: ThrottleLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._tokens = float(limits.burst)
        self._refilled_at = clock()
        self._lock = threading.Lock()

    def take(self) -> bool:
        """Spend a token if one is left: whether the request may go on."""
        with self._lock:
            now = self._clock()
            elapsed = now - self._refilled_at
            self._tokens = min(float(self.limits.burst), self._tokens + elapsed * self.limits.rate)
            self._refilled_at = now
            if self._tokens < 1:
                return False
            self._tokens -= 1
            return True


class StageThrottle:
    """What a routed request draws on: the account's bucket, which every request shares, then its own
    route's. A stage's default route throttle applies to each route apart, as a REST API's default
    method throttle does to each method; None: the stage sets none. `apart`: routes with limits of
    their own (the stage's `RouteSettings`), in place of the default."""

    def __init__(
        self,
        per_route: ThrottleLimits | None,
        route_keys: Iterable[str],
        clock: Callable[[], float] = time.monotonic,
        apart: Mapping[str, ThrottleLimits] | None = None,
    ) -> None:
        self._account = TokenBucket(ACCOUNT_THROTTLE, clock)
        limits = {key: per_route for key in route_keys if per_route} | dict(apart or {})
        self._routes = {key: TokenBucket(route_limits, clock) for key, route_limits in limits.items()}

    def refusing(self, route_key: str) -> ThrottleLimits | None:
        """The limits a request to this route is over, or None: it goes on, and has spent its tokens."""
        if not self._account.take():
            return self._account.limits
        route = self._routes.get(route_key)
        if route is not None and not route.take():
            return route.limits
        return None


def throttled(limits: ThrottleLimits) -> tuple[int, dict[str, str], bytes]:
    """API Gateway's 429 for a request over a throttle, with the envelope and its code."""
    return refusal(
        errors.GatewayThrottled(
            f"too many requests: over the API's throttle of {limits.rate:g} requests a second "
            f"(bursts of {limits.burst}); retry after a pause"
        )
    )
