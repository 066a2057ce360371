"""The twin's drain scenario: a backlog seeded on a few shards, many closed-loop pullers of one group,
and the coordinator on its tick; the figure is how long until every message is acked (consumer-driven
scaling: whatever the layout and the coordinator do to give the pullers room, they do it here).

Only public engine calls (create, publish, pull, ack, `Coordinator.run_once`), so the same function
measures any version of the engine (the baseline of main was measured with it, see docs/performance.md).
"""

from __future__ import annotations

import contextlib
import random
import time
from collections import defaultdict
from typing import Any

from bench.twin.world import World, build, percentile
from sluice import constants as c
from sluice import errors
from sluice.engine.coordinator import Coordinator, CoordinatorConfig
from sluice.models import OutgoingMessage

QUEUE = "drain"
BODY_BYTES = 200
IDLE_FIRST_S, IDLE_MAX_S = 0.05, 2.0  # a puller's wait after an empty pull, doubling


def _messages(batch: int) -> list[OutgoingMessage]:
    rng = random.Random(3)
    return [OutgoingMessage(body=rng.randbytes(BODY_BYTES // 2).hex().encode()) for _ in range(batch)]


def seed(world: World, shards: int, backlog: int) -> None:
    engine = world.engine
    engine.queues.create(QUEUE, {"min_shards": shards, "max_shards": 128})
    engine.groups.create(QUEUE, "g")
    world.dynamo.unlimited = True  # seeding is set-up, not measured
    messages = _messages(100)
    for _ in range(backlog // 100):
        engine.publisher.publish(QUEUE, messages)
    world.dynamo.unlimited = False
    world.dynamo.stats.reset()


def drain(pullers: int, batch: int, shards: int, backlog: int, limit_s: float) -> dict[str, Any]:
    """Seconds (virtual) from the first pull until all `backlog` messages are acked."""
    started = time.time()
    world = build()
    seed(world, shards, backlog)
    sim = world.sim
    sim.now = 1.0  # the seeded partitions' buckets start full
    t0 = sim.now
    engine = world.engine
    done: dict[str, float | None] = {"acked": 0, "at": None}
    per_s: defaultdict[int, int] = defaultdict(int)
    latencies: list[float] = []
    failures: defaultdict[str, int] = defaultdict(int)
    rng = random.Random(9)

    def finished() -> bool:
        return done["at"] is not None or sim.now - t0 >= limit_s

    def puller() -> None:
        sim.sleep(rng.uniform(0, 0.05))
        idle = IDLE_FIRST_S
        while not finished():
            start = sim.now
            try:
                result = engine.consumer.pull(QUEUE, group="g", batch_size=batch)
                latencies.append(sim.now - start)
                if not result.messages:  # an SDK-like client backs off while nothing comes
                    sim.sleep(idle)
                    idle = min(idle * 2, IDLE_MAX_S)
                    continue
                idle = IDLE_FIRST_S
                acked = engine.consumer.ack(QUEUE, [m.lease_id for m in result.messages]).ack_count
                total = (done["acked"] or 0) + acked  # removed from the backlog: a redelivery counts once
                done["acked"] = total
                per_s[int(sim.now - t0)] += acked
                if total >= backlog and done["at"] is None:
                    done["at"] = sim.now - t0
            except (errors.Throttled, errors.DependencyUnavailable) as exc:
                failures[type(exc).__name__] += 1
                sim.sleep(rng.uniform(0.05, 0.2))

    config = CoordinatorConfig(queues=[QUEUE])
    coordinator = Coordinator(engine.backend, engine.queues, config=config, holder="twin")

    def coordinate() -> None:
        while not finished():
            with contextlib.suppress(errors.Throttled):
                coordinator.run_once()
            sim.sleep(c.DEFAULT_COORDINATOR_TICK_SECONDS)

    sim.spawn("coordinator", coordinate)
    for i in range(pullers):
        sim.spawn(f"puller-{i}", puller)
    while not finished():
        sim.run_until(sim.now + 0.5)
    stats = world.dynamo.stats
    state_writes = sum(
        v for (op, kind), v in stats.attempts.items() if op in ("PutItem", "UpdateItem") and kind == "G#"
    )
    conflicts = sum(v for (_op, kind), v in stats.conditional_failures.items() if kind == "G#")
    seconds = done["at"] if done["at"] is not None else None
    return {
        "pullers": pullers,
        "batch": batch,
        "shards": shards,
        "backlog": backlog,
        "drain_s": seconds,
        "acked": done["acked"],
        "limit_s": limit_s,
        "msgs_per_s": [per_s.get(s, 0) for s in range(int(sim.now - t0) + 1)],
        "conflict_share": conflicts / max(1, state_writes),
        "pull_p50_ms": percentile(latencies, 50) * 1000,
        "pull_p99_ms": percentile(latencies, 99) * 1000,
        "failed_calls": dict(failures),
        "wall_s": time.time() - started,
    }
