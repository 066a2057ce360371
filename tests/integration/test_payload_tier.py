"""The payload tier on moto: sends whose bodies go to one S3 object each, read back by every path."""

from __future__ import annotations

import os

import boto3
import pytest

from sluice import constants, errors
from sluice.engine import keys, payloads
from sluice.engine.peek import Peeker
from sluice.engine.streams import Position
from sluice.models import OutgoingMessage

BIG = 64 * 1024


def big(n: int, start: int = 0, size: int = BIG, **kw) -> list[OutgoingMessage]:
    """`size`-byte text bodies that do not compress (the tier's case), each naming its index."""
    out = []
    for i in range(start, start + n):
        head = f"{i:06d}:".encode()
        out.append(
            OutgoingMessage(
                body=head + os.urandom(size).hex().encode()[: size - 7], content_type="text", **kw
            )
        )
    return out


def items(engine, queue_name: str, shard: int = 0) -> list[dict]:
    queue = engine.queues.get(queue_name)
    pk = keys.shard_pk(queue, shard)
    table = engine.backend.table_for(queue.shards[shard])
    return list(table.query(pk, sk_from=keys.msg_sk(0), sk_to=keys.MSG_SK_END))


def objects(engine, queue_name: str, shard: int = 0) -> list[str]:
    queue = engine.queues.get(queue_name)
    bucket = engine.backend.bucket_for(queue.shards[shard])
    return list(bucket.keys(payloads.object_prefix(keys.shard_pk(queue, shard))))


def drain(engine, queue_name, batch=10):
    got = []
    while result := engine.consumer.pull(queue_name, group="default", batch_size=batch).messages:
        engine.consumer.ack(queue_name, [d.lease_id for d in result])
        got += result
    return got


def test_auto_keeps_small_sends_inline_and_moves_large_ones_to_s3(engine, queue_name):
    engine.queues.create(queue_name)
    engine.publisher.publish(queue_name, [OutgoingMessage(body=b'{"a":1}')] * 10)
    sent = big(10)
    engine.publisher.publish(queue_name, sent)
    small, large = items(engine, queue_name)
    assert keys.ITEM_PAYLOAD not in small
    assert large[keys.ITEM_PAYLOAD] == objects(engine, queue_name)[0]
    assert len(large[keys.ITEM_DATA]) < 200  # the index: headers and lengths only
    bucket = engine.backend.settings.segment_bucket
    tags = boto3.client("s3").get_object_tagging(Bucket=bucket, Key=large[keys.ITEM_PAYLOAD])["TagSet"]
    assert tags == [{"Key": constants.PAYLOAD_DAYS_TAG, "Value": "5"}]  # 4 days' retention, plus one
    assert [d.body for d in drain(engine, queue_name)] == [b'{"a":1}'] * 10 + [m.body for m in sent]


def test_the_setting_forces_either_tier_and_bad_values_are_refused(engine, queue_name):
    engine.queues.create(queue_name, {"payload_tier": "s3"})
    engine.publisher.publish(queue_name, [OutgoingMessage(body=b'{"a":1}')])
    assert keys.ITEM_PAYLOAD in items(engine, queue_name)[0]
    engine.queues.update_settings(queue_name, {"payload_tier": "dynamodb"})
    engine.publisher.publish(queue_name, big(10))
    assert keys.ITEM_PAYLOAD not in items(engine, queue_name)[1]
    with pytest.raises(errors.InvalidSettings, match="payload_tier"):
        engine.queues.create(queue_name + "x", {"payload_tier": "glacier"})


def test_pulls_of_part_of_a_send_redeliveries_and_ordering_read_ranges(
    clocked, clock, queue_name, monkeypatch
):
    clocked.queues.create(queue_name, {"visibility_timeout_ms": 1000, "payload_tier": "s3"})
    sent = big(10, size=2000)
    clocked.publisher.publish(queue_name, sent)
    ranges: list[tuple[int, int]] = []
    real = payloads.Bucket.get_range
    monkeypatch.setattr(
        payloads.Bucket, "get_range", lambda b, k, lo, hi: ranges.append((lo, hi)) or real(b, k, lo, hi)
    )
    first = clocked.consumer.pull(queue_name, group="default", batch_size=3).messages
    assert [d.body for d in first] == [m.body for m in sent[:3]]
    assert ranges == [(0, 20_000)]  # from the first message asked for to the item's end, once
    clocked.consumer.ack(queue_name, [first[0].lease_id])
    clock.advance(1001)
    again = clocked.consumer.pull(queue_name, group="default", batch_size=10).messages
    assert sorted(d.body for d in again) == sorted(m.body for m in sent[1:])
    assert {d.attempts for d in again if d.body in (sent[1].body, sent[2].body)} == {2}


