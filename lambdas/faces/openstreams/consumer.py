"""The open Durable Streams protocol, reads: `HEAD`, catch-up `GET`, `live=long-poll` and `live=sse` on
`/v1/stream/{path+}`.

Behind API Gateway a Lambda answers with one buffered response (no streaming from Python, 30 s
integration timeout, 6 MB), so the live modes are bounded, identically here and deployed:

- long-poll waits up to LONG_POLL_MS for data past the offset, then answers 204 (up to date);
- SSE is one bounded response: the catch-up events (each `data` followed by its `control`), then the
  data that arrives while the response is held, then the response ends. The last `control` event
  carries `streamNextOffset` (and `streamCursor`) to reconnect from, as PROTOCOL.md 5.8 lets clients
  do; after `streamClosed: true` they do not reconnect. A first connection waits at most
  SSE_FIRST_WAIT_MS for its first data (a reader learns the stream's state quickly); a reconnection (it
  echoes `cursor`) waits up to LONG_POLL_MS, so a tailing client costs one request per wait, not a
  busy loop.
- A reconnection's response (it echoes `cursor`: a reader tailing the stream) that does not end the
  stream stays open at least SSE_MIN_HOLD_MS, gathering what is appended meanwhile. The protocol asks
  servers to keep SSE connections open (about 60 s), and real clients take a connection that ends within
  a second for a buffering proxy: after three in a row, `@durable-streams/client` falls back to
  long-poll (and, in 0.2.7, stalls). A first connection still answers as soon as it has data (the
  conformance suite reads those within 2 s), so at most one short connection comes before the held
  ones. The price: data appended while a response is held reaches the reader when the response ends,
  up to SSE_MIN_HOLD_MS later than an immediate answer would have (docs/api.md).
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from lambdas.common.runtime import service
from lambdas.faces.openstreams.common import (
    CATCH_UP_CACHE,
    NO_STORE,
    RULE,
    header,
    protocol_errors,
    query,
    respond,
    stream_path,
)
from lambdas.faces.openstreams.headers import NOW, etag, next_cursor, parse_offset
from sluice import errors
from sluice.engine.openstreams import ReadResult, StreamInfo, encode_offset, is_json, is_text

router = APIGatewayHttpRouter()
LONG_POLL_MS = 10_000  # well inside the 30 s integration timeout
SSE_FIRST_WAIT_MS = 1_000
# @durable-streams/client counts a connection shorter than 1 s as cut short by a proxy; the server's
# hold is what the client sees plus its own round trip. The conformance suite gives up on an SSE response
# after 2 s (its responses with a cursor included), so the hold stays well below that.
SSE_MIN_HOLD_MS = 1_100
# An SSE response grows past the data it carries (a `data:` prefix per line, base64 for binary) and
# goes to API Gateway base64-encoded (bytes): read 128 KiB at a time, stop past 2.5 MiB of events.
# Worst case (text of only newlines: 6 bytes per byte) 2.5 MiB + 768 KiB, 4.4 MB encoded: under 6 MB.
SSE_READ_BYTES = 128 * 1024
SSE_RESPONSE_BYTES = 5 * 512 * 1024


def _info_headers(info: StreamInfo) -> dict[str, str]:
    headers = {"Stream-Next-Offset": info.tail_offset}
    if info.meta.ttl_seconds is not None:
        headers["Stream-TTL"] = str(info.meta.ttl_seconds)
    if info.meta.expires_at is not None:
        headers["Stream-Expires-At"] = info.meta.expires_at
    if info.closed:
        headers["Stream-Closed"] = "true"
    return headers


@router.route(RULE, method="HEAD")
@protocol_errors
def head() -> Response[Any]:
    info = service().open_streams.info(stream_path(router))
    headers = {**_info_headers(info), "Cache-Control": NO_STORE}
    return respond(200, headers, content_type=info.meta.content_type)


def _read_headers(result: ReadResult) -> dict[str, str]:
    headers = {"Stream-Next-Offset": encode_offset(result.next), "ETag": etag(result)}
    if result.up_to_date:
        headers["Stream-Up-To-Date"] = "true"
    if result.at_end:
        headers["Stream-Closed"] = "true"
    return headers


@router.get(RULE)
@protocol_errors
def read() -> Response[Any]:
    params = query(router)
    live = params.get("live")
    if live not in (None, "long-poll", "sse"):
        raise errors.InvalidRequest("live must be long-poll or sse")
    if live and "offset" not in params:
        raise errors.InvalidRequest(f"live={live} needs an offset")
    if "offset" in params and params["offset"] == "":
        raise errors.InvalidOffset("offset is empty")
    offset = parse_offset(params.get("offset"))
    path = stream_path(router)
    streams = service().open_streams
    info = streams.info(path)
    streams.touch(info)
    seq = info.tail if offset == NOW else int(offset)
    if live == "sse":
        return _sse(path, info, seq, params.get("cursor"))
    if live == "long-poll":
        return _long_poll(path, info, seq, params.get("cursor"))
    result = streams.read_from(info, seq)
    headers = _read_headers(result)
    headers["Cache-Control"] = NO_STORE if offset == NOW else CATCH_UP_CACHE
    if offset == NOW:
        headers.pop("ETag")
    elif _matches(header(router, "If-None-Match"), etag(result)):
        return respond(304, headers)
    return respond(200, headers, result.body(), info.meta.content_type)


def _matches(if_none_match: str | None, etag: str) -> bool:
    if not if_none_match:
        return False
    return any(tag.strip().removeprefix("W/") in (etag, "*") for tag in if_none_match.split(","))


def _long_poll(path: str, info: StreamInfo, seq: int, cursor: str | None) -> Response[Any]:
    streams = service().open_streams
    if seq > info.tail:
        raise errors.InvalidOffset("the offset is past the stream's tail")
    if seq >= info.tail and not info.closed:
        info = streams.wait(path, seq, LONG_POLL_MS)
    result = streams.read_from(info, seq)
    headers = _read_headers(result)
    if not result.at_end:
        headers["Stream-Cursor"] = next_cursor(streams.backend.clock(), cursor)
    if not result.bodies:
        headers.pop("ETag")  # a timeout: up to date (the tail did not move past the offset)
        return respond(204, {**headers, "Cache-Control": NO_STORE})
    headers["Cache-Control"] = CATCH_UP_CACHE
    return respond(200, headers, result.body(), info.meta.content_type)


def _sse(path: str, info: StreamInfo, seq: int, cursor: str | None) -> Response[Any]:
    streams = service().open_streams
    hold_until = time.monotonic() + (SSE_MIN_HOLD_MS / 1000 if cursor else 0.0)
    if seq > info.tail:
        raise errors.InvalidOffset("the offset is past the stream's tail")
    if seq >= info.tail and not info.closed:
        info = streams.wait(path, seq, LONG_POLL_MS if cursor else SSE_FIRST_WAIT_MS)
    text = is_text(info.meta.content_type)
    events: list[bytes] = []
    size = 0
    while True:
        result = streams.read_from(info, seq, max_bytes=SSE_READ_BYTES)
        if result.bodies:
            events.append(_data_event(result, text).encode())
        control: dict[str, Any] = {"streamNextOffset": encode_offset(result.next)}
        if result.at_end:
            control["streamClosed"] = True
        else:
            control["streamCursor"] = next_cursor(streams.backend.clock(), cursor)
        if result.up_to_date:
            control["upToDate"] = True
        events.append(f"event: control\ndata:{json.dumps(control, separators=(',', ':'))}\n\n".encode())
        size += len(events[-1]) + (len(events[-2]) if result.bodies else 0)
        seq = result.next
        if result.at_end or size >= SSE_RESPONSE_BYTES:
            break
        if result.bodies and not result.up_to_date:
            continue  # more is stored already
        left_ms = int((hold_until - time.monotonic()) * 1000)
        if left_ms <= 0:
            break
        info = streams.wait(path, seq, left_ms)  # hold the response: gather what arrives meanwhile
        if info.tail <= seq and not info.closed:
            break  # nothing more within the hold; the last control event stands
    headers = {"Cache-Control": "no-cache", "Content-Type": "text/event-stream"}
    if not text:
        headers["Stream-SSE-Data-Encoding"] = "base64"
    return respond(200, headers, b"".join(events), "text/event-stream")


def _data_event(result: ReadResult, text: bool) -> str:
    """One `data` event: every line prefixed (so CR/LF in the data never ends the event)."""
    if text:
        payload = result.body().decode("utf-8", errors="replace")
        if is_json(result.info.meta.content_type):
            payload = "[" + ",".join(b.decode() for b in result.bodies) + "]"
        lines = payload.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    else:
        encoded = base64.b64encode(result.body()).decode()
        lines = [encoded[i : i + 76] for i in range(0, len(encoded), 76)] or [""]
    return "event: data\n" + "".join(_data_line(line) for line in lines) + "\n"


def _data_line(line: str) -> str:
    """`data:` + the line; a line starting with a space gets one more, which readers strip (SSE rule)."""
    return f"data: {line}\n" if line.startswith(" ") else f"data:{line}\n"
