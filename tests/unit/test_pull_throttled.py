"""A pull whose later read is throttled after it committed leases answers those leases (on the twin):
raising would leave them held by nobody until their visibility timeout, a 30 s stall of a drain's tail."""

from __future__ import annotations

from typing import Any

import pytest

from bench.twin.world import build
from sluice import errors
from sluice.engine.consume import Consumer
from sluice.models import OutgoingMessage


def throttled_after_leasing(monkeypatch: pytest.MonkeyPatch, consumer: Consumer) -> None:
    """Each region's leasing runs, then a read of it is throttled (a saturated partition's survey)."""
    lease = consumer._pull_region

    def pull_region(pull: Any, shards: Any) -> None:
        lease(pull, shards)
        raise errors.Throttled("a read of a saturated partition was throttled on every retry")

    monkeypatch.setattr(consumer, "_pull_region", pull_region)


def test_a_pull_throttled_after_leasing_answers_its_leases_as_an_estimate(monkeypatch) -> None:
    world = build()
    world.engine.queues.create("q", {"min_shards": 2, "max_shards": 2})
    world.engine.publisher.publish("q", [OutgoingMessage(body=b'{"n": 1}')])
    consumer = world.container().consumer
    throttled_after_leasing(monkeypatch, consumer)

    answer = consumer.pull("q", group="default", batch_size=10)

    assert [m.body for m in answer.messages] == [b'{"n": 1}']
    assert not answer.backlog_exact
    assert consumer.ack("q", [m.lease_id for m in answer.messages]).ack_count == 1


def test_a_pull_throttled_before_leasing_anything_answers_throttled(monkeypatch) -> None:
    world = build()
    world.engine.queues.create("q", {"min_shards": 2, "max_shards": 2})
    consumer = world.container().consumer
    throttled_after_leasing(monkeypatch, consumer)

    with pytest.raises(errors.Throttled):
        consumer.pull("q", group="default", batch_size=10)


def saturated(world: Any, queue: Any, shard: int) -> None:
    """The shard's partition owes ten seconds of capacity: every read of it is throttled meanwhile."""
    from sluice.engine import keys

    table = world.engine.backend.table_for(queue.shards[shard]).name
    world.dynamo.tables[table][keys.shard_pk(queue, shard)].tokens = -10.0


def test_a_pull_answers_from_the_shards_it_could_read_without_waiting_on_a_saturated_one() -> None:
    """Asking a saturated partition again (unprocessed-key rounds, seconds) is what kept a drain's
    partitions saturated when 1,000 pullers did it at once: the shards one call read are enough."""
    world = build()
    queue = world.engine.queues.create("q", {"min_shards": 2, "max_shards": 2})
    sent = [world.engine.publisher.publish("q", [OutgoingMessage(body=b"m")]).shard for _ in range(30)]
    assert set(sent) == {0, 1}
    saturated(world, queue, 0)
    started = world.sim.now

    answer = world.container().consumer.pull("q", group="default", batch_size=100)

    assert len(answer.messages) == sent.count(1)  # all of shard 1's, none of shard 0's
    assert not answer.backlog_exact
    assert world.sim.now - started < 0.2  # one call per read: no rounds of retries


def test_a_pull_that_could_read_no_shard_answers_throttled() -> None:
    world = build()
    queue = world.engine.queues.create("q", {"min_shards": 2, "max_shards": 2})
    world.engine.publisher.publish("q", [OutgoingMessage(body=b"m")])
    saturated(world, queue, 0)
    saturated(world, queue, 1)

    with pytest.raises(errors.Throttled):
        world.container().consumer.pull("q", group="default", batch_size=10)


def test_an_ack_whose_lane_cannot_be_read_is_recorded_all_the_same(monkeypatch) -> None:
    """A 429 would keep the message leased for another round (a drain's tail waited seconds on such
    acks): the ADD goes without the read, and the message is done."""
    world = build()
    world.engine.queues.create("q", {"min_shards": 1, "max_shards": 1, "visibility_timeout_ms": 1_000})
    world.engine.publisher.publish("q", [OutgoingMessage(body=b'{"n": 1}')])
    consumer = world.container().consumer
    leased = consumer.pull("q", group="default", batch_size=10).messages
    assert len(leased) == 1

    def saturated_lane(*_args: Any, **_kwargs: Any) -> Any:
        raise errors.Throttled("the lane's partition is saturated")

    with monkeypatch.context() as patch:
        patch.setattr(consumer.planner, "lane", saturated_lane)
        assert consumer.ack("q", [leased[0].lease_id]).ack_count == 1

    world.sim.sleep(2)  # past the visibility timeout: an ack not recorded would deliver it again
    after = consumer.pull("q", group="default", batch_size=10)
    assert after.messages == [] and after.backlog_exact and after.message_backlog_count == 0
