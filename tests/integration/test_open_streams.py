"""The open Durable Streams protocol (PROTOCOL.md) through the real handlers: create, append with
Stream-Seq and idempotent producers, close, reads with their headers, bounded live modes, tokens, and
a stream read back from offset -1 out of S3 segments after its hot items expired."""

from __future__ import annotations

import base64
import json
import time
import uuid

import pytest

from sluice import constants as c
from sluice.settings import get_settings
from tests.conftest import ADMIN_TOKEN, FakeClock

BASE = c.OPEN_STREAM_ROUTE_PREFIX


def call(method, path, body=b"", *, query="", headers=None, token=ADMIN_TOKEN):
    """(status, headers, body bytes) from the handler API Gateway would invoke for this request."""
    from sluice.local import gateway
    from sluice.local.workers import invoke

    found = gateway.match(method, path)
    assert found is not None, (method, path)
    route, params = found
    all_headers = list((headers or {}).items())
    if token is not None:
        all_headers.append(("authorization", f"Bearer {token}"))
    data = body.encode() if isinstance(body, str) else body
    event = gateway.build_event(route, params, method, path, query, all_headers, data)
    status, out_headers, _, out = gateway.unpack_response(invoke(route.function, event))
    return status, {k.lower(): v for k, v in out_headers.items()}, out


@pytest.fixture
def path(engine) -> str:
    return f"{BASE}t/{uuid.uuid4().hex[:10]}"


TEXT = {"Content-Type": "text/plain"}
JSON = {"Content-Type": "application/json"}


def test_create_is_idempotent_and_conflicts_on_other_config(path):
    status, headers, _ = call("PUT", path, "hi", headers=TEXT)
    assert status == 201
    assert headers["stream-next-offset"] == "0000000000000001"
    assert headers["location"].endswith(path)
    assert headers["x-content-type-options"] == "nosniff"
    assert call("PUT", path, headers={"Content-Type": "TEXT/plain"})[0] == 200
    assert call("PUT", path, headers=JSON)[0] == 409
    assert call("PUT", path, headers={**TEXT, "Stream-TTL": "60"})[0] == 409
    assert call("PUT", path, headers={**TEXT, "Stream-Closed": "true"})[0] == 409  # closure differs
    assert call("PUT", path, headers={**TEXT, "Stream-TTL": "010"})[0] == 400
    both = {**TEXT, "Stream-TTL": "5", "Stream-Expires-At": "2099-01-01T00:00:00Z"}
    assert call("PUT", f"{path}x", headers=both)[0] == 400
    assert call("HEAD", f"{path}x")[0] == 404  # bad input changed nothing


def test_appends_reads_offsets_etag_and_stream_seq(path):
    call("PUT", path, headers=TEXT)
    status, headers, _ = call("POST", path, "ab", headers={**TEXT, "Stream-Seq": "09"})
    assert (status, headers["stream-next-offset"]) == (204, "0000000000000001")
    assert call("POST", path, "cd", headers={**TEXT, "Stream-Seq": "10"})[0] == 204
    assert call("POST", path, "xx", headers={**TEXT, "Stream-Seq": "10"})[0] == 409  # not increasing
    assert call("POST", path, "xx", headers=JSON)[0] == 409  # content type mismatch
    assert call("POST", path, headers=TEXT)[0] == 400  # empty body without Stream-Closed
    status, headers, body = call("GET", path, query="offset=-1")
    assert (status, body) == (200, b"abcd")
    assert headers["stream-up-to-date"] == "true" and "stream-closed" not in headers
    etag = headers["etag"]
    assert call("GET", path, query="offset=-1", headers={"If-None-Match": etag})[0] == 304
    status, headers, body = call("GET", path, query="offset=0000000000000001")
    assert body == b"cd" and headers["stream-next-offset"] == "0000000000000002"
    status, headers, body = call("GET", path, query="offset=now")
    assert (status, body, headers["cache-control"]) == (200, b"", "no-store")
    assert call("GET", path, query="offset=abc")[0] == 400
    assert call("GET", path, query="offset=0000000000000009")[0] == 400  # past the tail


def test_json_mode_flattens_one_level_and_returns_arrays(path):
    assert call("PUT", path, "[]", headers=JSON)[0] == 201
    call("POST", path, '[{"a":1},[2,3]]', headers=JSON)
    call("POST", path, '"x"', headers=JSON)
    assert call("POST", path, "[]", headers=JSON)[0] == 400
    assert call("POST", path, "{bad", headers=JSON)[0] == 400
    _, headers, body = call("GET", path, query="offset=-1")
    assert json.loads(body) == [{"a": 1}, [2, 3], "x"]
    assert headers["stream-next-offset"] == "0000000000000003"


def test_idempotent_producers(path):
    call("PUT", path, headers=TEXT)

    def send(epoch, seq, data="d"):
        h = {**TEXT, "Producer-Id": "p1", "Producer-Epoch": str(epoch), "Producer-Seq": str(seq)}
        return call("POST", path, data, headers=h)

    assert send(0, 0)[0] == 200
    status, headers, _ = send(0, 0)
    assert (status, headers["producer-seq"]) == (204, "0")  # duplicate: nothing stored
    status, headers, _ = send(0, 2)
    assert status == 409
    assert (headers["producer-expected-seq"], headers["producer-received-seq"]) == ("1", "2")
    assert send(1, 1)[0] == 400  # a new epoch starts at 0
    assert send(1, 0)[0] == 200
    status, headers, _ = send(0, 1)
    assert (status, headers["producer-epoch"]) == (403, "1")  # fenced zombie
    partial = {**TEXT, "Producer-Id": "p1", "Producer-Epoch": "0"}
    assert call("POST", path, "x", headers=partial)[0] == 400
    assert call("GET", path, query="offset=-1")[2] == b"dd"


