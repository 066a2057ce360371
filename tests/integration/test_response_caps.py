"""Pulls and stream reads fit Lambda's 6 MB synchronous response: fewer items, nothing leased that is not
returned. Through the real handlers, measuring the Lambda response payload as the runtime sends it."""

from __future__ import annotations

import base64
import json

import pytest

from sluice.constants import LAMBDA_SYNC_PAYLOAD_BYTES
from tests.conftest import ADMIN_TOKEN

CF = "/client/v4/accounts/acc/queues"
BODY_BYTES = 100_000
COUNT = 90


def _invoke(method: str, path: str, body: object = None, query: str = "") -> tuple[int, int, dict]:
    """(status, bytes of the Lambda response payload, decoded body) for one request."""
    from sluice.local import gateway
    from sluice.local.workers import invoke

    route, params = gateway.match(method, path)
    headers = [("content-type", "application/json"), ("authorization", f"Bearer {ADMIN_TOKEN}")]
    data = b"" if body is None else json.dumps(body).encode()
    response = invoke(route.function, gateway.build_event(route, params, method, path, query, headers, data))
    status, _headers, _cookies, out = gateway.unpack_response(response)
    return status, len(json.dumps(response).encode()), json.loads(out)


def _fill(api, queue: str, content_type: str) -> None:
    api("POST", "/v1/queues", {"queue_name": queue})
    for start in range(0, COUNT, 10):
        messages = []
        for n in range(start, start + 10):
            raw = f"{n:05d}".encode() + b"x" * (BODY_BYTES - 5)
            body = raw.decode() if content_type == "json" else base64.b64encode(raw).decode()
            messages.append({"body": body, "content_type": content_type})
        status, answer = api("POST", f"/v1/queues/{queue}/messages", {"messages": messages})
        assert status == 200, answer


def _number(message: dict, face: str, content_type: str) -> int:
    body = message["body"]
    if face == "cloudflare" or content_type == "bytes":
        body = base64.b64decode(body).decode()
    return int(body.lstrip('"')[:5])  # a JSON string body keeps its quotes in Cloudflare's base64


@pytest.mark.slow
@pytest.mark.parametrize("face", ["native", "cloudflare"])
@pytest.mark.parametrize("content_type", ["json", "bytes"])
def test_a_pull_of_90_messages_of_100_kb_fits_and_leaves_the_rest_available(
    api, queue_name, face, content_type
):
    _fill(api, queue_name, content_type)
    path = (
        f"/v1/queues/{queue_name}/messages/pull" if face == "native" else f"{CF}/{queue_name}/messages/pull"
    )
    seen: list[int] = []
    sizes: list[tuple[int, int]] = []
    while len(seen) < COUNT:
        status, size, answer = _invoke("POST", path, {"batch_size": 100, "visibility_timeout_ms": 600_000})
        assert status == 200, answer
        got = [_number(m, face, content_type) for m in answer["result"]["messages"]]
        assert got, f"nothing returned after {len(seen)}: the rest must stay available"
        assert size < LAMBDA_SYNC_PAYLOAD_BYTES, size
        seen += got
        sizes.append((len(got), size))
    # Every message exactly once, and none leased without being returned (a lease would hide it for
    # the 10-minute visibility timeout used above).
    assert sorted(seen) == list(range(COUNT))
    assert len(sizes) > 1  # 90 x 100 KB does not fit one response
    print(f"\n{face}/{content_type}: (messages, response bytes) per pull {sizes}")


def test_a_cloudflare_peek_of_90_messages_of_100_kb_fits(api, queue_name):
    """A peek leases nothing, so a cut one loses nothing: it must still fit Lambda's 6 MB."""
    _fill(api, queue_name, "json")
    status, size, answer = _invoke("POST", f"{CF}/{queue_name}/messages/peek", {"batch_size": 100})
    assert status == 200, answer
    peeked = [_number(m, "cloudflare", "json") for m in answer["result"]["messages"]]
    assert 0 < len(peeked) < COUNT and size < LAMBDA_SYNC_PAYLOAD_BYTES, (len(peeked), size)
    assert peeked == list(range(len(peeked)))  # the oldest first, none skipped


@pytest.mark.slow
def test_stream_reads_fit_and_next_offset_continues_where_the_cut_was(api, queue_name):
    _fill(api, queue_name, "bytes")
    offset, seen, sizes = "-", [], []
    while len(seen) < COUNT:
        status, size, answer = _invoke(
            "GET", f"/v1/queues/{queue_name}/records", query=f"offset={offset}&limit=1000"
        )
        assert status == 200 and size < LAMBDA_SYNC_PAYLOAD_BYTES, (status, size)
        records = answer["result"]["records"]
        assert records
        seen += [int(base64.b64decode(r["body"])[:5]) for r in records]
        offset = answer["result"]["next_offset"]
        sizes.append(size)
    assert seen == list(range(COUNT)) and len(sizes) > 1
    print(f"\nrecords/bytes: response bytes per read {sizes}")


