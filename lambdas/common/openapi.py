"""The API's OpenAPI document, generated from the resolvers' route signatures (Powertools) and merged
over the functions, with the bearer scheme and the error envelope every route can answer with.

`python -m lambdas.common.openapi > docs/openapi.json` regenerates the committed copy; a test checks
that it is up to date."""

from __future__ import annotations

import json
from typing import Any

from lambdas.common.errors import STATUS
from lambdas.faces.openstreams.common import RULE as OPEN_STREAM_RULE
from lambdas.faces.sqs.actions import ACTIONS as SQS_ACTIONS
from lambdas.faces.sqs.protocol import JSON_CONTENT_TYPE as SQS_JSON
from lambdas.faces.streams.common import STREAM_RULE
from sluice.constants import ROUTES, SQS_ACCOUNT_ID

TITLE = "Sluice"
VERSION = "1.0"

_ERROR_ENVELOPE = {
    "type": "object",
    "required": ["success", "errors", "messages", "result"],
    "properties": {
        "success": {"type": "boolean", "enum": [False]},
        "errors": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {"code": {"type": "integer"}, "message": {"type": "string"}},
            },
        },
        "messages": {"type": "array"},
        "result": {},
    },
}
# What API Gateway itself answers (unknown route, payload too large) has no envelope.
_GATEWAY_ERROR = {"type": "object", "properties": {"message": {"type": "string"}}}


def _apps() -> list[Any]:
    from lambdas.broker.handler import app as broker
    from lambdas.consumer.handler import app as consumer

    return [broker, consumer]


STREAMS_OPENAPI_PATH = "/streams/{name}"
_STREAMS_ERROR = {
    "type": "object",
    "properties": {"error": {"type": "string"}},
    "required": ["error"],
    "additionalProperties": True,
}
_STREAM_NAME_PARAMETER = {
    "in": "path",
    "name": "name",
    "required": True,
    "description": "the stream's name: 1-256 characters, `/` allowed (the rest of the path)",
    "schema": {"type": "string", "minLength": 1, "maxLength": 256},
}


OPEN_STREAMS_OPENAPI_PATH = "/v1/stream/{path}"
_OPEN_STREAM_PATH_PARAMETER = {
    "in": "path",
    "name": "path",
    "required": True,
    "description": "the stream's path: 1-1024 characters, `/` allowed (the rest of the path)",
    "schema": {"type": "string", "minLength": 1, "maxLength": 1024},
}
# The open protocol's bodies are the stream's bytes (any content type) and its errors plain text;
# its status codes and headers are PROTOCOL.md's (docs/api.md lists what this server answers).
_OPEN_STREAM_SUCCESS = {"description": "see PROTOCOL.md", "content": {"*/*": {"schema": {}}}}
_OPEN_STREAM_ERROR = {"description": "error", "content": {"text/plain": {"schema": {"type": "string"}}}}


def _open_stream_operation(operation: dict[str, Any]) -> None:
    operation["parameters"] = [_OPEN_STREAM_PATH_PARAMETER, *operation.get("parameters", [])]
    operation["responses"] = {
        **{str(s): _OPEN_STREAM_SUCCESS for s in (200, 201)},
        **{str(s): {"description": "no body"} for s in (204, 304)},
    }
    operation["description"] = "The open Durable Streams protocol (docs/api.md)."


SQS_PATHS = ("/", f"/{SQS_ACCOUNT_ID}/{{queue_name}}")
_SQS_ERROR = {
    "type": "object",
    "properties": {"__type": {"type": "string"}, "message": {"type": "string"}},
    "description": "AWS JSON 1.0 errors; the query protocol answers <ErrorResponse> XML. The header "
    "x-amzn-query-error carries the query code (`AWS.SimpleQueueService.NonExistentQueue;Sender`).",
}


