"""The Durable Streams face (`/streams/{name}`): POST and DELETE (broker), GET (consumer). Errors:
`{"error": ...}`. Its clients may send the token in an `auth` header instead of `Authorization`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools.event_handler import content_types

from lambdas.common.errors import status_of
from lambdas.common.face import Face
from lambdas.faces.streams import broker, consumer
from lambdas.faces.streams.common import plain_body
from sluice import errors
from sluice.constants import FN_BROKER, FN_CONSUMER, STREAMS


def _credential(headers: Mapping[str, str]) -> str | None:
    return headers.get("authorization") or headers.get("auth")


def _reject(exc: errors.SluiceError) -> dict[str, Any]:
    return {
        "statusCode": status_of(exc),
        "headers": {"Content-Type": content_types.APPLICATION_JSON},
        "body": json.dumps(plain_body(exc)),
        "isBase64Encoded": False,
    }


FACE = Face(
    STREAMS,
    routers={FN_BROKER: (broker.router,), FN_CONSUMER: (consumer.router,)},
    credential=_credential,
    reject=_reject,
)
