"""The Amazon SQS face (`POST /`, `POST /000000000000/{queue}`): AWS JSON 1.0 and the query protocol,
SigV4 with access keys issued to Sluice tokens, every SQS action (docs/api.md has the table), SQS's
errors. Served by the broker."""

from __future__ import annotations

import uuid
from typing import Any

from lambdas.common.face import Face
from lambdas.faces.sqs import protocol, routes
from lambdas.faces.sqs.errors import from_domain
from sluice import errors
from sluice.constants import FN_BROKER, SQS


def _reject(exc: errors.SluiceError) -> dict[str, Any]:
    status, headers, body = protocol.error_answer(from_domain(exc), False, str(uuid.uuid4()))
    return {"statusCode": status, "headers": headers, "body": body, "isBase64Encoded": False}


FACE = Face(SQS, routers={FN_BROKER: (routes.router,)}, raw_body=True, reject=_reject)
