"""The twin's scenarios: the real publish, pull/ack and coordinator code under simulated load.

- Producers are an open-loop Poisson stream of send requests (`BATCH` messages of `BODY_BYTES`);
  each request is served by a broker container (one actor, reused when idle, a new one when all are
  busy: Lambda's scale-out). A request the broker answers with a throttle or an outage is sent
  again after the answer's Retry-After (1 s for a throttle), as the Sluice SDK does.
- Each container has its own engine (`World.container`): it reads the queue's document from the twin's
  SSM once and then learns of map changes from the HEAD items, as in Lambda.
- The coordinator is the Lambda function: the minute rule invokes it every `RULE_S`, and a broker whose
  shards throttle wakes it (`sluice.engine.wake`); each invocation starts `ASYNC_START_S` after it is
  sent and runs the real `Coordinator.run` (one pass at rest, a pass every tick while a queue is busy,
  for at most `RULE_S` - tick). A run that finds the pass owned stands down, as deployed.
- Pullers are closed loops: pull(batch), ack what came, again.
"""

from __future__ import annotations

import contextlib
import math
import random
from collections import defaultdict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from bench.twin.gateway import Gateway, TooManyRequests
from bench.twin.lambdas import ACCOUNT_CONCURRENCY, ExecutionRefused, Executions, consume_usd_per_million
from bench.twin.world import COORDINATOR_FUNCTION, World, build, percentile
from sluice import constants as c
from sluice import errors
from sluice.client import backoff_seconds
from sluice.engine import keys
from sluice.engine.coordinator import Coordinator, CoordinatorConfig
from sluice.engine.scaling import ScalingPolicy
from sluice.engine.store import ShardAddress
from sluice.local.template import ACCOUNT_THROTTLE
from sluice.models import OutgoingMessage, Queue

BATCH = 100
BODY_BYTES = 200
TICK_S = c.DEFAULT_COORDINATOR_TICK_SECONDS
RULE_S = c.COORDINATOR_SCHEDULE_MINUTES * 60
# Lambda's asynchronous invocations are queued and then run; AWS publishes no latency for that hop.
# 0.25 s is a conservative figure for an event invoke of a warm function.
ASYNC_START_S = 0.25
QUEUE = "twin"
PRODUCER_RATE = 2_000  # msg/s one live producer sends: 20 sends of BATCH a second (a send takes ~9 ms)
DRAIN_LIMIT_S = 60.0  # a live run's pullers drain for at most this long after the window
CONSUMER, BROKER = c.FN_CONSUMER, c.FN_BROKER
SDK_ATTEMPTS = 6  # SluiceClient's default max_attempts


@dataclass
class Timeline:
    offered: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))  # msgs first sent
    delivered: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))  # msgs stored
    client_retries: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))
    shards: dict[int, int] = field(default_factory=dict)  # open shards in the control item, by second
    latencies: list[tuple[float, float]] = field(default_factory=list)  # (done at, seconds)
    failed_passes: list[float] = field(default_factory=list)  # coordinator passes a queue failed in
    runs: list[tuple[float, str, int]] = field(default_factory=list)  # (start, why, passes) per invocation
    refused: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))  # sends, by refuser


