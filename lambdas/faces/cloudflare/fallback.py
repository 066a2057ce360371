"""Every other path under `/client/v4/`: Cloudflare's error envelope instead of API Gateway's
`{"message": "Not Found"}`. A known path with another method is a 405 (10120) with `Allow`."""

from __future__ import annotations

import re

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from sluice import errors
from sluice.constants import CF_PREFIX, CLOUDFLARE, ROUTES

router = APIGatewayHttpRouter()
_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
_KNOWN = [
    (re.compile("^" + re.sub(r"\{\w+\}", "[^/]+", r.path) + "$"), r.method)
    for r in ROUTES
    if r.face == CLOUDFLARE and r.method != "ANY"
]


# A capture group makes this a "dynamic" route to Powertools, tried after every specific one.
@router.route(f"{CF_PREFIX}/(.+)", method=_METHODS, include_in_schema=False)
def not_found() -> Response[dict]:
    path = router.current_event.path
    allow = sorted({method for regex, method in _KNOWN if regex.match(path)})
    if allow:
        raise errors.MethodNotAllowed(
            f"{router.current_event.http_method} is not allowed on this path", allow=", ".join(allow)
        )
    raise errors.NotFound("no such route; see docs/api.md")
