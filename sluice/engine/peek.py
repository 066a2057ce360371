"""Peek: a group's unacked messages without leasing or counting a delivery (Cloudflare's
`messages.peek`), each with a `ref` that `messages.purge` takes.

Reads each shard's HEAD and the group's lanes (as metrics does), then the batch items of its pending
and unread messages, in shard and sequence order: messages waiting for a retry or in flight
first come in sequence order with the unread ones. A ref is a lease id (signed, bound to the queue)
naming the message and its delivery count; purging a ref acks it, which removes a message that was
delivered at least once. A message never delivered sits below no read level yet, so it cannot be
removed out of order: its ref is answered with a warning (purge the queue, or pull and ack it).
"""

from __future__ import annotations

from dataclasses import dataclass

from sluice import errors
from sluice.engine.consume import Consumer
from sluice.engine.groupstate import Pending
from sluice.engine.operations import Operations
from sluice.engine.publish import message_id_at
from sluice.engine.shardstate import ShardRead
from sluice.leases import Lease
from sluice.models import DEFAULT_GROUP, Queue


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
        for read in self.operations.shard_states.read(queue, queue.readable_shards, [group]):
            if len(out) >= batch_size:
                break
            out += self._shard(queue, read, batch_size - len(out), group)
        return out

    def _shard(self, queue: Queue, read: ShardRead, want: int, group: str) -> list[Peeked]:
        """Pending messages (every lane's, in sequence order), then unread ones (the unclaimed backlog and
        each lane's unread range): the pending ones' items by key, the unread ones' by a scan of each
        range, at most `want` messages."""
        store, at, now = self.backend.store, read.address, self.backend.clock()
        lanes, head = read.groups[group], read.head
        pending: dict[int, tuple[int, Pending]] = {}
        for lane, ls in lanes.lanes.items():
            done = ls.acked_seqs
            pending |= {seq: (lane, p) for seq, p in ls.state.pending.items() if seq not in done}
        chosen = set(sorted(pending)[:want])
        items = {i.first: i for i in store.items(at, {pending[seq][1].item for seq in chosen}).values()}
        ranges = lanes.unread_ranges(head.next, head.floor)
        room = want - len(chosen)
        for lo, hi in ranges if room > 0 else []:
            before = store.item_before(at, lo)
            start = before.first if before is not None and before.end > lo else lo
            for item in store.scan(at, start, to_seq=hi - 1, limit=room + 1):
                items.setdefault(item.first, item)
        out: list[Peeked] = []
        unread_taken = 0
        for item in sorted(items.values(), key=lambda i: i.first):
            if item.gap or item.expired(now):
                continue
            for offset, msg in enumerate(store.messages(at, item)):
                seq = item.first + offset
                if seq in chosen:
                    lane, entry = pending[seq]
                    attempts = entry.attempts
                elif unread_taken < room and any(lo <= seq < hi for lo, hi in ranges):
                    lane, attempts = 0, 0
                    unread_taken += 1
                else:
                    continue  # acked, or beyond this batch
                lease = Lease(shard=at.id, seq=seq, attempt=attempts, group=group, lane=lane)
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
        return sorted(out, key=lambda p: p.id)[:want]
