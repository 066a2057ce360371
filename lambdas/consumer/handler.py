"""The consumer: API Gateway → pull, ack and lease extension."""

from lambdas.common.http import build_app, make_handler
from lambdas.consumer import cloudflare, pull, records
from sluice.constants import FN_CONSUMER

app = build_app(pull.router, cloudflare.router, records.router)
lambda_handler = make_handler(app, FN_CONSUMER)
