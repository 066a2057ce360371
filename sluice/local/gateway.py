"""What API Gateway's HTTP API does in front of Lambda: match a route, build the v2 event, unpack the
response. The local runtime uses it so the handlers see exactly what they see when deployed."""

from __future__ import annotations

import base64
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote

from sluice.constants import ROUTES, Route

MAX_PAYLOAD_BYTES = 10 * 1024 * 1024  # API Gateway HTTP API's request limit


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
