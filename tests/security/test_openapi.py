"""The OpenAPI document is generated from the resolvers; schemathesis fuzzes the local runtime with it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from lambdas.common import openapi

DOC = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
ADMIN = "schemathesis-admin-token"
EXAMPLES = int(os.environ.get("SLUICE_FUZZ_EXAMPLES", "25"))


def test_committed_openapi_document_is_up_to_date():
    assert DOC.read_text() == openapi.render(), "run: python -m lambdas.common.openapi > docs/openapi.json"


def test_every_route_is_documented_with_its_scopes():
    from sluice.constants import CONSOLE, ROUTES

    # No body, or (Durable Streams) a raw body the handler parses itself to answer in that face's shape.
    bodiless = {
        "/v1/queues/{queue_name}/purge",
        "/v1/queues/{queue_name}/pause",
        "/v1/queues/{queue_name}/resume",
        "/v1/tokens/{token_id}/access-key",
        openapi.STREAMS_OPENAPI_PATH,
    }
    doc = openapi.build()
    for route in ROUTES:
        if route.method == "ANY" or route.face == CONSOLE:  # a 405 catch-all, the console's files
            continue
        path = route.path.replace("{name+}", "{name}").replace("{path+}", "{path}")
        operation = doc["paths"][path][route.method.lower()]
        assert operation["x-sluice-scopes"] == list(route.scopes)
        assert (
            "requestBody" in operation
            or route.method in ("GET", "DELETE", "HEAD", "OPTIONS")
            or path in bodiless | {openapi.OPEN_STREAMS_OPENAPI_PATH}
        )


@pytest.fixture(scope="module")
def runtime():
    from sluice.local.runtime import LocalRuntime, free_port

    local = LocalRuntime(
        port=free_port(), admin_token=ADMIN, stage="fuzz", concurrency={"broker": 1, "consumer": 1}
    )
    local.start()
    _warm_up(local.url)
    try:
        yield local
    finally:
        local.stop()


def _warm_up(url: str) -> None:
    """One call per function first, so no fuzzed request (the Cloudflare routes sort first) pays a cold
    start on a loaded machine within schemathesis' 10 s read timeout."""
    import contextlib
    import urllib.error
    import urllib.request

    for method, path in (("GET", "/v1/queues"), ("POST", "/v1/queues/warm-up/messages/pull")):
        request = urllib.request.Request(
            url + path, method=method, data=b"{}" if method == "POST" else None,
            headers={"Authorization": f"Bearer {ADMIN}"},
        )  # fmt: skip
        with contextlib.suppress(urllib.error.HTTPError):  # any answer means the function is warm
            urllib.request.urlopen(request, timeout=120).close()


schema = schemathesis.openapi.from_dict(json.loads(DOC.read_text()))


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_fuzzed_requests_get_no_500_and_match_the_schema(case, runtime):
    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi.checks import response_schema_conformance

    case.call_and_validate(
        base_url=runtime.url,
        headers={"Authorization": f"Bearer {ADMIN}"},
        checks=[not_a_server_error, response_schema_conformance],
    )


def test_every_success_body_has_a_schema():
    """Every route's 2xx JSON answer is documented by its response model (`lambdas.common.responses`),
    down to named fields; the open protocol's answers are the stream's own bytes (PROTOCOL.md), the SQS
    face's are each action's output in SQS's model (JSON 1.0 or XML)."""
    doc = openapi.build()
    schemas = doc["components"]["schemas"]

    def resolve(schema: dict) -> dict:
        ref = schema.get("$ref", "")
        return schemas[ref.rsplit("/", 1)[-1]] if ref else schema

    documented = 0
    for path, operations in doc["paths"].items():
        if path == openapi.OPEN_STREAMS_OPENAPI_PATH or path in openapi.SQS_PATHS:
            continue
        for method, operation in operations.items():
            successes = {s: r for s, r in operation["responses"].items() if s.startswith("2")}
            for status, response in successes.items():
                schema = resolve(response["content"]["application/json"]["schema"])
                assert schema.get("properties"), f"{method.upper()} {path} {status}: no fields documented"
                if "result" in schema["properties"]:  # the envelope: its result is a model, a list or null
                    result = schema["properties"]["result"]
                    assert result.get("$ref") or result.get("items") or result.get("type") == "null", (
                        f"{method.upper()} {path}: the result is not a model"
                    )
                documented += 1
            # Only the catch-all methods of the Durable Streams face never answer 2xx.
            assert successes or path == openapi.STREAMS_OPENAPI_PATH, f"{method.upper()} {path}"
    assert documented >= 50
