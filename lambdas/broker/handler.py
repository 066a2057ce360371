"""The broker: API Gateway → send/publish, queue administration and tokens, on every face; the console's
files."""

from typing import Any

from lambdas.common import restore  # noqa: F401  (registers the SnapStart hooks)
from lambdas.common.face import routers_of
from lambdas.common.http import build_app, make_handler
from lambdas.faces.catalog import FACES
from sluice.constants import CONSOLE, FN_BROKER


def console(event: dict[str, Any]) -> dict[str, Any]:
    """The console's page and files, imported at its first request: a send never loads them."""
    from lambdas.broker.console import assets

    return assets.respond(event)


app = build_app(*routers_of(FACES, FN_BROKER))
lambda_handler = make_handler(app, FN_BROKER, FACES, static={CONSOLE: console})
