"""The broker: API Gateway → send/publish, queue administration and tokens."""

from lambdas.broker import (
    cloudflare,
    cloudflare_consumers,
    cloudflare_fallback,
    cloudflare_queues,
    consumers,
    openstreams,
    operations,
    queues,
    send,
    streams,
)
from lambdas.common import restore  # noqa: F401  (registers the SnapStart hooks)
from lambdas.common.http import build_app, make_handler
from sluice.constants import FN_BROKER

app = build_app(
    queues.router,
    send.router,
    operations.router,
    cloudflare.router,
    cloudflare_queues.router,
    cloudflare_consumers.router,
    streams.router,
    consumers.router,
    openstreams.router,
    cloudflare_fallback.router,  # last: only what no other route matched
)
lambda_handler = make_handler(app, FN_BROKER)
