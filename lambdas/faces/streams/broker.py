"""Durable Streams face, writes: `POST /streams/{name}?version=N`, `DELETE /streams/{name}`."""

from __future__ import annotations

import re
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from lambdas.common.responses import body_of
from lambdas.common.runtime import service
from lambdas.faces.streams.common import (
    STREAM_RULE,
    json_response,
    plain_errors,
    query,
    register_method_not_allowed,
    stream_name,
)
from lambdas.faces.streams.responses import StreamAppended, StreamDeleted
from sluice import errors
from sluice.engine.durable import MAX_BODY_BYTES, canonical, parse_json
from sluice.models import MAX_VERSION
from sluice.names import check_stream_name

router = APIGatewayHttpRouter()
_VERSION_RE = re.compile(r"\A[0-9]{1,19}\Z")  # MAX_VERSION (2^63 - 1) has 19 digits


@router.post(STREAM_RULE, responses=body_of(StreamAppended))
def publish() -> Response[Any]:
    with plain_errors():
        name = stream_name(router)
        check_stream_name(name)
        raw_version = query(router).get("version")
        if raw_version is not None and not (
            _VERSION_RE.match(raw_version) and int(raw_version) <= MAX_VERSION
        ):
            raise errors.InvalidRequest("Invalid version parameter")  # exact text: the conformance suite
        version = int(raw_version) if raw_version is not None else None
        body = router.current_event.decoded_body or ""
        if len(body.encode()) > MAX_BODY_BYTES:
            raise errors.RequestTooLarge("Request body exceeds 1 MiB")
        try:
            doc = parse_json(body)
        except ValueError:
            raise errors.MalformedJson("Invalid JSON body") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("records"), list):
            raise errors.InvalidRequest("Body must be a JSON object with a 'records' array")
        texts = [canonical(value) for value in doc["records"]]
        streams = service().streams
        if not texts:
            return json_response({"version": streams.bump(name, version)})
        return json_response({"offsets": streams.append(name, texts, version)})


@router.delete(STREAM_RULE, responses=body_of(StreamDeleted))
def delete() -> Response[Any]:
    with plain_errors():
        service().streams.delete(stream_name(router))
        return json_response({"success": True})


register_method_not_allowed(router, ["PUT", "PATCH", "HEAD", "OPTIONS"])
