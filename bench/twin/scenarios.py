"""The twin's scenarios: the real publish, pull/ack and coordinator code under simulated load.

- Producers are an open-loop Poisson stream of send requests (`BATCH` messages of `BODY_BYTES`);
  each request is served by a broker container (one actor, reused when idle, a new one when all are
  busy: Lambda's scale-out). A request the broker answers with a throttle or an outage is sent
  again by the client after rand(0.1, 0.5) s.
- The coordinator runs `Coordinator.run_once` every `constants.DEFAULT_COORDINATOR_TICK_SECONDS`.
- Pullers are closed loops: pull(batch), ack what came, again.
"""

from __future__ import annotations

import random
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from bench.twin.world import World, build, percentile
from sluice import constants as c
from sluice import errors
from sluice.engine import mapdoc
from sluice.engine.coordinator import Coordinator, CoordinatorConfig
from sluice.engine.scaling import ScalingPolicy
from sluice.models import OutgoingMessage, Queue

BATCH = 100
BODY_BYTES = 200
TICK_S = c.DEFAULT_COORDINATOR_TICK_SECONDS
QUEUE = "twin"


@dataclass
class Timeline:
    offered: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))  # msgs first sent
    delivered: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))  # msgs stored
    client_retries: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))
    shards: dict[int, int] = field(default_factory=dict)  # open shards seen by the coordinator, by second
    latencies: list[tuple[float, float]] = field(default_factory=list)  # (done at, seconds)
    failed_passes: list[float] = field(default_factory=list)  # coordinator passes that hit a throttle


class Brokers:
    """Lambda-like: one container per concurrent request; idle containers are reused."""

    def __init__(
        self, world: World, messages: list[OutgoingMessage], timeline: Timeline, region: str | None = None
    ) -> None:
        self.world = world
        self.region = region  # where the containers run (None: the only region)
        self.messages = messages
        self.timeline = timeline
        self.pending: deque[float] = deque()  # first-sent times of requests waiting for a container
        self.idle: list[Any] = []
        self.containers = 0
        self.rng = random.Random(11)

    def submit(self, first_sent: float) -> None:
        self.pending.append(first_sent)
        if self.idle:
            self.world.sim.wake(self.idle.pop())
        else:
            self.containers += 1
            self.world.sim.spawn(f"broker-{self.containers}", self._container, region=self.region)

    def _container(self) -> None:
        sim, publisher = self.world.sim, self.world.engine.publisher
        while True:
            while self.pending:
                first_sent = self.pending.popleft()
                try:
                    publisher.publish(QUEUE, self.messages)
                except (errors.Throttled, errors.DependencyUnavailable):
                    self.timeline.client_retries[int(sim.now)] += 1
                    sim.at(sim.now + self.rng.uniform(0.1, 0.5), partial(self.submit, first_sent))
                    continue
                self.timeline.delivered[int(sim.now)] += len(self.messages)
                self.timeline.latencies.append((sim.now, sim.now - first_sent))
            self.idle.append(sim.current)
            sim.park()


def _arrivals(world: World, brokers: Brokers, rate: Callable[[float], float], end: float) -> None:
    rng = random.Random(5)
    sim = world.sim

    def arrive() -> None:
        brokers.timeline.offered[int(sim.now)] += BATCH
        brokers.submit(sim.now)
        schedule()

    def schedule() -> None:
        r = rate(sim.now) / BATCH
        nxt = sim.now + (rng.expovariate(r) if r > 0 else 0.1)
        if nxt < end:
            sim.at(nxt, arrive if r > 0 else schedule)

    sim.at(0.0, schedule)


def _coordinator(world: World, timeline: Timeline, end: float, policy: ScalingPolicy) -> None:
    config = CoordinatorConfig(policy=policy, queues=[QUEUE])
    coordinator = Coordinator(world.engine.backend, world.engine.queues, config=config, holder="twin")
    sim = world.sim

    def loop() -> None:
        while sim.now < end:
            try:
                coordinator.run_once()
            except errors.Throttled:  # the Lambda's pass fails; the next tick runs again
                timeline.failed_passes.append(sim.now)
            timeline.shards[int(sim.now)] = len(_queue(world).open_shards)
            sim.sleep(TICK_S)

    sim.spawn("coordinator", loop)


def _queue(world: World) -> Queue:
    return mapdoc.decode(world.mirror.docs[QUEUE])


