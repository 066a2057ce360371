"""Peek: a group's unacked messages without leasing or counting a delivery (Cloudflare's
`messages.peek`), each with a `ref` that `messages.purge` takes.

Reads each shard's HEAD and group state (one Query, as metrics does), then the batch items from the
oldest unacked message on, in shard and sequence order: messages waiting for a retry or in flight
first come in sequence order with the unread ones. A ref is a lease id (signed, bound to the queue)
naming the message and its delivery count; purging a ref acks it, which removes a message that was
delivered at least once. A message never delivered sits below no read level yet, so it cannot be
removed out of order: its ref is answered with a warning (purge the queue, or pull and ack it).
"""

from __future__ import annotations

from dataclasses import dataclass

from sluice import errors
from sluice.engine.consume import Consumer
from sluice.engine.groupstate import GroupState
from sluice.engine.operations import Operations
from sluice.engine.publish import message_id_at
from sluice.engine.store import ShardAddress
from sluice.leases import Lease
from sluice.models import DEFAULT_GROUP, Queue, Shard


@dataclass
class Peeked:
    id: str
    ref: str
    body: bytes
    content_type: str
    timestamp_ms: int
    attempts: int
    attributes: dict[str, str]


class Peeker:
    def __init__(self, operations: Operations, consumer: Consumer) -> None:
        self.operations = operations
        self.consumer = consumer
        self.backend = operations.backend

    def peek(self, queue_name: str, batch_size: int, group: str = DEFAULT_GROUP) -> list[Peeked]:
        queue = self.operations.registry.get(queue_name)
        if group not in queue.groups:
            raise errors.ConsumerGroupNotFound(f"consumer group {group!r} not found on queue {queue_name!r}")
        out: list[Peeked] = []
        for shard in queue.readable_shards:
            if len(out) >= batch_size:
                break
            read = self.operations.shard_states.read_shard(queue, shard, [group])
            out += self._shard(queue, shard, read.states[group], read.head.next, batch_size - len(out), group)
        return out

    def _shard(
        self, queue: Queue, shard: Shard, state: GroupState, head_next: int, want: int, group: str
    ) -> list[Peeked]:
        """Pending messages (below the read level, in sequence order), then unread ones: the pending
        ones' items by key, the unread ones' from the read level on, at most `want` items."""
        store, at, now = self.backend.store, ShardAddress.of(queue, shard), self.backend.clock()
        pending = sorted(state.pending)[:want]
        items = list(store.items(at, {state.pending[seq].item for seq in pending}).values())
        if len(pending) < want and state.read < head_next:
            items += store.scan(at, state.read_item, limit=want)
        out: list[Peeked] = []
        for item in sorted({i.first: i for i in items}.values(), key=lambda i: i.first):
            if item.gap or item.expired(now):
                continue
            for offset, msg in enumerate(store.messages(at, item)):
                seq = item.first + offset
                entry = state.pending.get(seq)
                if len(out) >= want or seq >= head_next:
                    return out
                if (entry is None and seq < state.read) or (entry is not None and seq not in pending):
                    continue  # acked, or pending beyond this batch
                attempts = entry.attempts if entry else 0
                lease = Lease(shard=shard.id, seq=seq, attempt=attempts, group=group)
                out.append(
                    Peeked(
                        id=message_id_at(at, seq),
                        ref=self.consumer.signer.sign(queue.lease_key, lease),
                        body=store.body(at, msg),
                        content_type=msg.content_type,
                        timestamp_ms=item.ts,
                        attempts=attempts,
                        attributes=msg.attributes,
                    )
                )
        return out
