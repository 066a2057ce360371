"""Stripes on the twin (the real engine on the in-memory DynamoDB, virtual time): a live stream sent to
one shard faster than one puller works is cut into stripes, each held by its puller; every message is
acked once; and when the stream stops, an empty pull merges the stripes back into one lane."""

from __future__ import annotations

from collections import Counter

from bench.twin.world import build
from sluice.engine.store import ShardAddress
from sluice.models import OutgoingMessage


def test_a_stream_one_puller_cannot_keep_up_with_is_striped_and_merged_back_when_it_stops() -> None:
    world = build(seed=5)
    engine, sim = world.engine, world.sim
    queue = engine.queues.create("q", {"min_shards": 1, "max_shards": 1})
    at = ShardAddress.of(queue, queue.shards[0])
    store = engine.backend.store
    sent: list[str] = []
    acked: Counter[str] = Counter()
    striped: list[int] = []

    def producer() -> None:  # 1,000 msg/s for 3 s; a puller working 0.25 s a batch of 100 takes ~350
        publisher = world.container().publisher
        while sim.now < 3:
            ids = publisher.publish("q", [OutgoingMessage(body=b"x" * 200) for _ in range(50)])
            sent.extend(ids.message_ids)
            sim.sleep(0.05)
        cursor = store.read_lanes(at, "default", [], head=False).cursor
        striped.append(0 if cursor is None else cursor.stripes)

    def puller() -> None:
        while sim.now < 8:
            consumer = world.container().consumer
            result = consumer.pull("q", group="default", batch_size=100, wait_ms=1_000)
            if result.messages:
                sim.sleep(0.25)
                done = consumer.ack("q", [m.lease_id for m in result.messages])
                assert done.ack_count == len(result.messages), done.warnings
                acked.update(m.id for m in result.messages)

    sim.spawn("producer", producer)
    for i in range(8):
        sim.spawn(f"puller-{i}", puller)
    sim.run_until(10)
    assert striped and striped[0] >= 2  # cut for the rate: ~1,000 / ~350 msg/s, with headroom
    assert len(sent) > 2_000 and set(acked) == set(sent) and set(acked.values()) == {1}
    assert store.read_lanes(at, "default", [], head=False).cursor is None  # merged back once idle
    final = engine.consumer.pull("q", group="default", batch_size=10)
    assert final.messages == [] and final.backlog_exact and final.message_backlog_count == 0
    engine.publisher.publish("q", [OutgoingMessage(body=b"late")])
    late = engine.consumer.pull("q", group="default", batch_size=10)
    assert [m.body for m in late.messages] == [b"late"] and late.backlog_exact  # lane 0 reads on, once


def test_stripes_are_cut_for_pullers_that_share_a_lane_never_for_one_alone() -> None:
    from sluice.engine.lanes import MAX_STRIPES, stripes_for

    # 940 msg/s, a puller back every 0.3 s with 100: ~3 pullers' work, with headroom 5 stripes.
    assert stripes_for(940, 50, 100, 0.3, shared=True) == 5
    assert stripes_for(940, 2_000, 100, 0.3, shared=False) == 0  # alone and behind: stripes cannot help
    assert stripes_for(200, 0, 100, 0.3, shared=True) == 0  # one puller keeps up
    assert stripes_for(940, 10_000, 100, 0.3, shared=True) == 0  # a backlog (> 5 s of sends): claims
    assert stripes_for(None, 0, 100, 0.3, shared=True) == 0  # no rate measured yet
    assert stripes_for(100_000, 0, 100, 0.3, shared=True) == MAX_STRIPES


def test_a_lone_puller_behind_a_stream_keeps_one_lane() -> None:
    world = build(seed=6)
    engine, sim = world.engine, world.sim
    queue = engine.queues.create("q", {"min_shards": 1, "max_shards": 1})
    at = ShardAddress.of(queue, queue.shards[0])

    def producer() -> None:  # 1,000 msg/s against one puller's ~350
        while sim.now < 2:
            world.container().publisher.publish("q", [OutgoingMessage(body=b"x" * 200) for _ in range(50)])
            sim.sleep(0.05)

    def puller() -> None:
        while sim.now < 2:
            consumer = world.container().consumer
            result = consumer.pull("q", group="default", batch_size=100, wait_ms=1_000)
            sim.sleep(0.25)
            consumer.ack("q", [m.lease_id for m in result.messages])

    sim.spawn("producer", producer)
    sim.spawn("puller", puller)
    sim.run_until(3)
    assert engine.backend.store.read_lanes(at, "default", [], head=False).cursor is None