def test_close_append_and_close_and_eof_signals(path):
    call("PUT", path, "a", headers=TEXT)
    producer = {"Producer-Id": "w", "Producer-Epoch": "0", "Producer-Seq": "0"}
    closing = {**TEXT, **producer, "Stream-Closed": "true"}
    status, headers, _ = call("POST", path, "z", headers=closing)
    assert (status, headers["stream-closed"]) == (200, "true")
    assert call("POST", path, "z", headers=closing)[0] == 204  # the same closing request again
    status, headers, _ = call("POST", path, "more", headers=TEXT)
    assert (status, headers["stream-closed"]) == (409, "true")
    assert headers["stream-next-offset"] == "0000000000000002"  # the final offset of the closed stream
    assert call("POST", path, headers={"Stream-Closed": "true"})[0] == 204  # close-only: idempotent
    status, headers, body = call("GET", path, query="offset=-1")
    assert body == b"az" and headers["stream-closed"] == "true"
    status, headers, _ = call("GET", path, query="offset=0000000000000002&live=long-poll")
    assert (status, headers["stream-closed"]) == (204, "true")  # EOF at once, no wait
    status, headers, body = call("GET", path, query="offset=0000000000000002&live=sse")
    assert status == 200 and headers["content-type"] == "text/event-stream"
    assert '"streamClosed":true' in body.decode() and "streamCursor" not in body.decode()
    status, headers, _ = call("HEAD", path)
    assert (status, headers["stream-closed"], headers["cache-control"]) == (200, "true", "no-store")


def test_sse_is_one_bounded_response_ending_with_where_to_resume(path):
    binary = {"Content-Type": "application/octet-stream"}
    call("PUT", path, bytes(range(256)), headers=binary)
    status, headers, body = call("GET", path, query="offset=-1&live=sse")
    assert headers["stream-sse-data-encoding"] == "base64"
    events = [block for block in body.decode().split("\n\n") if block]
    assert events[0].startswith("event: data\n") and events[-1].startswith("event: control\n")
    control = json.loads(events[-1].split("data:", 1)[1])
    assert control["streamNextOffset"] == "0000000000000001" and control["upToDate"] is True
    data = "".join(line[5:] for line in events[0].split("\n")[1:])
    assert base64.b64decode(data) == bytes(range(256))
    started = time.monotonic()
    status, _, body = call("GET", path, query="offset=0000000000000001&live=sse")
    assert status == 200 and '"upToDate":true' in body.decode()
    assert time.monotonic() - started < 5  # a first connection at the tail waits about a second


def test_tokens_and_the_open_prefix_opt_in(path, monkeypatch):
    assert call("PUT", path, headers=TEXT, token=None)[0] == 401
    status, headers, _ = call("GET", path, token=None)
    assert status == 401 and headers["x-content-type-options"] == "nosniff"
    monkeypatch.setattr(get_settings(), "open_stream_prefix", "t/")
    assert call("PUT", path, headers=TEXT, token=None)[0] == 201
    assert call("GET", f"{BASE}other", token=None)[0] == 401  # outside the prefix: token needed


def test_delete_then_404(path):
    call("PUT", path, "x", headers=TEXT)
    assert call("DELETE", path)[0] == 204
    assert call("GET", path)[0] == 404
    assert call("DELETE", path)[0] == 404


def test_expiry_and_sliding_ttl(settings, path):
    call("PUT", path, headers={**TEXT, "Stream-Expires-At": "2001-01-01T00:00:00Z"})
    assert call("HEAD", path)[0] == 404  # already past its expiry
    call("PUT", path, headers={**TEXT, "Stream-TTL": "1"})
    assert call("HEAD", path)[1]["stream-ttl"] == "1"
    time.sleep(1.2)
    assert call("GET", path)[0] == 404


def test_read_back_from_minus_one_out_of_s3_after_the_hot_tier_expired(settings, path):
    """Written through /v1/stream/..., flushed to segments, hot items expired and swept: offset -1
    still reads everything, byte for byte, from S3."""
    from sluice.engine import keys
    from sluice.engine.openstreams import queue_name_for
    from sluice.segments import list_segments
    from sluice.service import Sluice

    call("PUT", path, headers=JSON)
    sent = [{"n": i, "pad": "x" * 50} for i in range(120)]
    for start in range(0, 120, 40):
        assert call("POST", path, json.dumps(sent[start : start + 40]), headers=JSON)[0] == 204
    clock = FakeClock(int(time.time() * 1000))
    worker = Sluice.from_settings(settings, clock=clock)
    name = queue_name_for(path.removeprefix(BASE))
    worker.shard_worker.run("flush", name)
    queue = worker.queues.get(name)
    assert list_segments(worker.backend, queue, 0), "nothing reached S3"
    clock.advance(queue.settings.retention_seconds * 1000 + 1000)
    worker.shard_worker.run("sweep", name)
    table = worker.backend.table_for(queue.shards[0])
    hot = list(table.query(keys.shard_pk(queue, 0), sk_from=keys.MSG_SK_PREFIX, sk_to=keys.MSG_SK_END))
    assert hot == []  # the hot tier holds nothing: what follows comes from segments
    fresh = Sluice.from_settings(settings)  # cold caches, as a new Lambda container
    info = fresh.open_streams.info(path.removeprefix(BASE))
    assert json.loads(fresh.open_streams.read_from(info, 0).body()) == sent
    status, headers, body = call("GET", path, query="offset=-1")
    assert status == 200 and json.loads(body) == sent
    assert headers["stream-next-offset"] == "0000000000000120"
