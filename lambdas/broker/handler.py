"""The broker: API Gateway → send/publish, queue administration and tokens, on every face."""

from lambdas.common import restore  # noqa: F401  (registers the SnapStart hooks)
from lambdas.common.face import routers_of
from lambdas.common.http import build_app, make_handler
from lambdas.faces.catalog import FACES
from sluice.constants import FN_BROKER

app = build_app(*routers_of(FACES, FN_BROKER))
lambda_handler = make_handler(app, FN_BROKER, FACES)