def _sqs_operation(operation: dict[str, Any], statuses: list[int]) -> None:
    """The SQS face: one route for every action, the action named by a header (JSON 1.0) or the form."""
    actions = sorted(SQS_ACTIONS)
    operation["description"] = (
        "The Amazon SQS face: AWS JSON 1.0 (`X-Amz-Target: AmazonSQS.<Action>`) or the query protocol "
        "(form `Action=<Action>`, XML answers; query clients also post to the queue URL). Every SQS action "
        "(x-sqs-actions); docs/api.md has what each maps to. SigV4 with an access key issued to a token."
    )
    operation["x-sqs-actions"] = actions
    operation["security"] = [{"sigv4": []}]
    operation["parameters"] = [
        *operation.get("parameters", []),
        {
            "in": "header",
            "name": "X-Amz-Target",
            "required": False,
            "schema": {"type": "string", "enum": [f"AmazonSQS.{a}" for a in actions]},
        },
    ]
    operation["requestBody"] = {
        "required": True,
        "content": {
            SQS_JSON: {
                "schema": {"type": "object", "description": "the action's input (botocore's SQS model)"}
            },
            "application/x-www-form-urlencoded": {
                "schema": {
                    "type": "object",
                    "required": ["Action"],
                    "properties": {"Action": {"type": "string", "enum": actions}},
                    "additionalProperties": True,
                }
            },
        },
    }
    error = {
        "description": "SQS error",
        "content": {
            SQS_JSON: {"schema": {"$ref": "#/components/schemas/SqsError"}},
            "text/xml": {"schema": {}},
        },
    }
    operation["responses"] = {
        "200": {
            "description": "the action's output",
            "content": {SQS_JSON: {"schema": {}}, "text/xml": {"schema": {}}},
        },
        **{str(status): error for status in statuses},
    }


def build() -> dict[str, Any]:
    merged: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": TITLE, "version": VERSION},
        "paths": {},
        "components": {
            "schemas": {
                "ErrorEnvelope": _ERROR_ENVELOPE,
                "GatewayError": _GATEWAY_ERROR,
                "StreamsError": _STREAMS_ERROR,
                "SqsError": _SQS_ERROR,
            },
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "sigv4": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "Authorization",
                    "description": "AWS Signature Version 4 (service sqs, any region) with an access key "
                    "issued to a token (POST /v1/tokens/{token_id}/access-key)",
                },
            },
        },
        "security": [{"bearer": []}],
    }
    for app in _apps():
        doc = json.loads(app.get_openapi_json_schema(title=TITLE, version=VERSION))
        for path, operations in doc.get("paths", {}).items():
            # The Durable Streams rule is a regex in Powertools; OpenAPI has no greedy parameter, so it
            # is documented as `/streams/{name}` (API Gateway's `{name+}`: the name may contain `/`).
            if path == STREAM_RULE:
                path = STREAMS_OPENAPI_PATH
                for operation in operations.values():
                    operation["parameters"] = [_STREAM_NAME_PARAMETER, *operation.get("parameters", [])]
            if path == OPEN_STREAM_RULE:
                path = OPEN_STREAMS_OPENAPI_PATH
                for operation in operations.values():
                    _open_stream_operation(operation)
            merged["paths"].setdefault(path, {}).update(operations)
        for name, schema in doc.get("components", {}).get("schemas", {}).items():
            if name != "ResponseValidationError":  # Powertools' 500 body; ours is the envelope
                merged["components"]["schemas"].setdefault(name, schema)
    statuses = sorted({status for _cls, status in STATUS} | {500})
    scoped = {
        (r.method.lower(), r.path.replace("{name+}", "{name}").replace("{path+}", "{path}")): r
        for r in ROUTES
    }
    for path, operations in merged["paths"].items():
        for method, operation in operations.items():
            route = scoped.get((method, path))
            if route is not None:
                operation["x-sluice-scopes"] = list(route.scopes)
            responses = operation.setdefault("responses", {})
            responses.pop("422", None)  # validation failures are 400s with the envelope here
            responses.pop("500", None)  # an answer off its model is a 500 with the envelope, as any bug
            if path == OPEN_STREAMS_OPENAPI_PATH:
                for status in statuses:
                    responses.setdefault(str(status), _OPEN_STREAM_ERROR)
                continue
            if path in SQS_PATHS:
                _sqs_operation(operation, [400, 403, 500, 503])
                continue
            # The Durable Streams face answers errors as {"error": ...}, as that protocol does.
            error_schema = "StreamsError" if path == STREAMS_OPENAPI_PATH else "ErrorEnvelope"
            for status in statuses:
                responses.setdefault(
                    str(status),
                    {
                        "description": "error",
                        "content": {
                            "application/json": {"schema": {"$ref": f"#/components/schemas/{error_schema}"}}
                        },
                    },
                )
    return merged


def render() -> str:
    return json.dumps(build(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    print(render(), end="")
