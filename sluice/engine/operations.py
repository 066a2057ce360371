"""Queue operations: purge, redrive from a dead letter queue, and metrics.

Purge writes a floor on each shard's HEAD item (`floor = next`, one UpdateItem per shard). Every
reader applies it when it reads the HEAD with the group state (`sluice.engine.shardstate`): the read level
jumps to the floor and pending entries below it — leased, delayed or waiting for a retry — are
forgotten. So purge is O(shards), covers every group, including groups created later with
`earliest`, and the purged items simply expire by TTL.
"""

from __future__ import annotations

import json
from typing import Any

from sluice import errors, faults
from sluice.constants import LAMBDA_SYNC_PAYLOAD_BYTES
from sluice.engine import keys
from sluice.engine.backend import Backend
from sluice.engine.consume import Consumer
from sluice.engine.deadletter import SOURCE_ATTRIBUTE
from sluice.engine.publish import Publisher, request_batches
from sluice.engine.queues import QueueRegistry
from sluice.engine.regions import by_region
from sluice.engine.shardstate import ShardRead, ShardStateReader
from sluice.engine.store import ShardAddress
from sluice.models import DEFAULT_GROUP, MAX_BATCH_MESSAGES, OutgoingMessage, Queue, Shard

REDRIVE_TIME_BUDGET_SECONDS = 20.0  # one call stays inside API Gateway's 30 s; call again for the rest
REDRIVE_LEASE_MS = 60_000


class Operations:
    def __init__(
        self, backend: Backend, registry: QueueRegistry, publisher: Publisher, consumer: Consumer
    ) -> None:
        self.backend = backend
        self.registry = registry
        self.publisher = publisher
        self.consumer = consumer
        self.shard_states = ShardStateReader(backend.store)

    # --- purge --------------------------------------------------------------------------------------------

    def purge(self, queue_name: str) -> dict[str, Any]:
        queue = self.registry.get(queue_name)
        started = self.backend.clock()
        for shard in queue.readable_shards:
            self.backend.store.set_floor(ShardAddress.of(queue, shard))
        self.backend.control.put(
            {
                keys.PK: keys.queue_pk(queue.name),
                keys.SK: keys.PURGE_SK,
                keys.PURGE_STARTED_MS: started,
                keys.INCARNATION: queue.incarnation,
            }
        )
        return {"queue_name": queue.name, "shards_purged": len(queue.readable_shards), "started_ms": started}

    def last_purge_ms(self, queue_name: str) -> int | None:
        """When the last purge of this queue started (purges complete before they answer), or None."""
        queue = self.registry.get(queue_name)
        item = self.backend.control.get(keys.queue_pk(queue.name), keys.PURGE_SK)
        if not item or item.get(keys.INCARNATION) != queue.incarnation:
            return None
        return int(item[keys.PURGE_STARTED_MS])

    # --- redrive ------------------------------------------------------------------------------------------

    def redrive(self, queue_name: str, from_queue: str, max_messages: int | None = None) -> dict[str, Any]:
        """Move messages from `from_queue` (a dead letter queue) back into `queue_name` as new messages.

        Each batch is published to the source first, then acked in the DLQ's default group: a crash in
        between leaves it in the DLQ to be moved again (at most a duplicate, never a loss).
        """
        target = self.registry.get(queue_name)  # 404 before anything moves
        self.registry.get(from_queue)
        if target.settings.dead_letter_queue != from_queue:  # (a queue is never its own DLQ)
            raise errors.NotADeadLetterQueue(
                f"queue {from_queue!r} is not the dead_letter_queue of {queue_name!r}: redrive moves "
                "messages back from a queue's own dead letter queue only"
            )
        clock = self.backend.clock
        deadline = clock.monotonic() + REDRIVE_TIME_BUDGET_SECONDS
        moved = 0
        remaining = max_messages if max_messages is not None else float("inf")
        while remaining > 0 and clock.monotonic() < deadline:
            batch = self.consumer.pull(
                from_queue,
                group=DEFAULT_GROUP,
                batch_size=int(min(MAX_BATCH_MESSAGES, remaining)),
                visibility_ms=REDRIVE_LEASE_MS,
            )
            if not batch.messages:
                break
            outgoing = [
                OutgoingMessage(
                    body=d.body,
                    content_type=d.content_type,
                    partition_key=d.partition_key,
                    attributes={k: v for k, v in d.attributes.items() if k != SOURCE_ATTRIBUTE},
                )
                for d in batch.messages
            ]
            for part in request_batches(outgoing):
                self.publisher.publish(queue_name, part)
            faults.crash_point(faults.REDRIVE_AFTER_WRITE)
            self.consumer.ack(from_queue, [d.lease_id for d in batch.messages])
            moved += len(batch.messages)
            remaining -= len(batch.messages)
        left = self.metrics(from_queue, groups=[DEFAULT_GROUP])["backlog_count"]
        return {"moved": moved, "remaining_in_source": left, "from": from_queue, "to": queue_name}

    # --- metrics ------------------------------------------------------------------------------------------

    def metrics(self, queue_name: str, *, groups: list[str] | None = None) -> dict[str, Any]:
        """Backlog (count, estimated bytes, oldest message), available, in-flight and delayed messages per
        consumer group and per shard, exact (sluice.engine.lanes), from each shard's HEAD and the groups'
        lanes (batched reads, one region at a time) plus one item read per group and shard for the oldest
        unacked message. The top-level
        figures are the `default` group's (the group Cloudflare-style pulls use). Multi-region: each
        shard names its region, and `regions` gives the same top-level figures per region (the totals
        are over all); a region that cannot be reached, or cools down after failing, is skipped and
        named in `skipped_regions` (the figures are then over the others). An answer that would pass
        METRICS_BYTES keeps per-shard figures for the top group only (`shard_groups_omitted`)."""
        queue = self.registry.get(queue_name)
        now = self.backend.clock()
        names = groups or sorted(queue.groups)
        top_group = DEFAULT_GROUP if DEFAULT_GROUP in names else next(iter(names), None)
        per_group: dict[str, dict[str, Any]] = {g: _empty() for g in names}
        per_region: dict[str, dict[str, Any]] = {}
        shards_out = []
        skipped: list[str] = []
        breaker = self.consumer.breaker
        for region, shards in by_region(self.backend, queue.readable_shards):
            try:
                with breaker.guard(region):
                    reads = self.shard_states.read(queue, shards, names)  # a group never here: the floor
                    entries = [self._shard_entry(queue, read, names, now) for read in reads]
            except errors.DependencyUnavailable:
                if region is None:
                    raise  # one region: nothing else to answer from
                skipped.append(region)
                continue
            for shard, entry in entries:
                for group, figures in entry["consumer_groups"].items():
                    _merge(per_group[group], figures)
                    if shard.region and group == top_group:
                        _merge(per_region.setdefault(shard.region, _empty()), figures)
                shards_out.append(entry)
        for figures in [*per_group.values(), *per_region.values()]:
            oldest = figures["oldest_message_timestamp_ms"]
            figures["oldest_message_age_ms"] = max(0, now - oldest) if oldest else 0
        top = per_group.get(DEFAULT_GROUP) or next(iter(per_group.values()), _empty())
        answer = {
            "queue_name": queue.name,
            "paused": queue.paused,
            "shard_count": len(queue.open_shards),
            **top,
            "consumer_groups": per_group,
            "shards": sorted(shards_out, key=lambda e: e["shard"]),
            **({"regions": per_region} if per_region else {}),
            **({"skipped_regions": sorted(skipped)} if skipped else {}),
        }
        return fit_metrics(answer, top_group)

    def _shard_entry(
        self, queue: Queue, read: ShardRead, names: list[str], now: int
    ) -> tuple[Shard, dict[str, Any]]:
        shard, head = read.shard, read.head
        shard_groups = {group: self._figures(queue, read, group, now) for group in names}
        return shard, {
            "shard": shard.id,
            **({"region": shard.region} if shard.region else {}),
            "state": shard.state,
            "next_seq": head.next,
            "purge_floor": head.floor,
            "last_write_ms": head.ts,
            "consumer_groups": shard_groups,
        }

    def _figures(self, queue: Queue, read: ShardRead, group: str, now: int) -> dict[str, Any]:
        figures = read.figures(group, now)
        count = figures.backlog
        oldest_ts, mean_size = (0, 0.0)
        if count:
            level = read.groups[group].ack_level(read.head.next, read.head.floor)
            oldest_ts, mean_size = self._oldest(queue, read.shard, level)
        return {
            "backlog_count": count,
            "backlog_bytes": int(count * mean_size),
            "available": figures.available,
            "in_flight": figures.in_flight,
            "delayed": figures.delayed,
            "oldest_message_timestamp_ms": oldest_ts,
        }

    def _oldest(self, queue: Queue, shard: Shard, seq: int) -> tuple[int, float]:
        """(timestamp, mean body size) of the batch item holding `seq`, or the first one after it."""
        store, at = self.backend.store, ShardAddress.of(queue, shard)
        before = store.item_before(at, seq)
        candidates = (
            [before] if before is not None and before.end > seq else list(store.scan(at, seq, limit=2))
        )
        for item in candidates:
            if item.gap or item.payload is None:
                continue
            bodies = store.body_sizes(at, item)  # without fetching a payload-tier object
            return item.ts, (sum(bodies) / len(bodies) if bodies else 0.0)
        return 0, 0.0


