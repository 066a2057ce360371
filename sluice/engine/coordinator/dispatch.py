"""Work a pass starts elsewhere: push workers in proportion to each consumer's backlog, and the shard
work that `sluice.engine.workplan.plan` decides. Nothing is started when no function is wired."""

from __future__ import annotations

from typing import Any

from sluice.engine.backend import Backend
from sluice.engine.coordinator.config import CoordinatorConfig, Invoker
from sluice.engine.push import ConsumerStore, WorkerSlots, worker_count
from sluice.engine.shardstate import ShardRead
from sluice.engine.workplan import ShardHead, plan
from sluice.events import PushWorker, PushWorkerEvent, ShardWorkEvent
from sluice.models import Queue


class Dispatcher:
    def __init__(self, backend: Backend, invoker: Invoker | None, config: CoordinatorConfig) -> None:
        self.invoker = invoker
        self.config = config
        self.consumers = ConsumerStore(backend)
        self.slots = WorkerSlots(backend)

    def start_push_workers(self, queue: Queue, backlog: dict[str, int], now: int) -> int:
        """Start the workers each push consumer's backlog wants, on slots nobody owns; how many."""
        if self.invoker is None or not self.config.consumer_function:
            return 0
        started = 0
        for consumer in self.consumers.list(queue):
            if consumer.consumer_group not in queue.groups:
                continue
            want = worker_count(
                backlog.get(consumer.consumer_group, 0), consumer, self.config.push_batches_per_worker
            )
            if want <= 0:
                continue
            held = self.slots.held(queue, consumer.id, now)
            for slot in range(want):
                if slot in held:
                    continue
                event = PushWorkerEvent(push=PushWorker(queue=queue.name, consumer_id=consumer.id, slot=slot))
                self.invoker.invoke_async(self.config.consumer_function, event.to_payload())
                started += 1
        return started

    def plan_shard_work(
        self, queue: Queue, reads: list[ShardRead], cadence: dict[str, Any], now: int
    ) -> list[ShardWorkEvent]:
        """The shard-work policy's events for this pass (none when no shard function is wired); the
        policy marks in `cadence` when each kind of work last ran."""
        if self.invoker is None or not self.config.shard_function:
            return []
        states = {s.id: s.state for s in queue.shards}
        heads = [
            ShardHead(r.shard.id, states[r.shard.id], r.head.next, r.head.flushed)
            for r in reads
            if states.get(r.shard.id) in ("open", "sealed")
        ]
        return plan(queue, heads, cadence, now, self.config.work)

    def send_shard_work(self, payloads: list[dict[str, Any]]) -> None:
        if self.invoker is not None and self.config.shard_function:
            for payload in payloads:
                self.invoker.invoke_async(self.config.shard_function, payload)
