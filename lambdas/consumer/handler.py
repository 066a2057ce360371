"""The consumer: API Gateway → pull, ack and lease extension, stream reads (every face); coordinator
events → push delivery."""

from typing import Any

from lambdas.common import restore  # noqa: F401  (registers the SnapStart hooks)
from lambdas.common.face import routers_of
from lambdas.common.http import build_app, make_handler
from lambdas.consumer import push
from lambdas.faces.catalog import FACES
from sluice.constants import FN_CONSUMER

app = build_app(*routers_of(FACES, FN_CONSUMER))
http_handler = make_handler(app, FN_CONSUMER, FACES)


def lambda_handler(event: dict[str, Any], context: Any) -> Any:
    """Dispatch on the event's shape: a push-worker event from the coordinator, else HTTP."""
    if isinstance(event, dict) and "push" in event:
        return push.handle(event, context)
    return http_handler(event, context)
