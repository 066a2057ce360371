import base64
import json

import pytest

from sluice.codec import (
    StoredMessage,
    body_from_request,
    body_to_cloudflare,
    body_to_native,
    decode_batch,
    encode_batch,
)


def test_batch_round_trips_every_field():
    messages = [
        StoredMessage(body=b'{"a":1}'),
        StoredMessage(body="héllo ☃".encode(), content_type="text", partition_key="k", attributes={"x": "y"}),
        StoredMessage(body=bytes(range(256)), content_type="bytes", visible_at_ms=123),
        StoredMessage(body=b"", overflow_key="overflow/k"),
    ]
    assert list(decode_batch(encode_batch(messages))) == messages


def test_batch_is_compressed_when_that_is_smaller():
    repetitive = [StoredMessage(body=json.dumps({"event": "click", "n": i}).encode()) for i in range(100)]
    raw_size = sum(len(m.body) for m in repetitive)
    assert len(encode_batch(repetitive)) < raw_size / 2


def test_large_json_batches_take_the_denser_codec_and_small_or_random_ones_keep_zlib():
    import random
    import zlib

    from bench.payloads import EVENTS

    events = [StoredMessage(body=json.dumps(b).encode()) for b, _ in EVENTS.bodies(100, seed=5)]
    blob = encode_batch(events)
    zlib_only = 1 + len(zlib.compress(b"".join(m.body for m in events), 6))
    assert blob[:1] == b"\x02" and len(blob) < 0.85 * zlib_only  # bz2: at least 15% fewer bytes
    assert list(decode_batch(blob)) == events
    small = [StoredMessage(body=json.dumps({"event": "click", "n": i}).encode()) for i in range(10)]
    assert encode_batch(small)[:1] == b"\x01"
    rng = random.Random(1)
    noise = [StoredMessage(body=base64.b64encode(rng.randbytes(300))) for _ in range(100)]
    assert encode_batch(noise)[:1] == b"\x01"  # compresses, but not to half: bz2 is not tried
    assert list(decode_batch(encode_batch(noise))) == noise


def test_incompressible_batch_is_stored_raw():
    import os

    messages = [StoredMessage(body=os.urandom(200), content_type="bytes")]
    blob = encode_batch(messages)
    assert blob[:1] == b"\x00" and list(decode_batch(blob)) == messages


@pytest.mark.parametrize(
    "value", [{"a": {"b": [1, 2]}}, "x\ny\r\n", "漢字 😀", 42, -0.5, None, False, [], ""]
)
def test_json_bodies_round_trip_through_the_native_face(value):
    assert body_to_native(body_from_request(value, "json"), "json") == value


def test_text_and_bytes_rules():
    assert body_from_request("plain", "text") == b"plain"
    assert body_from_request(base64.b64encode(b"\x00\xff").decode(), "bytes") == b"\x00\xff"
    assert body_to_native(b"\x00\xff", "bytes") == "AP8="
    assert body_to_cloudflare(b'{"a":1}', "json") == base64.b64encode(b'{"a":1}').decode()
    assert body_to_cloudflare(b"plain", "text") == "plain"


@pytest.mark.parametrize(("body", "ctype"), [(5, "text"), ("not base64!", "bytes"), (5, "bytes")])
def test_bodies_that_do_not_fit_their_type_are_rejected(body, ctype):
    with pytest.raises(ValueError):
        body_from_request(body, ctype)