@pytest.mark.slow
def test_durable_streams_reads_fit_too(api, queue_name):
    stream = f"caps/{queue_name}"
    for start in range(0, COUNT, 9):  # 9 records of 100 KB per POST: under the 1 MiB body limit
        records = [f"{n:05d}" + "x" * (BODY_BYTES - 5) for n in range(start, min(start + 9, COUNT))]
        status, _size, answer = _invoke("POST", f"/streams/{stream}", {"records": records})
        assert status == 200, answer
    offset, seen, sizes = "-", [], []
    while len(seen) < COUNT:
        status, size, answer = _invoke("GET", f"/streams/{stream}", query=f"offset={offset}&limit=1000")
        assert status == 200 and size < LAMBDA_SYNC_PAYLOAD_BYTES, (status, size)
        assert answer["records"]
        seen += [int(r["data"][:5]) for r in answer["records"]]
        offset = answer["records"][-1]["offset"]
        sizes.append(size)
    assert seen == list(range(COUNT)) and len(sizes) > 1
    print(f"\n/streams: response bytes per read {sizes}")


# --- the engine's budget, with a plain size rule (body length) --------------------------------------------


def _body_len(item) -> int:
    return len(item.body)


def test_redeliveries_are_capped_too_and_the_rest_stay_due_unleased(clocked, clock, queue_name):
    from sluice.models import OutgoingMessage

    clocked.queues.create(queue_name, {"visibility_timeout_ms": 1_000})
    clocked.publisher.publish(queue_name, [OutgoingMessage(body=b"%04d" % n + b"x" * 996) for n in range(10)])
    pull = clocked.consumer.pull
    first = pull(queue_name, group="default", batch_size=10, size_of=_body_len, max_bytes=3_500).messages
    assert len(first) == 3  # 3 x 1,000 bytes fit 3,500; the 4th is never leased
    rest = pull(queue_name, group="default", batch_size=10, size_of=_body_len, max_bytes=1).messages
    assert len(rest) == 1 and rest[0].attempts == 1  # the first item always fits: a pull makes progress
    clock.advance(1_001)  # the 4 leases lapse
    again = pull(queue_name, group="default", batch_size=10, size_of=_body_len, max_bytes=2_500).messages
    assert [m.attempts for m in again] == [2, 2]  # two redeliveries; the other two stay due
    later = pull(queue_name, group="default", batch_size=10).messages
    assert sorted(m.attempts for m in later) == [1] * 6 + [2, 2]  # never leased in between
    assert len({m.id for m in first + rest + later}) == 10


def test_a_cut_multi_shard_read_resumes_at_the_first_record_left_out(clocked, queue_name):
    from sluice.engine.streams import parse_position
    from sluice.models import OutgoingMessage

    clocked.queues.create(queue_name, {"min_shards": 3, "max_shards": 3})
    for n in range(30):
        clocked.publisher.publish(queue_name, [OutgoingMessage(body=b"%04d" % n + b"y" * 996)])
    seen: list[bytes] = []
    position = parse_position("-")
    while True:
        page = clocked.reader.read(queue_name, position, limit=100, size_of=_body_len, max_bytes=4_000)
        if not page.records:
            break
        assert len(page.records) <= 4
        seen += [r.body[:4] for r in page.records]
        position = parse_position(page.next_offset)
    assert sorted(seen) == [b"%04d" % n for n in range(30)]  # nothing skipped, nothing twice


def test_a_pushed_batch_fits_one_lambda_payload_and_leaves_the_rest_unleased(engine, queue_name):
    """Push delivery sends a batch as one invocation payload: cut at the budget, nothing leased beyond."""
    from sluice.codec import delivery_to_native
    from sluice.engine import push
    from sluice.models import OutgoingMessage

    engine.queues.create(queue_name, {"max_message_bytes": 1_048_576})
    for start in range(0, 60, 4):
        bodies = [f"{n:05d}".encode() + b"x" * (200_000 - 5) for n in range(start, start + 4)]
        engine.publisher.publish(queue_name, [OutgoingMessage(body=b, content_type="bytes") for b in bodies])
    consumer = push.PushConsumer(id="hook", type="webhook", url="https://example.com", max_batch_size=100)
    batch = engine.pusher.collect(queue_name, consumer, lambda: 60_000)
    size = len(json.dumps([delivery_to_native(d) for d in batch]))
    assert 0 < len(batch) < 60 and size <= push.PUSH_PAYLOAD_BYTES, (len(batch), size)
    rest = engine.consumer.pull(queue_name, group="default", batch_size=100, visibility_ms=600_000)
    assert len(batch) + len(rest.messages) == 60  # the rest was not leased


def test_a_cut_read_fetches_no_body_past_the_first_it_leaves_out(clocked, queue_name, monkeypatch):
    """The budget is asked as records are read, not after: a read that returns 4 records fetches 5 bodies
    (for a payload-tier body, an S3 read), not every one its limit allows."""
    from sluice.engine.streams import parse_position
    from sluice.models import OutgoingMessage

    clocked.queues.create(queue_name)
    clocked.publisher.publish(queue_name, [OutgoingMessage(body=b"%04d" % n + b"z" * 996) for n in range(30)])
    store = clocked.backend.store
    fetched: list[int] = []
    body = store.body

    def counted_body(at, message):
        fetched.append(1)
        return body(at, message)

    monkeypatch.setattr(store, "body", counted_body)
    page = clocked.reader.read(
        queue_name, parse_position("-"), limit=1000, size_of=_body_len, max_bytes=4_000
    )
    assert [r.body[:4] for r in page.records] == [b"%04d" % n for n in range(4)]
    assert len(fetched) == 5  # the 4 returned and the one that did not fit
    rest = clocked.reader.read(queue_name, parse_position(page.next_offset), limit=1000).records
    assert [r.body[:4] for r in rest] == [b"%04d" % n for n in range(4, 30)]
