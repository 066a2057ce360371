"""Ordered queues: one lease at a time per partition key, in publish order; stream reads in order."""

from __future__ import annotations

import json

from sluice.engine.consume import RetryRequest
from sluice.engine.groupstate import GroupState, Pending
from sluice.engine.streams import parse_position
from sluice.models import OutgoingMessage


def _send(engine, queue_name, pairs):
    engine.publisher.publish(
        queue_name,
        [OutgoingMessage(body=json.dumps(v).encode(), partition_key=k) for k, v in pairs],
    )


def _pull(engine, queue_name, n=10):
    got = engine.consumer.pull(queue_name, group="default", batch_size=n, visibility_ms=30_000).messages
    return {json.loads(d.body): d for d in got}


def test_one_lease_per_key_in_publish_order(clocked, clock, queue_name):
    clocked.queues.create(queue_name, {"ordered": True, "min_shards": 2})
    _send(clocked, queue_name, [("a", "a1"), ("b", "b1"), ("a", "a2"), ("b", "b2"), ("a", "a3")])
    _send(clocked, queue_name, [(None, "free1"), (None, "free2")])
    first = _pull(clocked, queue_name)
    assert set(first) == {"a1", "b1", "free1", "free2"}  # keyless messages are not held
    assert _pull(clocked, queue_name) == {}  # a2, b2, a3 wait behind a1 and b1
    clocked.consumer.ack(queue_name, [first[k].lease_id for k in ("a1", "free1", "free2")])
    second = _pull(clocked, queue_name)
    assert set(second) == {"a2"}
    # A retried message keeps its key's turn: b1 comes again before b2.
    clocked.consumer.ack(queue_name, [], [RetryRequest(first["b1"].lease_id, 0)])
    third = _pull(clocked, queue_name)
    assert set(third) == {"b1"} and third["b1"].attempts == 2
    # An expired lease is redelivered first too.
    clock.advance(31_000)
    fourth = _pull(clocked, queue_name)
    assert set(fourth) == {"a2", "b1"}
    clocked.consumer.ack(queue_name, [fourth["a2"].lease_id, fourth["b1"].lease_id])
    assert set(_pull(clocked, queue_name)) == {"a3", "b2"}


def test_ordered_stream_reads_keep_each_keys_order(clocked, queue_name):
    clocked.queues.create(queue_name, {"ordered": True, "min_shards": 3})
    pairs = [(f"k{i % 5}", f"k{i % 5}-{i}") for i in range(60)]
    for start in range(0, 60, 7):
        _send(clocked, queue_name, pairs[start : start + 7])
    got, position = [], parse_position("-")
    while (page := clocked.reader.read(queue_name, position, limit=4)).records:
        got += [json.loads(r.body) for r in page.records]
        position = parse_position(page.next_offset)
    assert sorted(got) == sorted(v for _, v in pairs)
    for key in {k for k, _ in pairs}:
        assert [v for v in got if v.startswith(key + "-")] == [v for k, v in pairs if k == key]


def test_key_tags_survive_the_state_encoding():
    state = GroupState(read=5, read_item=0)
    state.pending = {1: Pending(0, 10, 1, True), 3: Pending(0, 10, 0, False), 4: Pending(4, 9, 1, True)}
    state.keys = {1: "aaaa", 3: "aaaa", 2: "gone"}
    back = GroupState.decode(state.encode(), 1)
    assert back.keys == {1: "aaaa", 3: "aaaa"} and back.pending == state.pending
    plain = GroupState(read=2, pending={1: Pending(0, 1, 1, True)})
    assert GroupState.decode(plain.encode(), 1).keys == {}


def test_pull_treats_items_past_their_ttl_as_gone(clocked, clock, queue_name):
    clocked.queues.create(queue_name, {"retention_seconds": 60})
    _send(clocked, queue_name, [(None, "old")])
    clock.advance(61_000)
    _send(clocked, queue_name, [(None, "new")])
    assert set(_pull(clocked, queue_name)) == {"new"}  # moto never expires items; readers must
