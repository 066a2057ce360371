"""The SQS face's routes (broker): `POST /` (every action, both protocols) and `POST /000000000000/<queue>`
(the query protocol posts to a queue's URL). Each request is SigV4-verified on its exact bytes, decoded,
run, and answered in its own protocol; nothing is written before the signature and the parameters
are checked."""

from __future__ import annotations

import base64
import uuid
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from lambdas.common.observability import logger
from lambdas.common.runtime import service
from lambdas.faces.sqs import protocol, sigv4
from lambdas.faces.sqs.actions import ACTIONS, Call
from lambdas.faces.sqs.errors import SqsError, from_domain
from sluice import errors
from sluice.constants import SQS_ACCOUNT_ID

router = APIGatewayHttpRouter()


def _answer(status: int, headers: dict[str, str], body: str) -> Response[Any]:
    return Response(status_code=status, content_type=headers.pop("Content-Type"), body=body, headers=headers)


def handle(raw: dict[str, Any], path_queue: str | None, context: Any) -> tuple[int, dict[str, str], str]:
    """(status, headers, body) of one SQS request given as API Gateway's event."""
    request_id = str(uuid.uuid4())
    headers = {k.lower(): v for k, v in (raw.get("headers") or {}).items()}
    text = raw.get("body") or ""
    body = base64.b64decode(text) if raw.get("isBase64Encoded") else text.encode()
    query = protocol.protocol_of(headers)
    try:
        access_key_id, principal = sigv4.verify(
            service().access_keys,
            method=raw.get("requestContext", {}).get("http", {}).get("method", "POST"),
            raw_path=raw.get("rawPath") or "/",
            raw_query=raw.get("rawQueryString") or "",
            headers=headers,
            body=body,
        )
        request = protocol.decode(headers, body, path_queue)
        query = request.query
        signed_region = headers["authorization"].split("Credential=", 1)[1].split("/")[2]
        scheme = headers.get("x-forwarded-proto", "http")
        call = Call(
            principal, access_key_id, f"{scheme}://{headers['host']}", signed_region, context, path_queue
        )
        result = ACTIONS[request.action](call, request.params)
        content_type, answer = protocol.encode(request, result, request_id)
        return 200, {"Content-Type": content_type, "x-amzn-RequestId": request_id}, answer
    except SqsError as exc:
        return protocol.error_answer(exc, query, request_id)
    except errors.SluiceError as exc:
        return protocol.error_answer(from_domain(exc), query, request_id)
    except Exception as exc:  # a bug: logged, answered as SQS's InternalFailure
        logger.exception("unhandled SQS face error", exc_info=exc)
        failure = SqsError("InternalFailure", "internal error; it has been logged")
        return protocol.error_answer(failure, query, request_id)


# No return annotations: Powertools then passes each Response through as built (bodies are XML or SQS JSON).
@router.post("/")
def root():
    return _answer(*handle(router.current_event.raw_event, None, router.lambda_context))


@router.post(f"/{SQS_ACCOUNT_ID}/<queue_name>")
def queue_url(queue_name: str):
    return _answer(*handle(router.current_event.raw_event, queue_name, router.lambda_context))