def _messages() -> list[OutgoingMessage]:
    rng = random.Random(3)
    return [OutgoingMessage(body=rng.randbytes(BODY_BYTES // 2).hex().encode()) for _ in range(BATCH)]


def publish_load(
    rate: Callable[[float], float],
    seconds: float,
    *,
    sample: float = 1.0,
    max_shards: int = 128,
    sdk_attempts: int | None = None,
) -> dict[str, Any]:
    """Offered load `rate(t)` msg/s on one unordered queue for `seconds` of virtual time. With
    `sample` < 1, that share of the load runs against partitions of that share of the capacity, and
    the coordinator's per-shard ceiling is scaled alike: figures are reported at full scale."""
    world = build()
    world.dynamo.capacity_scale = sample
    world.dynamo.max_attempts = sdk_attempts or world.dynamo.max_attempts
    world.engine.queues.create(QUEUE, {"min_shards": 1, "max_shards": max_shards})
    timeline = Timeline()
    brokers = Brokers(world, _messages(), timeline)
    policy = ScalingPolicy(shard_wcu_ceiling=ScalingPolicy().shard_wcu_ceiling * sample)
    _arrivals(world, brokers, lambda t: rate(t) * sample, seconds)
    _coordinator(world, timeline, seconds, policy)
    world.sim.run_until(seconds)
    writes = world.dynamo.write_timeline
    n = int(seconds)
    return {
        "t": list(range(n)),
        "sample": sample,
        "offered": [timeline.offered.get(s, 0) / sample for s in range(n)],
        "delivered": [timeline.delivered.get(s, 0) / sample for s in range(n)],
        "client_retries": [timeline.client_retries.get(s, 0) / sample for s in range(n)],
        "throttled_share": [writes[s][1] / max(1, sum(writes[s])) for s in range(n)],
        "shards": _fill(timeline.shards, n),
        "latencies": timeline.latencies,
        "containers": brokers.containers,
        "failed_passes": timeline.failed_passes,
    }


def _fill(points: dict[int, int], n: int) -> list[int]:
    out, last = [], 1
    for s in range(n):
        last = points.get(s, last)
        out.append(last)
    return out


# --- pullers ----------------------------------------------------------------------------------------------


def pull_load(pullers: int, batch: int, shards: int, seconds: float, backlog: int) -> dict[str, Any]:
    """`pullers` closed-loop pull+ack consumers of one group against a seeded backlog."""
    world = build()
    engine = world.engine
    engine.queues.create(QUEUE, {"min_shards": shards, "max_shards": shards})
    engine.groups.create(QUEUE, "g")
    world.dynamo.unlimited = True  # seeding is set-up, not measured
    messages = _messages()
    for _ in range(backlog // BATCH):
        engine.publisher.publish(QUEUE, messages)
    world.dynamo.unlimited = False
    world.dynamo.stats.reset()
    world.sim.now = 1.0  # the seeded partitions' buckets start full
    acked: defaultdict[int, int] = defaultdict(int)
    latencies: list[float] = []
    failures: defaultdict[str, int] = defaultdict(int)
    rng = random.Random(9)

    def puller() -> None:
        sim = world.sim
        sim.sleep(rng.uniform(0, 0.05))
        while sim.now < seconds:
            t0 = sim.now
            try:
                result = engine.consumer.pull(QUEUE, group="g", batch_size=batch)
                latencies.append(sim.now - t0)
                if result.messages:
                    engine.consumer.ack(QUEUE, [m.lease_id for m in result.messages])
                    acked[int(sim.now * 10)] += len(result.messages)
                else:
                    sim.sleep(0.05)
            except (errors.Throttled, errors.DependencyUnavailable) as exc:
                failures[type(exc).__name__] += 1
                sim.sleep(rng.uniform(0.05, 0.2))

    for i in range(pullers):
        world.sim.spawn(f"puller-{i}", puller)
    world.sim.run_until(seconds)
    stats = world.dynamo.stats
    state_puts = sum(v for (op, kind), v in stats.attempts.items() if op == "PutItem" and kind == "G#")
    conflicts = sum(v for (op, kind), v in stats.conditional_failures.items() if kind == "G#")
    attempts = sum(stats.attempts.values())
    throttles = sum(stats.throttles.values())
    window = seconds - 1.0
    return {
        "pullers": pullers,
        "batch": batch,
        "shards": shards,
        "msgs_per_s": sum(acked.values()) / window,
        "conflict_share": conflicts / max(1, state_puts),
        "throttle_share": throttles / max(1, attempts),
        "pull_p50_ms": percentile(latencies, 50) * 1000,
        "pull_p99_ms": percentile(latencies, 99) * 1000,
        "failed_calls": dict(failures),
        "pulls": len(latencies),
    }
