"""The engine on moto: publish, leases, redelivery, delays, fencing, gaps, resharding."""

from __future__ import annotations

import threading

import pytest

from sluice import constants as c
from sluice import errors, faults
from sluice.engine import keys
from sluice.engine.consume import RetryRequest
from sluice.engine.gaps import GAP_WAIT_MS
from sluice.engine.store import ShardAddress
from sluice.local import callaudit
from sluice.models import OutgoingMessage


def msgs(n: int, start: int = 0, **kw) -> list[OutgoingMessage]:
    return [OutgoingMessage(body=b'{"n":%d}' % i, **kw) for i in range(start, start + n)]


def drain(engine, queue, batch=10, group="default"):
    got = []
    while True:
        result = engine.consumer.pull(queue, group=group, batch_size=batch)
        if not result.messages:
            return got
        engine.consumer.ack(queue, [d.lease_id for d in result.messages])
        got += result.messages


def test_publish_keeps_order_and_returns_sortable_offsets(engine, queue_name):
    engine.queues.create(queue_name)
    first = engine.publisher.publish(queue_name, msgs(5))
    second = engine.publisher.publish(queue_name, msgs(5, 5))
    offsets = first.offsets + second.offsets
    assert offsets == sorted(offsets) and len(set(first.message_ids + second.message_ids)) == 10
    bodies = [d.body for d in drain(engine, queue_name)]
    assert bodies == [b'{"n":%d}' % i for i in range(10)]


def test_unacked_message_comes_back_after_its_visibility_timeout(clocked, clock, queue_name):
    clocked.queues.create(queue_name)
    clocked.publisher.publish(queue_name, msgs(1))
    first = clocked.consumer.pull(queue_name, group="default", batch_size=5, visibility_ms=30_000)
    assert [d.attempts for d in first.messages] == [1]
    clock.advance(29_999)
    assert clocked.consumer.pull(queue_name, group="default", batch_size=5).messages == []
    clock.advance(1)
    again = clocked.consumer.pull(queue_name, group="default", batch_size=5)
    assert [(d.id, d.attempts) for d in again.messages] == [(first.messages[0].id, 2)]
    assert again.messages[0].lease_id != first.messages[0].lease_id


def test_a_late_ack_is_accepted_while_the_message_is_unacked(clocked, clock, queue_name):
    clocked.queues.create(queue_name)
    clocked.publisher.publish(queue_name, msgs(1))
    lease = clocked.consumer.pull(queue_name, group="default", batch_size=1, visibility_ms=1000).messages[0]
    clock.advance(5000)
    assert clocked.consumer.ack(queue_name, [lease.lease_id]).ack_count == 1
    clock.advance(60_000)
    assert clocked.consumer.pull(queue_name, group="default", batch_size=1).messages == []
    second = clocked.consumer.ack(queue_name, [lease.lease_id])
    assert second.ack_count == 0 and "already acked" in second.warnings[0]


def test_an_ack_from_a_container_whose_cached_document_lacks_the_shard_still_applies(
    engine, queue_name, monkeypatch
):
    """A puller's container knew a shard the acking container's cached document does not have yet (a
    shard added seconds ago): the ack confirms with the control item instead of calling the lease gone,
    which would bring the message back after its lease (a duplicate, seen in the scale-out e2e test)."""
    engine.queues.create(queue_name, min_shards=2, max_shards=2)
    engine.publisher.publish(queue_name, msgs(4))
    leased = engine.consumer.pull(queue_name, group="default", batch_size=4).messages
    shard_id = int(leased[0].id[8:12], 16)
    fresh = engine.queues.get(queue_name)
    stale = fresh.model_copy(update={"shards": [s for s in fresh.shards if s.id != shard_id]})
    monkeypatch.setattr(engine.consumer.directory, "get", lambda name: stale)
    result = engine.consumer.ack(queue_name, [m.lease_id for m in leased])
    assert (result.ack_count, result.warnings) == (4, [])


def test_retry_with_delay_is_not_delivered_early(clocked, clock, queue_name):
    clocked.queues.create(queue_name)
    clocked.publisher.publish(queue_name, msgs(1))
    lease = clocked.consumer.pull(queue_name, group="default", batch_size=1).messages[0]
    assert clocked.consumer.ack(queue_name, [], [RetryRequest(lease.lease_id, 2)]).retry_count == 1
    clock.advance(1999)
    assert clocked.consumer.pull(queue_name, group="default", batch_size=1).messages == []
    clock.advance(1)
    assert [
        d.attempts for d in clocked.consumer.pull(queue_name, group="default", batch_size=1).messages
    ] == [2]


