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
