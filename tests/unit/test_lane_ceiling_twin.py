"""Consumer pressure scales a group's lanes, on the twin (the real engine and coordinator on the
in-memory DynamoDB, virtual time): pullers at the lane ceiling of a shard with a deep backlog make the
coordinator raise the ceiling, they widen past it, every message is acked once, and the drained group
merges back to one lane (and the default ceiling)."""

from __future__ import annotations

import contextlib
import random
from collections import Counter
from collections.abc import Iterator

import pytest

from bench.twin.world import build
from sluice import errors
from sluice.engine.consume import Consumer
from sluice.engine.coordinator import Coordinator, CoordinatorConfig
from sluice.engine.lanes import MAX_LANES
from sluice.engine.scaling import ScalingPolicy
from sluice.engine.store import ShardAddress
from sluice.models import AckResult, OutgoingMessage

MESSAGES, PULLERS, BATCH = 8_000, 60, 10
ACK_ATTEMPTS = 10


@pytest.fixture
def engine_random() -> Iterator[None]:
    """The engine draws from the global `random` (backoffs, which puller leaves a contended lane), so
    the twin's run differs from run to run: a fixed seed makes this test one run. Over 16 seeds, 15
    had the pullers widen past 32 lanes; in one, the 32 lanes' claims took the backlog before any
    puller lost a race on its own lane after the ceiling rose."""
    state = random.getstate()
    random.seed(0)
    yield
    random.setstate(state)


@pytest.mark.usefixtures("engine_random")
def test_consumer_pressure_raises_the_lane_ceiling_and_every_message_is_acked_once() -> None:
    world = build(seed=5)
    engine, sim = world.engine, world.sim
    queue = engine.queues.create("q", {"min_shards": 1, "max_shards": 1})
    world.dynamo.unlimited = True
    for i in range(MESSAGES // 100):
        engine.publisher.publish("q", [OutgoingMessage(body=b"%d" % (100 * i + j)) for j in range(100)])
    world.dynamo.unlimited = False
    store = engine.backend.store
    widths: list[int] = []
    set_lanes = store.set_lanes
    store.set_lanes = lambda at, g, lanes, high, seen: (  # type: ignore[method-assign]
        widths.append(lanes) or set_lanes(at, g, lanes, high, seen)
    )
    # These pullers' batch, so a small backlog feeds many lanes; a ceiling of 48 is enough to show.
    policy = ScalingPolicy(lane_batch=BATCH, lane_ceiling_max=48)
    coordinator = Coordinator(
        engine.backend, engine.queues, config=CoordinatorConfig(queues=["q"], policy=policy)
    )
    raised: dict[str, int] = {}
    acked: Counter[str] = Counter()

    def coordinate() -> None:
        while len(acked) < MESSAGES and sim.now < 60:
            with contextlib.suppress(errors.Throttled):
                for report in coordinator.run_once().queues:
                    raised.update(report.lane_ceilings)
            sim.sleep(0.1)

    def ack(consumer: Consumer, lease_ids: list[str]) -> AckResult:
        """A throttled ack is sent again, as the SDK does (left alone, its leases would expire and
        their messages go to another puller while this one still holds them)."""
        for _ in range(ACK_ATTEMPTS):
            with contextlib.suppress(errors.Throttled):
                return consumer.ack("q", lease_ids)
            sim.sleep(0.1)
        raise AssertionError(f"an ack was throttled {ACK_ATTEMPTS} times")

    def puller() -> None:
        consumer = world.container().consumer  # a container of its own, as Lambda runs pullers
        while len(acked) < MESSAGES and sim.now < 60:
            try:  # a throttled pull is retried, as a client does (leases it lost come back after 2 s)
                result = consumer.pull("q", group="default", batch_size=BATCH, visibility_ms=2_000)
            except errors.Throttled:
                sim.sleep(0.1)
                continue
            if not result.messages:
                sim.sleep(0.05)
                continue
            done = ack(consumer, [m.lease_id for m in result.messages])
            assert done.ack_count == len(result.messages), done.warnings
            acked.update(m.id for m in result.messages)

    sim.spawn("coordinator", coordinate)
    for i in range(PULLERS):
        sim.spawn(f"puller-{i}", puller)
    sim.run_until(60)
    assert len(acked) == MESSAGES and set(acked.values()) == {1}  # every message acked, once
    assert raised and max(raised.values()) > MAX_LANES  # the coordinator raised the ceiling
    assert max(widths) > MAX_LANES  # and the pullers widened past the default
    final = engine.consumer.pull("q", group="default", batch_size=10)
    assert final.messages == [] and final.backlog_exact and final.message_backlog_count == 0
    at = ShardAddress.of(queue, queue.shards[0])
    assert store.read_lanes(at, "default", [], head=False).cursor is None  # merged: ceiling gone with it
