"""`GET /v1/webhooks/jwks`: the public keys that verify signed push deliveries (sluice/webhooks.py).

A bare JWKS document (RFC 7517), not the envelope: JWKS clients read it as it is. Public, like any JWKS:
it holds public keys only."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from lambdas.common.responses import body_of
from lambdas.common.runtime import service
from lambdas.faces.native.responses import WebhookKeys
from sluice.webhooks import JWKS_PATH

router = APIGatewayHttpRouter()
# Receivers cache the document; a rotation keeps the previous key in it for hours (sluice/webhooks.py).
CACHE_SECONDS = 300


@router.get(JWKS_PATH, responses=body_of(WebhookKeys))
def jwks() -> Response[Any]:
    return Response(
        status_code=200,
        content_type=content_types.APPLICATION_JSON,
        body=service().webhook_signer.jwks(),
        headers={"Cache-Control": f"public, max-age={CACHE_SECONDS}"},
    )
