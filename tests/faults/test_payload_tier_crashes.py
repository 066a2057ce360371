"""Crashes around the payload tier's two writes (the S3 object, then the batch items that index it)
and the answer: no answered message is lost, no batch item ever names a missing object, and the
objects of crashed sends (orphans) are deleted by the flush that passes their sealed gap."""

from __future__ import annotations

import random

import pytest

from sluice import errors, faults
from sluice.engine import keys, payloads
from sluice.engine.publish import Allocation
from sluice.models import OutgoingMessage

SENDS = 40


def _send(n: int) -> list[OutgoingMessage]:
    return [
        OutgoingMessage(
            body=b"%04d-%02d:" % (n, i) + random.randbytes(3000).hex().encode(), content_type="text"
        )
        for i in range(10)
    ]


def _items(engine, queue) -> list[dict]:
    table = engine.backend.table_for(queue.shards[0])
    return list(table.query(keys.shard_pk(queue, 0), sk_from=keys.msg_sk(0), sk_to=keys.MSG_SK_END))


def _objects(engine, queue) -> set[str]:
    bucket = engine.backend.bucket_for(queue.shards[0])
    return set(bucket.keys(payloads.object_prefix(keys.shard_pk(queue, 0))))


def _dangling(engine, queue) -> set[str]:
    named = {i[keys.ITEM_PAYLOAD] for i in _items(engine, queue) if keys.ITEM_PAYLOAD in i}
    return named - _objects(engine, queue)


@pytest.mark.parametrize("bottomless", [False, True])
def test_crashes_around_the_tier_writes_lose_nothing_and_leave_no_dangling_pointer(
    clocked, clock, queue_name, bottomless
):
    rng = random.Random(24)
    clocked.queues.create(queue_name, {"payload_tier": "s3", "bottomless": bottomless})
    queue = clocked.queues.get(queue_name)
    answered: list[bytes] = []
    stored_unanswered: list[bytes] = []
    crashes = {faults.TIER_AFTER_PUT: 0, faults.PUBLISH_AFTER_WRITE: 0}
    late_writers: list[tuple[Allocation, list[OutgoingMessage]]] = []
    for n in range(SENDS):
        messages = _send(n)
        point = rng.choice([None, None, faults.TIER_AFTER_PUT, faults.PUBLISH_AFTER_WRITE])
        if point is None:
            clocked.publisher.publish(queue_name, messages)
            answered += [m.body for m in messages]
        else:
            head = clocked.backend.table_for(queue.shards[0]).get(keys.shard_pk(queue, 0), keys.HEAD_SK) or {}
            with faults.armed(point), pytest.raises(faults.InjectedCrash):
                clocked.publisher.publish(queue_name, messages)
            crashes[point] += 1
            if point == faults.PUBLISH_AFTER_WRITE:  # stored, but the client never heard: it may resend
                stored_unanswered += [m.body for m in messages]
            else:  # the object is there and no item names it: a dead broker that may wake up later
                late_writers.append((Allocation(head.get(keys.HEAD_NEXT, 0), clock.now), messages))
        assert not _dangling(clocked, queue)
        clock.advance(rng.randint(0, 400))
    assert min(crashes.values()) >= 5
    orphans = {payloads.object_key(keys.shard_pk(queue, 0), a.first_seq) for a, _ in late_writers}
    assert orphans <= _objects(clocked, queue)

    clock.advance(15_000)  # past the gap wait: readers and the flush seal the crashed sends' ranges
    got = []
    while pulled := clocked.consumer.pull(queue_name, group="default", batch_size=25).messages:
        clocked.consumer.ack(queue_name, [d.lease_id for d in pulled])
        got += [d.body for d in pulled]
    assert sorted(got) == sorted(answered + stored_unanswered)  # nothing lost, nothing invented

    for alloc, messages in late_writers:  # the dead brokers wake up: their slots are tombstones now
        with pytest.raises(errors.WriteRaced):
            clocked.publisher._write(queue, queue.shards[0], alloc, messages)
    assert not _dangling(clocked, queue)

    report = clocked.shard_worker.run(["flush", "compact"], queue=queue_name)
    assert report.orphans_deleted == len(orphans)
    named = {i[keys.ITEM_PAYLOAD] for i in _items(clocked, queue) if keys.ITEM_PAYLOAD in i}
    assert _objects(clocked, queue) == named  # every orphan gone, every named object kept

    # Replays from the segments see exactly what was stored.
    from sluice.engine.streams import Position

    page = clocked.reader.read(queue_name, Position(seqs={0: 0}), limit=1000)
    assert sorted(r.body for r in page.records) == sorted(answered + stored_unanswered)

    # Expiry: items and their objects go together (moto's stand-in for TTL plus the lifecycle rule).
    clock.advance(15 * 86_400_000)
    clocked.shard_worker.run(["flush", "sweep"], queue=queue_name)
    assert not _dangling(clocked, queue)
    assert not _objects(clocked, queue) and not [
        i for i in _items(clocked, queue) if not i.get(keys.ITEM_GAP)
    ]
