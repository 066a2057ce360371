"""Durable Streams face, reads: `GET /streams/{name}?offset=&limit=&timeout_sec=`."""

from __future__ import annotations

import re
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from lambdas.common.http import RESPONSE_BUDGET_BYTES, encoded_text_size
from lambdas.common.responses import body_of
from lambdas.common.runtime import service
from lambdas.faces.streams.common import STREAM_RULE, json_response, plain_errors, query, stream_name
from lambdas.faces.streams.responses import StreamRecords
from sluice import errors
from sluice.engine.durable import records_body
from sluice.engine.streams import MAX_LIMIT, MAX_TIMEOUT_MS, parse_position

router = APIGatewayHttpRouter()
_LIMIT_RE = re.compile(r"\A[0-9]{1,9}\Z")
_TIMEOUT_RE = re.compile(r"\A[0-9]{1,9}(\.[0-9]{1,9})?\Z")


@router.get(STREAM_RULE, responses=body_of(StreamRecords))
def read_stream() -> Response[Any]:
    with plain_errors():
        name = stream_name(router)
        params = query(router)
        raw_limit = params.get("limit", "10")
        if not _LIMIT_RE.match(raw_limit) or int(raw_limit) < 1:
            raise errors.InvalidRequest("Invalid limit parameter")
        raw_timeout = params.get("timeout_sec", "0")
        if not _TIMEOUT_RE.match(raw_timeout):
            raise errors.InvalidRequest("Invalid timeout_sec parameter")
        offset = params.get("offset")
        if offset is not None:
            try:
                parse_position(offset)
            except errors.InvalidOffset:
                raise errors.InvalidOffset("Invalid offset parameter") from None
        timeout_ms = int(min(float(raw_timeout), MAX_TIMEOUT_MS / 1000) * 1000)
        found = service().streams.read(
            name,
            offset,
            min(int(raw_limit), MAX_LIMIT),
            timeout_ms,
            size_of=lambda r: encoded_text_size(records_body([r])),
            max_bytes=RESPONSE_BUDGET_BYTES,
        )
        return json_response(records_body(found))