class Brokers:
    """Lambda-like: one container per concurrent request; idle containers are reused (the most recent,
    or with `spread` any of them: Lambda promises no affinity). With `lambdas`, each send is a request
    through API Gateway and an invocation of the broker, refused past their quotas (then sent again
    after its Retry-After, as any throttled send)."""

    def __init__(
        self,
        world: World,
        messages: list[OutgoingMessage],
        timeline: Timeline,
        region: str | None = None,
        spread: bool = False,
        lambdas: Executions | None = None,
    ) -> None:
        self.world = world
        self.lambdas = lambdas
        self.region = region  # where the containers run (None: the only region)
        self.messages = messages
        self.timeline = timeline
        self.pending: deque[float] = deque()  # first-sent times of requests waiting for a container
        self.idle: list[Any] = []
        self.containers = 0
        self.rng = random.Random(11)
        self.spread = spread

    def warm(self, count: int, over_s: float) -> None:
        """`count` containers started evenly over `over_s` (a fleet a previous peak left warm): each reads
        the queue's document once, as its first request would, then waits for requests."""
        sim = self.world.sim

        def container() -> None:
            self.world.container().directory.get(QUEUE)
            self.idle.append(sim.current)
            sim.park()
            self._container()

        for i in range(count):
            self.containers += 1
            sim.spawn(f"broker-{self.containers}", container, at=sim.now + over_s * i / max(1, count))

    def submit(self, first_sent: float) -> None:
        self.pending.append(first_sent)
        if self.idle:
            pick = self.rng.randrange(len(self.idle)) if self.spread else len(self.idle) - 1
            self.idle[pick], self.idle[-1] = self.idle[-1], self.idle[pick]
            self.world.sim.wake(self.idle.pop())
        else:
            self.containers += 1
            self.world.sim.spawn(f"broker-{self.containers}", self._container, region=self.region)

    def _container(self) -> None:
        sim, publisher = self.world.sim, self.world.container().publisher
        while True:
            while self.pending:
                first_sent = self.pending.popleft()
                try:
                    with self.lambdas.run(BROKER) if self.lambdas else contextlib.nullcontext():
                        publisher.publish(QUEUE, self.messages)
                except (errors.Throttled, errors.DependencyUnavailable) as exc:
                    if isinstance(exc, TooManyRequests | ExecutionRefused):
                        self.timeline.refused[type(exc).__name__] += 1
                    # The Sluice SDK retries after the answer's Retry-After (sluice/client.py).
                    self.timeline.client_retries[int(sim.now)] += 1
                    sim.at(sim.now + exc.retry_after_seconds, partial(self.submit, first_sent))
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
        # Inter-arrival gaps are exponential, so memoryless: a gap longer than 0.1 s is drawn again then,
        # which follows a rate that changed meanwhile (a step) without changing a constant one.
        r = rate(sim.now) / BATCH
        gap = rng.expovariate(r) if r > 0 else 0.1
        if sim.now + min(gap, 0.1) < end:
            sim.at(sim.now + min(gap, 0.1), arrive if gap <= 0.1 else schedule)

    sim.at(0.0, schedule)


class CoordinatorFunction:
    """The coordinator Lambda: started by the minute rule and by brokers' wakes (`invoke_async`, the
    engine's `Invoker`), one container per concurrent run, warm ones reused."""

    def __init__(self, world: World, timeline: Timeline, end: float, policy: ScalingPolicy) -> None:
        self.world = world
        self.timeline = timeline
        self.end = end
        self.config = CoordinatorConfig(
            policy=policy, queues=[QUEUE], period_s=TICK_S, loop_s=RULE_S - TICK_S
        )
        self.warm: list[Coordinator] = []
        self.started = 0
        self.wakes = 0  # invocations a broker started

    def schedule(self, first_at: float) -> None:
        sim = self.world.sim

        def fire(at: float) -> None:
            self.invoke_async(COORDINATOR_FUNCTION, {"kind": "coordinator.run"})
            if at + RULE_S < self.end:
                sim.at(at + RULE_S, partial(fire, at + RULE_S))

        sim.at(first_at, partial(fire, first_at))

    def invoke_async(self, function: str, event: dict[str, Any]) -> None:
        why = "wake" if event.get("woken_by") else "rule"
        sim = self.world.sim
        self.started += 1
        self.wakes += why == "wake"
        sim.spawn(f"coordinator-{self.started}", partial(self._run, why), at=sim.now + ASYNC_START_S)

    def _run(self, why: str) -> None:
        sim = self.world.sim
        coordinator = (
            self.warm.pop()
            if self.warm
            else Coordinator(self.world.engine.backend, self.world.container().queues, config=self.config)
        )
        started = sim.now
        reports = coordinator.run(self.config.loop_s)  # its clock is the twin's (virtual time)
        self.timeline.failed_passes += [started for r in reports if r.failed]
        self.timeline.runs.append((started, why, sum(r.acted for r in reports)))
        self.warm.append(coordinator)


def _sample_shards(world: World, timeline: Timeline, end: float) -> None:
    """Open shards in the control item at every second (outside the model: no calls, no latency)."""
    sim = world.sim

    def sample(at: int) -> None:
        timeline.shards[at] = len(world.queue(QUEUE).open_shards)
        if at + 1 < end:
            sim.at(at + 1, partial(sample, at + 1))

    sim.at(0.0, partial(sample, 0))