def test_stream_reads_peek_and_metrics_see_tier_bodies(engine, queue_name):
    engine.queues.create(queue_name, {"payload_tier": "s3"})
    sent = big(5, size=3000, attributes={"k": "v"}, partition_key="p")
    engine.publisher.publish(queue_name, sent)
    page = engine.reader.read(queue_name, Position(seqs={0: 0}), limit=10)
    assert [(r.body, r.attributes, r.partition_key) for r in page.records] == [
        (m.body, {"k": "v"}, "p") for m in sent
    ]
    assert [p.body for p in Peeker(engine.operations, engine.consumer).peek(queue_name, 3)] == [
        m.body for m in sent[:3]
    ]
    metrics = engine.operations.metrics(queue_name)
    assert metrics["backlog_count"] == 5 and metrics["backlog_bytes"] == 5 * 3000


def test_replays_from_segments_after_flush_and_compaction(clocked, clock, queue_name):
    clocked.queues.create(queue_name, {"payload_tier": "s3"})
    sent = []
    for n in range(4):
        sent += big(10, start=10 * n, size=4096)
        clocked.publisher.publish(queue_name, sent[-10:])
        clocked.shard_worker.run("flush", queue=queue_name)
    assert clocked.shard_worker.run("compact", queue=queue_name).compactions == 1
    page = clocked.reader.read(queue_name, Position(seqs={0: 0}), limit=100)
    assert [r.body for r in page.records] == [m.body for m in sent]
    assert len(objects(clocked, queue_name)) == 4  # the hot tier keeps its objects until they expire
    assert [d.body for d in drain(clocked, queue_name, batch=25)] == [m.body for m in sent]


def test_dead_letters_and_redrive_carry_tier_bodies(clocked, clock, queue_name):
    dlq = queue_name + "-dlq"
    clocked.queues.create(dlq, {"payload_tier": "s3"})
    clocked.queues.create(
        queue_name,
        {"max_retries": 1, "visibility_timeout_ms": 1000, "dead_letter_queue": dlq, "payload_tier": "s3"},
    )
    sent = big(3, size=5000)
    clocked.publisher.publish(queue_name, sent)
    assert len(clocked.consumer.pull(queue_name, group="default", batch_size=10).messages) == 3
    clock.advance(1001)
    assert clocked.consumer.pull(queue_name, group="default", batch_size=10).messages == []
    assert keys.ITEM_PAYLOAD in items(clocked, dlq)[0]
    assert (
        sorted(Peeker(clocked.operations, clocked.consumer).peek(dlq, 10), key=lambda p: p.body)[0].body
        == sorted(m.body for m in sent)[0]
    )
    assert clocked.operations.redrive(queue_name, dlq)["moved"] == 3
    assert sorted(d.body for d in drain(clocked, queue_name)) == sorted(m.body for m in sent)


def test_a_send_whose_headers_need_two_items_shares_one_object(engine, queue_name):
    engine.queues.create(queue_name, {"payload_tier": "s3"})
    attributes = {f"a{i}": "x" * 1000 for i in range(16)}  # ~16 KB of headers per message
    sent = big(30, size=1000, attributes=attributes)
    engine.publisher.publish(queue_name, sent)
    stored = items(engine, queue_name)
    assert len(stored) > 1 and {i[keys.ITEM_PAYLOAD] for i in stored} == {objects(engine, queue_name)[0]}
    assert [d.body for d in drain(engine, queue_name)] == [m.body for m in sent]


def test_a_native_send_carries_50_messages_of_64_kb(api, queue_name):
    assert api("POST", "/v1/queues", {"queue_name": queue_name})[0] == 201
    messages = [{"body": m.body.decode(), "content_type": "text"} for m in big(50)]
    status, body = api("POST", f"/v1/queues/{queue_name}/messages", {"messages": messages})
    assert status == 200 and len(body["result"]["message_ids"]) == 50
    status, body = api("POST", f"/v1/queues/{queue_name}/messages", {"messages": messages + messages[:15]})
    assert status == 413 and body["errors"][0]["code"] == 10108  # 65 x 64 KB: over 4 MiB
