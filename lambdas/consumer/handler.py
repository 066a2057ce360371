"""The consumer: API Gateway → pull, ack and lease extension; coordinator events → push delivery."""

from typing import Any

from lambdas.common import restore  # noqa: F401  (registers the SnapStart hooks)
from lambdas.common.http import build_app, make_handler
from lambdas.consumer import cloudflare, openstreams, pull, push, records, webhooks
from sluice.constants import FN_CONSUMER

app = build_app(pull.router, cloudflare.router, records.router, openstreams.router, webhooks.router)
http_handler = make_handler(app, FN_CONSUMER)


def lambda_handler(event: dict[str, Any], context: Any) -> Any:
    """Dispatch on the event's shape: a push-worker event from the coordinator, else HTTP."""
    if isinstance(event, dict) and "push" in event:
        return push.handle(event, context)
    return http_handler(event, context)