def _queue(world: World) -> Queue:
    return world.queue(QUEUE)


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
    first_rule_at: float = 30.0,
    fleet: int = 0,
    warm_s: float = 0.0,
    lambda_quota: int = ACCOUNT_CONCURRENCY,
    api_rps: float = ACCOUNT_THROTTLE.rate,
) -> dict[str, Any]:
    """Offered load `rate(t)` msg/s on one unordered queue for `seconds` of virtual time. With
    `sample` < 1, that share of the load runs against partitions of that share of the capacity (and
    that share of SSM's read quota), and the coordinator's per-shard ceiling is scaled alike: figures
    are reported at full scale. The minute rule first fires at `first_rule_at`. `fleet` (full scale):
    that many broker containers warmed over the first `warm_s` seconds, each request then served by any
    idle one. Each send is a request through API Gateway (its account quota `api_rps`, the route
    throttle set to it) and an invocation of the broker (the account's concurrency `lambda_quota`, 10
    invocations a second per unit of it): the defaults are AWS's, and a scenario past them names the
    raised quotas it takes."""
    world = build(sample=sample)
    world.dynamo.max_attempts = sdk_attempts or world.dynamo.max_attempts
    world.engine.queues.create(QUEUE, {"min_shards": 1, "max_shards": max_shards})
    timeline = Timeline()
    policy = ScalingPolicy(shard_wcu_ceiling=ScalingPolicy().shard_wcu_ceiling * sample)
    coordinator = CoordinatorFunction(world, timeline, seconds, policy)
    world.invoker = coordinator
    lambdas = Executions(
        lambda: world.sim.now,
        world.sim.sleep,
        quota=max(1, round(lambda_quota * sample)),
        scale=sample,
        gateway=_gateway(lambda: world.sim.now, api_rps, sample),
    )
    brokers = Brokers(world, _messages(), timeline, spread=bool(fleet), lambdas=lambdas)
    if fleet:
        brokers.warm(round(fleet * sample), warm_s)
    _arrivals(world, brokers, lambda t: rate(t) * sample, seconds)
    coordinator.schedule(first_rule_at)
    _sample_shards(world, timeline, seconds)
    world.sim.run_until(seconds)
    writes = world.dynamo.write_timeline
    ssm = world.ssm.stats
    n = int(seconds)
    return {
        "t": list(range(n)),
        "sample": sample,
        "offered": [timeline.offered.get(s, 0) / sample for s in range(n)],
        "delivered": [timeline.delivered.get(s, 0) / sample for s in range(n)],
        "client_retries": [timeline.client_retries.get(s, 0) / sample for s in range(n)],
        "throttled_share": [writes[s][1] / max(1, sum(writes[s])) for s in range(n)],
        "write_attempts": [sum(writes[s]) / sample for s in range(n)],
        "throttled_attempts": [writes[s][1] / sample for s in range(n)],
        "shards": _fill(timeline.shards, n),
        "latencies": timeline.latencies,
        "containers": brokers.containers,
        "failed_passes": timeline.failed_passes,
        "coordinator_runs": timeline.runs,
        # SSM at full scale: read attempts (GetParameter/GetParameters/GetParametersByPath) per second
        # against the 40 TPS quota, and how many of them it refused.
        "ssm_reads": [ssm.reads.get(s, 0) / sample for s in range(n)],
        "ssm_read_throttles": [ssm.read_throttles.get(s, 0) / sample for s in range(n)],
        "ssm_puts": [ssm.puts.get(s, 0) for s in range(n)],
        "ssm_put_throttles": [ssm.put_throttles.get(s, 0) for s in range(n)],
        "ssm_largest_value": ssm.largest_value,
        "map_bytes": len(world.engine.queues.mirror_document(world.queue(QUEUE))),
        "wakes": coordinator.wakes,
        "lambda_quota": lambda_quota,
        "api_rps": api_rps,
        "refused": {k: v / sample for k, v in timeline.refused.items()},  # sends answered 429 / 500
        "peak_executions": lambdas.peak_total / sample,
        "peak_table_units": world.dynamo.peak_table_units(),  # (read, write) a second, one table
    }


def _gateway(clock: Callable[[], float], api_rps: float, sample: float = 1.0) -> Gateway:
    """API Gateway at an account quota of `api_rps` (AWS's default, or a raised one), the route
    throttle set to it (`bench.twin.gateway`)."""
    return Gateway(clock, api_rps, scale=sample)


def _fill(points: dict[int, int], n: int) -> list[int]:
    out, last = [], 1
    for s in range(n):
        last = points.get(s, last)
        out.append(last)
    return out


