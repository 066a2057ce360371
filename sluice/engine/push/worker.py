"""The push worker loop: own a slot, then pull a batch → call the target → ack, until the backlog is
empty or the invocation's time runs out. A delivered batch's acks ride on the next pull (one state write
for both, as `SluiceClient.iterate` does): the last batch's on the pull that finds the backlog empty, or
in an ack of their own when the worker stops for its time or its slot.

Targets are plain callables (`sluice.adapters.targets` builds them: webhook, Lambda, in-process
Python): a target that returns delivers the batch, one that raises fails it, and the batch is retried
(then dead-lettered after `max_retries` deliveries, as pull consumers' messages are).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sluice.codec import delivery_to_native
from sluice.constants import LAMBDA_SYNC_PAYLOAD_BYTES
from sluice.engine.backend import Backend
from sluice.engine.consume import Consumer, RetryRequest
from sluice.engine.push.config import ConsumerStore, PushConsumer
from sluice.engine.push.slots import SLOT_TTL_MS, WorkerSlots
from sluice.engine.queues import QueueRegistry
from sluice.models import MAX_REQUEST_BYTES, Delivery

log = logging.getLogger(__name__)

STOP_MARGIN_MS = 5_000  # stop taking batches this long before the invocation's deadline
# A pushed batch travels as one Lambda invocation payload (6 MB synchronous) or one webhook request: it
# is cut at the pulls' 5 MB budget. The engine always admits a pull's first message, so another pull is
# made only while a largest message (1 MiB body, base64 and escaping) still fits.
PUSH_PAYLOAD_BYTES = LAMBDA_SYNC_PAYLOAD_BYTES - 1_000_000
LARGEST_PUSHED_MESSAGE_BYTES = 2 * MAX_REQUEST_BYTES

Target = Callable[[dict[str, Any]], None]


@dataclass
class WorkerReport:
    queue: str
    consumer_id: str
    slot: int
    batches: int = 0
    delivered: int = 0
    failed: int = 0
    stopped: str = ""


class Pusher:
    """Runs push workers over the parts they need: queue documents, consumer configs, slots, and the
    pull consumer that leases and acks."""

    def __init__(self, backend: Backend, queues: QueueRegistry, consumer: Consumer) -> None:
        self.clock = backend.clock
        self.queues = queues
        self.consumer = consumer
        self.configs = ConsumerStore(backend)
        self.slots = WorkerSlots(backend)

    def run(
        self,
        queue_name: str,
        consumer_id: str,
        slot: int,
        target_for: Callable[[PushConsumer], Target],
        remaining_ms: Callable[[], int],
    ) -> WorkerReport:
        """Own `slot`, then pull → deliver → ack until the group's backlog is empty or time runs out."""
        report = WorkerReport(queue_name, consumer_id, slot)
        clock = self.clock
        queue = self.queues.get(queue_name)
        consumer = self.configs.get(queue, consumer_id)
        owned = self.slots.slot(queue, consumer.id, slot, uuid.uuid4().hex)
        if not owned.take():
            report.stopped = "slot held by another worker"
            return report
        target = target_for(consumer)
        renewed = clock()
        delivered: list[str] = []  # lease ids of the last delivered batch, acked by the next pull
        try:
            while True:
                if remaining_ms() < STOP_MARGIN_MS:
                    report.stopped = "invocation time running out"
                    break
                if clock() - renewed > SLOT_TTL_MS // 2:
                    if not owned.renew():
                        report.stopped = "slot lost"
                        break
                    renewed = clock()
                batch = self.collect(queue_name, consumer, remaining_ms, acks=delivered)
                if not batch:
                    report.stopped = "backlog empty"
                    break
                report.batches += 1
                payload = {
                    "queue": queue_name,
                    "consumer_id": consumer.id,
                    "messages": [delivery_to_native(d) for d in batch],
                }
                try:
                    target(payload)
                except Exception as exc:
                    report.failed += len(batch)
                    log.warning(
                        "push consumer %s: target failed (%s); retrying %d", consumer.id, exc, len(batch)
                    )
                    self.consumer.ack(
                        queue_name,
                        [],
                        [RetryRequest(d.lease_id, consumer.retry_delay_seconds) for d in batch],
                        max_retries=consumer.max_retries,
                    )
                    continue
                delivered = [d.lease_id for d in batch]
                report.delivered += len(batch)
        finally:
            try:
                if delivered:
                    self.consumer.ack(queue_name, delivered, max_retries=consumer.max_retries)
            finally:
                owned.release()
        return report

    def collect(
        self,
        queue_name: str,
        consumer: PushConsumer,
        remaining_ms: Callable[[], int],
        acks: list[str] | None = None,
    ) -> list[Delivery]:
        """Up to max_batch_size messages; a partial batch waits up to max_batch_timeout_ms to fill.
        `acks` (the last delivered batch's lease ids) ride on the first pull, and the list is emptied
        once that pull answered (a pull that raised leaves them to the caller's ack)."""
        batch: list[Delivery] = []
        used = 0
        clock = self.clock
        deadline = clock.monotonic() + consumer.max_batch_timeout_ms / 1000
        while (
            len(batch) < consumer.max_batch_size and used <= PUSH_PAYLOAD_BYTES - LARGEST_PUSHED_MESSAGE_BYTES
        ):
            result = self.consumer.pull(
                queue_name,
                group=consumer.consumer_group,
                batch_size=consumer.max_batch_size - len(batch),
                size_of=pushed_size,
                max_bytes=PUSH_PAYLOAD_BYTES - used,
                acks=list(acks) if acks else None,
            )
            if acks:
                acks.clear()
            batch += result.messages
            used += sum(pushed_size(d) for d in result.messages)
            if not result.messages and not batch and result.backlog_exact:
                # Proven empty (every shard read): the worker stops; the coordinator starts one when needed.
                return batch
            if len(batch) >= consumer.max_batch_size or clock.monotonic() >= deadline:
                break
            if remaining_ms() < STOP_MARGIN_MS:
                break
            if not result.messages:
                clock.sleep(0.05)
        return batch


def pushed_size(d: Delivery) -> int:
    """Bytes one message adds to a pushed payload."""
    return len(json.dumps(delivery_to_native(d), separators=(",", ":"))) + 1
