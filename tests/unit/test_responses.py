"""Response models check every answer on its way out without reshaping it, and an answer off its model
is a 500 (our bug), not a 400."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from pydantic import TypeAdapter

from lambdas.common.http import build_app, ok
from lambdas.common.responses import Envelope
from lambdas.faces.native.responses import QueueView, Redriven
from sluice.local.workers import LocalContext
from sluice.models import QueueSettings


def test_an_answer_keeps_its_keys_exactly():
    queue = {
        "queue_name": "q",
        "queue_id": "0" * 32,
        "created_on": 1,
        "paused": False,
        "settings": QueueSettings().model_dump(),
        "shard_count": 1,
        "later": {"added": True},  # a key no model declares yet passes through
    }  # no `stream_name`: it stays absent, not null
    body = {"success": True, "errors": [], "messages": [], "result": queue}
    adapter = TypeAdapter(Envelope[QueueView])
    assert adapter.dump_python(adapter.validate_python(body), by_alias=True) == body
    moved = {"moved": 2, "remaining_in_source": 0, "from": "dlq", "to": "q"}  # an alias on the wire
    adapter = TypeAdapter(Envelope[Redriven])
    assert (
        adapter.dump_python(adapter.validate_python({**body, "result": moved}), by_alias=True)["result"]
        == moved
    )


def test_an_answer_off_its_model_is_a_500():
    router = APIGatewayHttpRouter()

    @router.get("/broken")
    def broken() -> Response[Envelope[Redriven]]:
        return ok({"moved": "many"})

    app = build_app(router)
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "GET /broken",
        "rawPath": "/broken",
        "rawQueryString": "",
        "headers": {},
        "requestContext": {
            "http": {"method": "GET", "path": "/broken"},
            "requestId": "r",
            "stage": "$default",
        },
        "isBase64Encoded": False,
    }
    answer = app.resolve(event, LocalContext("broker", 29))
    assert answer["statusCode"] == 500
    assert json.loads(answer["body"])["errors"][0]["code"] == 10500