# --- pullers ----------------------------------------------------------------------------------------------


def _retry_pause(refusal: errors.Throttled | errors.DependencyUnavailable, rng: random.Random) -> float:
    """How long the SDK waits before it sends a refused pull again: the engine's answer's `Retry-After`
    (a puller that came back after 50-200 ms instead kept 1,000 pullers on 4 shards from ever
    draining, docs/performance.md "Stop 62"); API Gateway's 429 and its 500 for an invocation Lambda
    refused carry none, so the SDK's first backoff."""
    if isinstance(refusal, (TooManyRequests, ExecutionRefused)):
        return backoff_seconds(1, rng.uniform)
    return refusal.retry_after_seconds


def pull_load(
    pullers: int,
    batch: int,
    shards: int,
    seconds: float,
    backlog: int,
    warmup: float = 1.0,
    *,
    think_s: float = 0.0,
    carry_acks: bool = False,
    publish_rate: float = 0.0,
    wait_ms: int = 0,
    lambda_quota: int = ACCOUNT_CONCURRENCY,
    reserved: Mapping[str, int] | None = None,
    memory_mb: Mapping[str, int] | None = None,
    stale_reads: bool = False,
    api_rps: float = ACCOUNT_THROTTLE.rate,
    engine_seed: int = 1,
) -> dict[str, Any]:
    """`pullers` closed-loop pull+ack consumers of one group against a seeded backlog: `warmup` virtual
    seconds for the lanes to widen, then `seconds` measured (statistics reset at the start).
    `think_s`: each puller works that long on a batch before it acks (a consumer's processing: the
    pullers then ask for what they can handle, not for what the partitions can give). `carry_acks`: a
    batch's acks ride on the puller's next pull (`acks=`, one state write for both) instead of an ack
    call. `left_share`: the share of the backlog not acked when the window ended (near 0: the lanes
    ran dry inside it, and the row measured a drain's tail, not pullers against a backlog).
    `publish_rate`: producers send that many msg/s (paced sends of BATCH, each producer a container of
    its own) through warm-up and window while the pullers pull, a live stream; when the window ends they
    stop and the pullers drain until each gets an exact empty answer. `unacked_at_rest` (messages sent
    and never acked) and `acked_again` (acks of a message acked before) are then 0, or a message was
    lost or delivered twice; `delivery_p50_ms` / `delivery_p99_ms`: from each window send's start to
    the first lease of its messages. Write and read units per message are the pullers' own. `wait_ms`: each
    pull long-polls that long (the SDK's `iterate` waits 1 s). `lambda_quota`: the account's concurrent
    executions (10 invocations a second per unit of it); `api_rps`: API Gateway's requests a second
    (its account quota, the route throttle set to it, a burst of half of it: `bench.twin.gateway`);
    `reserved`: function -> executions reserved for it (the stack's opt-in); `memory_mb`:
    function -> its memory where not the stack's default (`-c consumer_memory_mb`): its handler CPU's
    share of a vCPU and its billed GB-s. `stale_reads`: eventually consistent reads may answer from a copy
    up to a second behind (bench/twin/dynamo.py). `engine_seed`: the engine draws shards, lanes and
    jitter from the global `random`; seeded, a row is repeatable: the same seed gives the same figures
    under any machine load (two runs of the live 1,000-puller row ended differently unseeded,
    docs/performance.md "Stop 62")."""
    random.seed(engine_seed)
    world = build(stale_reads=stale_reads)
    engine = world.engine
    queue = engine.queues.create(QUEUE, {"min_shards": shards, "max_shards": shards})
    engine.groups.create(QUEUE, "g")
    world.dynamo.unlimited = True  # seeding is set-up, not measured
    messages = _messages()
    for _ in range(backlog // BATCH):
        engine.publisher.publish(QUEUE, messages)
    world.dynamo.unlimited = False
    world.dynamo.stats.reset()
    sim = world.sim
    sim.now = 1.0  # the seeded partitions' buckets start full
    start, end = sim.now + warmup, sim.now + warmup + seconds
    acked: defaultdict[int, int] = defaultdict(int)
    settled = 0  # every ack since the first pull, warm-up included: what is left of the backlog
    latencies: list[float] = []
    leased = empty = 0  # messages the window's pulls leased, and how many of them leased nothing
    failures: defaultdict[str, int] = defaultdict(int)
    rng = random.Random(9)
    live = Live(publish_rate, end)
    lambdas = Executions(
        lambda: sim.now,
        sim.sleep,
        (start, end),
        quota=lambda_quota,
        reserved=reserved or {},
        memory_mb=memory_mb or {},
        gateway=_gateway(lambda: sim.now, api_rps),
    )

    def puller() -> None:
        nonlocal settled, leased, empty
        sim.sleep(rng.uniform(0, 0.05))
        held: list[str] = []  # with `carry_acks`: the last batch's lease ids, acked by the next pull
        held_ids: list[str] = []
        while sim.now < end or live.producers:  # a live run's pullers drain after the window
            t0 = sim.now
            try:
                consumer = world.container().consumer  # one Lambda container per puller, as deployed
                with lambdas.run(CONSUMER):
                    result = consumer.pull(
                        QUEUE,
                        group="g",
                        batch_size=batch,
                        wait_ms=wait_ms,
                        acks=held if carry_acks and held else None,
                    )
                    carried = result.ack.ack_count if result.ack else 0
                    lambdas.compute("pull", len(result.messages), acks=carried)
                settled += carried
                live.acked(held_ids, carried)
                if start <= t0 < end:
                    latencies.append(sim.now - t0)
                    leased += len(result.messages)
                    empty += not result.messages
                    acked[int(sim.now * 10)] += carried
                held = [m.lease_id for m in result.messages]
                held_ids = [m.id for m in result.messages]
                live.leased(held_ids, sim.now)
                if result.messages:
                    sim.sleep(think_s)
                    if not carry_acks:
                        done = ack(consumer, held)
                        settled += done
                        live.acked(held_ids, done)
                        held, held_ids = [], []
                        if start <= sim.now < end:
                            acked[int(sim.now * 10)] += done
                elif sim.now >= end and result.backlog_exact and not result.message_backlog_count:
                    return  # drained: an exact answer says the group holds nothing
                else:
                    sim.sleep(0.05)
            except (errors.Throttled, errors.DependencyUnavailable) as exc:
                if start <= t0 < end:  # as the latencies: pulls made in the window
                    failures[type(exc).__name__] += 1
                sim.sleep(_retry_pause(exc, rng))

    def ack(consumer: Any, held: list[str]) -> int:
        """An ack call, sent again after a throttle as the SDK does (`SDK_ATTEMPTS`, backing off)."""
        for attempt in range(1, SDK_ATTEMPTS + 1):
            try:
                with lambdas.run(CONSUMER):
                    done = consumer.ack(QUEUE, held).ack_count
                    lambdas.compute("ack", len(held))
                return done
            except (errors.Throttled, errors.DependencyUnavailable):
                if attempt == SDK_ATTEMPTS:
                    raise
                sim.sleep(backoff_seconds(attempt, rng.uniform))
        raise AssertionError("unreachable")

    def producer(every: float) -> None:
        publisher = world.container().publisher
        sim.sleep(rng.uniform(0, every))
        while sim.now < end:
            t0 = sim.now
            with contextlib.suppress(errors.Throttled, errors.DependencyUnavailable), lambdas.run(BROKER):
                sent = publisher.publish(QUEUE, messages)  # a refused send is not sent again: not counted
                lambdas.compute("send", len(messages))
                live.sent(sent.message_ids, t0, counted=start <= t0)
            sim.sleep(max(0.0, every - (sim.now - t0)))

    for i in range(live.producers):
        sim.spawn(f"producer-{i}", partial(producer, live.producers * BATCH / publish_rate))
    sim.at(start, world.dynamo.stats.reset)
    for i in range(pullers):
        sim.spawn(f"puller-{i}", puller)
    sim.run_until(end)
    stats = world.dynamo.stats
    state_writes = sum(
        v
        for (op, kind), v in stats.attempts.items()
        if op in ("PutItem", "UpdateItem", "TransactWriteItems") and kind == "G#"
    )
    conflicts = sum(v for (_op, kind), v in stats.conditional_failures.items() if kind == "G#")
    attempts = sum(stats.attempts.values())
    throttles = sum(stats.throttles.values())
    total = sum(acked.values())
    world.dynamo.unlimited = True  # reading the lane counts is not measured
    lanes = [
        engine.backend.store.read_lanes(ShardAddress.of(queue, s), "g", [], head=False).cursor
        for s in queue.shards
    ]
    world.dynamo.unlimited = False
    lane0s = [
        part.items.get(keys.group_state_sk("g"), {})
        for table in world.dynamo.tables.values()
        for part in table.values()
    ]
    out = {
        "pullers": pullers,
        "batch": batch,
        "shards": shards,
        "backlog": backlog,
        "think_s": think_s,
        "carry_acks": carry_acks,
        "publish_rate": publish_rate,
        "wait_ms": wait_ms,
        "sent_per_s": live.window_sent / seconds,
        "msgs_per_s": total / seconds,
        "mean_batch": leased / max(1, len(latencies) - empty),  # of the pulls that leased something
        "empty_share": empty / max(1, len(latencies)),
        "conflict_share": conflicts / max(1, state_writes),
        "throttle_share": throttles / max(1, attempts),
        "wcu_per_msg": stats.wcu_by["puller"] / max(1, total),
        "rcu_per_msg": stats.rcu_by["puller"] / max(1, total),
        "pull_p50_ms": percentile(latencies, 50) * 1000,
        "pull_p99_ms": percentile(latencies, 99) * 1000,
        "lanes": max((c.lanes for c in lanes if c is not None), default=1),
        # Striped splits cut (their epochs, on lane 0's items), and how many shards are striped at rest.
        "stripe_epochs": sum(int(item.get(keys.CURSOR_EPOCH, {}).get("N", 0)) for item in lane0s),
        "striped_at_rest": sum(1 for c in lanes if c is not None and c.stripe),
        "failed_calls": dict(failures),
        "throttled": {f"{op} {kind}": n for (op, kind), n in stats.throttles.most_common(6)},
        "pulls": len(latencies),
        "left_share": max(0.0, backlog - settled) / max(1, backlog),
        # Lambda executions: the most at once, and the consumer's (pulls and acks) priced with the
        # pullers' capacity units per million messages acked.
        "peak_executions": dict(lambdas.peak),
        "peak_executions_total": lambdas.peak_total,
        "refused_executions": dict(lambdas.refused),
        "refused_by_gateway": dict(lambdas.refused_by_gateway),
        "peak_table_units": world.dynamo.peak_table_units(),  # (read, write) a second, one table
        "consumer_gb_s_per_msg": lambdas.gb_seconds[CONSUMER] / max(1, total),
        "consume_usd_per_m": consume_usd_per_million(lambdas, stats, total),
    }
    if live.producers:
        sim.run_until(end + DRAIN_LIMIT_S)  # the pullers drain, each until an exact empty answer
        out |= {
            "unacked_at_rest": live.unacked(),
            "acked_again": live.acked_again,
            "delivery_p50_ms": percentile(live.delivery_s, 50) * 1000,
            "delivery_p99_ms": percentile(live.delivery_s, 99) * 1000,
        }
    return out


@dataclass
class Live:
    """The producers of a live `pull_load` and what became of their messages."""

    rate: float
    end: float
    window_sent: int = 0
    acked_again: int = 0
    sent_total: int = 0
    done: set[str] = field(default_factory=set)  # message ids acked
    # Send call's start of each message sent in the window, until its first lease; then the time between
    # the two (a live stream's latency as its consumers see it: a pull's own latency also counts the
    # long-poll's wait for messages not sent yet).
    sent_at: dict[str, float] = field(default_factory=dict)
    delivery_s: list[float] = field(default_factory=list)

    @property
    def producers(self) -> int:
        return math.ceil(self.rate / PRODUCER_RATE) if self.rate else 0

    def sent(self, ids: list[str], at: float, *, counted: bool) -> None:
        self.sent_total += len(ids)
        if counted:
            self.window_sent += len(ids)
            self.sent_at.update((i, at) for i in ids)

    def leased(self, ids: list[str], now: float) -> None:
        """A pull leased `ids`: the first lease of a message sent in the window is its delivery."""
        for i in ids:
            at = self.sent_at.pop(i, None)
            if at is not None:
                self.delivery_s.append(now - at)

    def acked(self, ids: list[str], count: int) -> None:
        """A pull's or an ack call's ack of `ids`: `count` of them acked (fewer: leases ran out)."""
        if count == len(ids):
            self.acked_again += sum(1 for i in ids if i in self.done)
            self.done.update(ids)

    def unacked(self) -> int:
        return self.sent_total - len(self.done)