def test_delayed_messages_do_not_hold_up_the_ones_behind(clocked, clock, queue_name):
    clocked.queues.create(queue_name)
    clocked.publisher.publish(queue_name, [OutgoingMessage(body=b'"late"', delay_seconds=60)])
    clocked.publisher.publish(queue_name, [OutgoingMessage(body=b'"now"')])
    first = clocked.consumer.pull(queue_name, group="default", batch_size=5).messages
    assert [d.body for d in first] == [b'"now"']
    clocked.consumer.ack(queue_name, [d.lease_id for d in first])
    clock.advance(60_000)
    assert [d.body for d in clocked.consumer.pull(queue_name, group="default", batch_size=5).messages] == [
        b'"late"'
    ]


def test_queue_delivery_delay_applies_to_every_message(clocked, clock, queue_name):
    clocked.queues.create(queue_name, {"delivery_delay_seconds": 10})
    clocked.publisher.publish(queue_name, msgs(3))
    assert clocked.consumer.pull(queue_name, group="default", batch_size=5).messages == []
    clock.advance(10_000)
    assert len(clocked.consumer.pull(queue_name, group="default", batch_size=5).messages) == 3


def test_concurrent_pullers_get_disjoint_batches(engine, queue_name):
    engine.queues.create(queue_name)
    for start in range(0, 200, 100):
        engine.publisher.publish(queue_name, msgs(100, start))
    seen: list[str] = []
    lock = threading.Lock()

    def puller() -> None:
        while True:
            result = engine.consumer.pull(queue_name, group="default", batch_size=10)
            if not result.messages:
                return
            with lock:
                seen.extend(d.id for d in result.messages)
            engine.consumer.ack(queue_name, [d.lease_id for d in result.messages])

    threads = [threading.Thread(target=puller) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 200 and len(set(seen)) == 200


def test_producer_versions_fence_older_producers(engine, queue_name):
    engine.queues.create(queue_name)
    engine.publisher.publish(queue_name, msgs(1), version=5)
    engine.publisher.publish(queue_name, msgs(1), version=5)
    with pytest.raises(errors.ProducerFenced) as fenced:
        engine.publisher.publish(queue_name, msgs(1), version=4)
    assert (fenced.value.current_version, fenced.value.provided_version) == (5, 4)
    assert len(drain(engine, queue_name)) == 2


def test_a_send_to_a_sealed_shard_moves_to_an_open_one(engine, queue_name):
    queue = engine.queues.create(queue_name)
    # What the coordinator does: open shard 1, seal shard 0 (HEAD first, then the map).
    table = engine.backend.table_for(queue.shards[0])
    table.update(keys.shard_pk(queue, 0), keys.HEAD_SK, "SET sealed = :t", values={":t": True})
    engine.queues.modify(
        queue_name,
        lambda q: q.model_copy(
            update={
                "shards": [
                    q.shards[0].model_copy(update={"state": "sealed"}),
                    q.shards[0].model_copy(update={"id": 1, "table": 1 % len(engine.backend.shard_tables)}),
                ],
                "next_shard_id": 2,
            }
        ),
    )
    stale = engine.publisher.publish  # the directory may still hold the old map: it must recover
    assert stale(queue_name, msgs(3)).shard == 1


def test_a_broker_that_dies_after_allocating_leaves_a_gap_that_is_sealed(clocked, clock, queue_name):
    clocked.queues.create(queue_name)
    clocked.publisher.publish(queue_name, msgs(2))
    with faults.armed(faults.PUBLISH_AFTER_ALLOCATE), pytest.raises(faults.InjectedCrash):
        clocked.publisher.publish(queue_name, msgs(3, 100))
    clock.advance(10)
    clocked.publisher.publish(queue_name, msgs(2, 200))
    got = drain(clocked, queue_name)
    assert [d.body for d in got] == [b'{"n":0}', b'{"n":1}']  # readers stop at a young gap
    clock.advance(GAP_WAIT_MS)
    got = drain(clocked, queue_name)
    assert [d.body for d in got] == [b'{"n":200}', b'{"n":201}']  # sealed, readers move on
    # The dead broker's late write now fails: its client gets an error, nothing half-stored.
    queue = clocked.directory.get(queue_name)
    table = clocked.backend.table_for(queue.shards[0])
    tombstone = table.get(keys.shard_pk(queue, 0), keys.msg_sk(2))
    assert tombstone is not None and tombstone["gap"]


def test_the_shard_function_seals_a_gap_a_dead_broker_left_when_it_flushes(clocked, clock, queue_name):
    """The flush stops at a young hole and, once it is GAP_WAIT_MS old, tombstones it and flushes past
    it. Run as the shard function, so the IAM audit sees its role's conditional PutItem used in every
    run, not only when a loaded run happens to seal a gap through a handler."""
    clocked.queues.create(queue_name, {"bottomless": True})
    clocked.publisher.publish(queue_name, msgs(2))
    with faults.armed(faults.PUBLISH_AFTER_ALLOCATE), pytest.raises(faults.InjectedCrash):
        clocked.publisher.publish(queue_name, msgs(3, 100))
    clocked.publisher.publish(queue_name, msgs(2, 200))
    queue = clocked.directory.get(queue_name)

    def flush() -> int:
        with callaudit.attributed(c.FN_SHARD):
            return clocked.shard_worker.run("flush", queue_name).flushed_records

    assert flush() == 2  # up to the hole: a broker may still be writing it
    clock.advance(GAP_WAIT_MS)
    assert flush() == 2  # the hole sealed, the two messages after it flushed
    table = clocked.backend.table_for(queue.shards[0])
    tombstone = table.get(keys.shard_pk(queue, 0), keys.msg_sk(2))
    assert tombstone is not None and tombstone["gap"]


def test_bodies_over_the_item_limit_go_through_s3(engine, queue_name):
    engine.queues.create(queue_name, {"max_message_bytes": 1_048_576})
    big = b'"' + b"x" * 600_000 + b'"'
    engine.publisher.publish(queue_name, [OutgoingMessage(body=big), OutgoingMessage(body=b'"small"')])
    assert [d.body for d in drain(engine, queue_name)] == [big, b'"small"']


def test_batches_larger_than_an_item_are_split(engine, queue_name):
    engine.queues.create(queue_name)
    engine.publisher.publish(queue_name, [OutgoingMessage(body=b'"%s"' % (b"y" * 100_000)) for _ in range(8)])
    assert len(drain(engine, queue_name, batch=100)) == 8


def test_an_explicit_zero_delay_overrides_the_queue_default(clocked, queue_name):
    clocked.queues.create(queue_name, {"delivery_delay_seconds": 60})
    clocked.publisher.publish(queue_name, [OutgoingMessage(body=b'"now"', delay_seconds=0)])
    clocked.publisher.publish(queue_name, [OutgoingMessage(body=b'"later"')])
    assert [d.body for d in clocked.consumer.pull(queue_name, group="default", batch_size=5).messages] == [
        b'"now"'
    ]


def test_a_striped_merge_is_one_transaction_on_dynamodb(engine, queue_name):
    """The stripes' epoch contract on moto's DynamoDB: the merge of a striped split is one
    TransactWriteItems over lane 0 and every stripe lane, cancelled whole when a stripe lane moved."""
    from sluice.engine.store import ShardAddress
    from tests.unit.test_shardstore import striped_epoch_contract

    queue = engine.queues.create(queue_name, {"min_shards": 1, "max_shards": 1})
    striped_epoch_contract(engine.backend.store, ShardAddress.of(queue, queue.shards[0]))


@pytest.mark.parametrize("swept", [False, True], ids=["expired", "swept"])
def test_a_leased_message_past_retention_is_gone_not_redelivered(clocked, clock, queue_name, swept):
    """SQS deletes a message at the end of its retention, in flight or not. A lease that runs out after it
    must not bring the message back: not from an item past its `exp` (DynamoDB deletes expired items
    lazily; moto never does), and not as a body of `null` once TTL has deleted the item."""
    clocked.queues.create(queue_name, {"retention_seconds": 60, "visibility_timeout_ms": 30_000})
    clocked.publisher.publish(queue_name, [OutgoingMessage(body=b"%d" % n) for n in range(3)])
    first = clocked.consumer.pull(queue_name, group="default", batch_size=10)
    assert sorted(m.body for m in first.messages) == [b"0", b"1", b"2"]
    queue = clocked.queues.get(queue_name)
    if swept:
        at = ShardAddress.of(queue, queue.shards[0])
        clocked.backend.store.delete_items(at, [item.first for item in clocked.backend.store.scan(at, 0)])
    clock.advance(61_000)  # past the retention and the leases
    again = clocked.consumer.pull(queue_name, group="default", batch_size=10)
    assert [m.body for m in again.messages] == []
    assert again.backlog_exact and again.message_backlog_count == 0 and again.backlog.in_flight == 0