def _empty() -> dict[str, Any]:
    return {
        "backlog_count": 0,
        "backlog_bytes": 0,
        "available": 0,
        "in_flight": 0,
        "delayed": 0,
        "oldest_message_timestamp_ms": 0,
    }


def _merge(total: dict[str, Any], part: dict[str, Any]) -> None:
    for name in ("backlog_count", "backlog_bytes", "available", "in_flight", "delayed"):
        total[name] += part[name]
    if part["oldest_message_timestamp_ms"] and (
        not total["oldest_message_timestamp_ms"]
        or part["oldest_message_timestamp_ms"] < total["oldest_message_timestamp_ms"]
    ):
        total["oldest_message_timestamp_ms"] = part["oldest_message_timestamp_ms"]


# A metrics answer travels as one Lambda response (6 MB), like a pull's: the same 1 MB margin.
METRICS_BYTES = LAMBDA_SYNC_PAYLOAD_BYTES - 1_000_000


def fit_metrics(answer: dict[str, Any], top_group: str | None, limit: int = METRICS_BYTES) -> dict[str, Any]:
    """The answer, or, when it would pass `limit` bytes (256 shards x 3 regions x 32 groups of long
    names reach ~5.4 MB), the same with per-shard figures for `top_group` only: the per-group totals stay
    complete, and `shard_groups_omitted` says per-shard detail was cut (ask with `groups` for others)."""
    if len(json.dumps(answer)) <= limit:
        return answer
    kept = [top_group] if top_group else []
    shards = [
        {**entry, "consumer_groups": {g: f for g, f in entry["consumer_groups"].items() if g in kept}}
        for entry in answer["shards"]
    ]
    return {**answer, "shards": shards, "shard_groups_omitted": True}
