"""The publish path: two sequential DynamoDB writes per shard touched, no transactions.

1. Allocate a contiguous sequence range on the shard's head item with one conditional update. The
   condition is the fencing token: it fails on a sealed shard, on a producer version older than the
   one stored, and when another broker's clock ran ahead (offset timestamps never go backwards).
2. Write the batch as items of at most ~350 KB, each keyed by its first sequence, with
   `attribute_not_exists`: a slot that gap repair already tombstoned rejects the late write.
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections.abc import Collection, Iterator, Sequence

from sluice import errors, faults, offsets
from sluice.codec import StoredMessage, encoded_size
from sluice.engine import keys, payloads, regions, tierpolicy
from sluice.engine.backend import Backend
from sluice.engine.counters import ShardCounters
from sluice.engine.queues import QueueDirectory
from sluice.engine.store import Allocation, AllocationRefused, Head, HeadGuard, ShardAddress, SlotTaken
from sluice.engine.wake import Waker
from sluice.models import MAX_BATCH_MESSAGES, MAX_REQUEST_BYTES, OutgoingMessage, PublishResult, Queue, Shard

ITEM_BYTES = 350 * 1024  # DynamoDB items stop at 400 KB; keep room for keys and attributes
OVERFLOW_BYTES = 256 * 1024  # a larger body goes to S3 and the item keeps a pointer
_MAX_ALLOCATE_ATTEMPTS = 6
PEEK_EVERY_MS = 500  # a throttled broker reads the queue's route item at most this often
COOL_MS = 200  # a shard that refused a send is not tried again by this process for this long


def message_id(queue: Queue, shard_id: int, seq: int) -> str:
    """Derived, not stored: unique per queue incarnation, and it names where the message lives."""
    return _message_id(queue.incarnation, shard_id, seq)


def message_id_at(at: ShardAddress, seq: int) -> str:
    return _message_id(at.incarnation, at.id, seq)


def _message_id(incarnation: str, shard_id: int, seq: int) -> str:
    return f"{incarnation}{shard_id:04x}{seq:012x}"


def shard_for_key(shards: Sequence[Shard], partition_key: str) -> Shard:
    """Stable hash of the partition key over the open shards (ordered queues)."""
    ordered = sorted(shards, key=lambda s: s.id)
    digest = hashlib.blake2b(partition_key.encode(), digest_size=8).digest()
    return ordered[int.from_bytes(digest, "big") % len(ordered)]


class HeadChanged(errors.Conflict):
    """The guarded head changed since the caller read it: re-read and decide again."""


class Publisher:
    def __init__(self, backend: Backend, directory: QueueDirectory, waker: Waker | None = None) -> None:
        self.backend = backend
        self.directory = directory
        self.waker = waker  # starts the coordinator when shards throttle (sluice/engine/wake.py)
        self.counters = ShardCounters(backend.clock)  # throttles/conflicts carried on the next head update
        self._peek_lock = threading.Lock()
        self._peeked: dict[str, int] = {}  # queue -> when this process last read its route item
        self._cool_until: dict[str, int] = {}  # shard partition key -> refused sends until (ms)

    def publish(
        self,
        queue_name: str,
        messages: Sequence[OutgoingMessage],
        *,
        version: int | None = None,
        max_bytes: int = MAX_REQUEST_BYTES,
    ) -> PublishResult:
        """Store `messages` durably, in order, and return their ids and offsets. `max_bytes`: what the
        calling face lets one request carry (the native send, MAX_SEND_BYTES)."""
        queue = self.directory.get(queue_name)
        self.check_batch(queue, messages, max_bytes)
        result = PublishResult(message_ids=[], offsets=[], shard=-1)
        for group in self._split_by_shard(queue, messages):
            part = self._publish_to_one_shard(queue, group, version)
            result.message_ids += part.message_ids
            result.offsets += part.offsets
            result.shard = part.shard
        return result

    def append(
        self,
        queue: Queue,
        messages: Sequence[OutgoingMessage],
        *,
        version: int | None = None,
        guard: HeadGuard | None = None,
    ) -> PublishResult:
        """One allocation for any number of messages on one shard (Durable Streams' POST carries up to
        1 MiB): sizes are checked per message, the request limits of `publish` do not apply. The
        caller passes the queue document it trusts (the face reads it consistently)."""
        limit = queue.settings.max_message_bytes
        for index, msg in enumerate(messages):
            if msg.size > limit:
                raise errors.MessageTooLarge(
                    f"record {index} is {msg.size} bytes; at most {limit} bytes per record"
                )
        if not messages:  # a pure version bump (or a guarded state change, such as a close)
            home = regions.key_shards(self.backend, queue)
            shard = home[0] if home else queue.shards[0]
            alloc = self._allocate(queue, shard, 0, version, guard=guard)
            return PublishResult(message_ids=[], offsets=[], shard=shard.id, tail_seq=alloc.first_seq)
        return self._publish_to_one_shard(queue, messages, version, guard, keyed=True)

    @staticmethod
    def check_batch(
        queue: Queue, messages: Sequence[OutgoingMessage], max_bytes: int = MAX_REQUEST_BYTES
    ) -> None:
        if not messages:
            raise errors.InvalidRequest("send at least one message")
        if len(messages) > MAX_BATCH_MESSAGES:
            raise errors.BatchTooLarge(
                f"a request holds at most {MAX_BATCH_MESSAGES} messages, got {len(messages)}; split it"
            )
        limit = queue.settings.max_message_bytes
        total = 0
        for index, msg in enumerate(messages):
            size = msg.size
            total += size
            if size > limit:
                raise errors.MessageTooLarge(
                    f"message {index} is {size} bytes (body, partition key and attributes); "
                    f"queue {queue.name!r} accepts at most {limit}"
                )
        if total > max_bytes:
            raise errors.RequestTooLarge(
                f"the messages add up to {total} bytes; one request carries at most {max_bytes}"
            )

    def _split_by_shard(
        self, queue: Queue, messages: Sequence[OutgoingMessage]
    ) -> list[list[OutgoingMessage]]:
        """Unordered queues: all on one random open shard. Ordered: one group per key's shard, in order."""
        home = regions.key_shards(self.backend, queue) if queue.settings.ordered else []
        if not home:  # unordered; or no open shard, which the publish answers as resharding
            return [list(messages)]
        groups: dict[int, list[OutgoingMessage]] = {}
        for msg in messages:
            shard = shard_for_key(home, msg.partition_key or "")
            groups.setdefault(shard.id, []).append(msg)
        return list(groups.values())

    def _candidates(self, queue: Queue, keyed: bool) -> list[Shard]:
        """The open shards a send may use: a key's (ordered queues, stream appends) are the home
        region's; any other send stays in this broker's region (docs/design.md "Multi-region")."""
        keyed = keyed or queue.settings.ordered
        return regions.key_shards(self.backend, queue) if keyed else regions.send_shards(self.backend, queue)

    def _pick_shard(
        self,
        queue: Queue,
        messages: Sequence[OutgoingMessage],
        candidates: list[Shard],
        avoid: Collection[int],
    ) -> Shard:
        if not candidates:
            raise errors.DependencyUnavailable(f"queue {queue.name!r} has no open shard; retry shortly")
        if queue.settings.ordered:
            return shard_for_key(candidates, messages[0].partition_key or "")
        return random.choice([s for s in candidates if s.id not in avoid] or candidates)

    def _publish_to_one_shard(
        self,
        queue: Queue,
        messages: Sequence[OutgoingMessage],
        version: int | None,
        guard: HeadGuard | None = None,
        *,
        keyed: bool = False,
    ) -> PublishResult:
        """`keyed`: the messages belong to the home region's shards even on an unordered queue (an
        append to a stream: one sequencer for its one order)."""
        nbytes = sum(len(m.body) for m in messages)
        # An unordered send may land on any open shard of its region: it moves to one that has not
        # refused a send lately instead of failing the request (the twin showed clients retrying into
        # the same hot shard) or waiting out the SDK's backoff on it.
        movable = not queue.settings.ordered and guard is None
        avoid: set[int] = set()  # shards that refused this send
        peeked = False
        for _ in range(_MAX_ALLOCATE_ATTEMPTS):
            candidates = self._candidates(queue, keyed)
            cooling = self._cooling(queue, candidates) if movable else set()
            if movable and candidates and all(s.id in avoid or s.id in cooling for s in candidates):
                # Every shard this broker knows refused a send within COOL_MS. A newer map may name
                # more (the route item, read at most every PEEK_EVERY_MS); else the client retries,
                # and the refused partitions are spared an attempt that would be throttled too.
                seen = None if peeked else self._peek(queue, candidates[0])
                peeked = True
                if seen is not None and any(
                    s.id not in avoid and s.id not in self._cooling(seen, [s])
                    for s in self._candidates(seen, keyed)
                ):
                    queue = seen
                    continue
                self._throttled(queue, candidates[0], first=not avoid)
                raise errors.Throttled(f"queue {queue.name!r} is throttled; retry after a short pause")
            shard = self._pick_shard(queue, messages, candidates, avoid | cooling)
            try:
                alloc = self._allocate(queue, shard, len(messages), version, nbytes, guard=guard)
            except _ShardSealed as sealed:
                # The HEAD's stamp names the map that sealed it: adopt it, or read the document.
                head = sealed.head
                newer = self.directory.observe_stamp(queue, shard, head.map_version, head.map_route)
                if _is_open(newer, shard.id):
                    newer = self.directory.refresh(queue.name, queue.version)
                queue = newer
                continue
            except errors.Throttled:
                self._throttled(queue, shard, first=not avoid)
                with self._peek_lock:
                    self._cool_until[keys.shard_pk(queue, shard.id)] = self.backend.clock() + COOL_MS
                if not movable:
                    raise
                avoid.add(shard.id)
                continue
            # for the next send (this one is placed): the HEAD's map stamp, as the allocation left it
            self.directory.observe_stamp(queue, shard, alloc.map_version, alloc.map_route)
            faults.crash_point(faults.PUBLISH_AFTER_ALLOCATE)
            self._write(queue, shard, alloc, messages)
            seqs = range(alloc.first_seq, alloc.first_seq + len(messages))
            return PublishResult(
                message_ids=[message_id(queue, shard.id, s) for s in seqs],
                offsets=[offsets.encode(alloc.timestamp_ms, s) for s in seqs],
                shard=shard.id,
                tail_seq=alloc.first_seq + len(messages),
            )
        raise errors.DependencyUnavailable(f"queue {queue.name!r} is resharding; retry shortly")

    def _throttled(self, queue: Queue, shard: Shard, *, first: bool) -> None:
        """A send refused for throttling: unmet demand (counted once per request, `first`), and what
        the coordinator scales for: wake it now (sluice/engine/wake.py)."""
        if first:
            self.counters.note_throttle(keys.shard_pk(queue, shard.id))
        if self.waker is not None:
            self.waker.wake(queue.name)

    def _cooling(self, queue: Queue, shards: Sequence[Shard]) -> set[int]:
        """The shards of `shards` that refused a send of this process within `COOL_MS`."""
        now = self.backend.clock()
        with self._peek_lock:
            return {s.id for s in shards if self._cool_until.get(keys.shard_pk(queue, s.id), 0) > now}

    def _peek(self, queue: Queue, shard: Shard) -> Queue | None:
        """The newer map the region's stamp names, when there is one. Not from a HEAD (a throttled
        partition refuses reads too): from the route item the stamp also wrote next to the document
        (one eventually consistent read, at most every `PEEK_EVERY_MS` per queue and process)."""
        now = self.backend.clock()
        with self._peek_lock:
            if now - self._peeked.get(queue.name, -PEEK_EVERY_MS) < PEEK_EVERY_MS:
                return None
            self._peeked[queue.name] = now
        try:
            route = self.directory.registry.route_of(queue.name, shard.region)
        except (errors.Throttled, errors.DependencyUnavailable):
            return None
        newer = self.directory.observe(queue, shard, route)
        return newer if newer is not queue and newer.version >= queue.version else None

    def _allocate(
        self,
        queue: Queue,
        shard: Shard,
        count: int,
        version: int | None,
        nbytes: int = 0,
        *,
        guard: HeadGuard | None = None,
    ) -> Allocation:
        at = ShardAddress.of(queue, shard)
        store = self.backend.store
        now = self.backend.clock()
        for _ in range(_MAX_ALLOCATE_ATTEMPTS):
            counts = self.counters.take(at.pk, count, nbytes)
            try:
                return store.allocate(
                    at,
                    count,
                    now,
                    counts,
                    producer_version=version,
                    guard=guard,
                    # A throttled HEAD: no SDK retry, another shard (an unordered send has others), and
                    # the throttle is counted and wakes the coordinator at once, not after seconds of
                    # backoff on a partition that stays hot until the coordinator acts.
                    fail_fast=guard is None and not queue.settings.ordered,
                )
            except errors.Throttled:
                self.counters.restore(at.pk, counts)
                raise
            except AllocationRefused as exc:
                self.counters.restore(at.pk, counts)
                head = exc.head
                if head.sealed:
                    raise _ShardSealed(head) from exc
                if guard is not None and exc.guard_value != guard.expected:
                    raise HeadChanged("the stream changed concurrently; decide again") from exc
                if version is not None and head.producer_version > version:
                    raise errors.ProducerFenced(
                        "Producer version too old",
                        current_version=head.producer_version,
                        provided_version=version,
                    ) from exc
                now = max(now, head.ts)  # another broker's clock ran ahead: follow it
                self.counters.note_conflict(at.pk)
                continue
        raise errors.DependencyUnavailable("the shard head is contended; retry shortly")

    def _write(
        self, queue: Queue, shard: Shard, alloc: Allocation, messages: Sequence[OutgoingMessage]
    ) -> None:
        at = ShardAddress.of(queue, shard)
        default_delay = queue.settings.delivery_delay_seconds
        stored: list[StoredMessage] = []
        for offset_in_batch, msg in enumerate(messages):
            seq = alloc.first_seq + offset_in_batch
            delay = default_delay if msg.delay_seconds is None else msg.delay_seconds
            body, overflow_key = msg.body, None
            if len(body) > OVERFLOW_BYTES:
                overflow_key = keys.overflow_key(at.pk, seq)
                self.backend.bucket_for(shard).put(overflow_key, body)
                body = b""
            stored.append(
                StoredMessage(
                    body=body,
                    content_type=msg.content_type,
                    partition_key=msg.partition_key,
                    attributes=msg.attributes,
                    visible_at_ms=alloc.timestamp_ms + delay * 1000 if delay else 0,
                    overflow_key=overflow_key,
                )
            )
        expires = None
        if not queue.settings.bottomless:
            expires = (alloc.timestamp_ms // 1000) + queue.settings.retention_seconds
        settings = queue.settings
        hot_seconds = min(settings.retention_seconds, tierpolicy.MAX_HOT_DAYS * tierpolicy.DAY_SECONDS)
        tier = None
        if payloads.plan(settings.payload_tier, stored, hot_seconds, settings.bottomless) == "s3":
            days = tierpolicy.object_days(hot_seconds, settings.bottomless)
            tier = payloads.TierObject.of(at.pk, alloc.first_seq, stored, days)
            self.backend.bucket_for(shard).put(tier.key, tier.data, tags=tier.tags)
            faults.crash_point(faults.TIER_AFTER_PUT)
            stored = tier.index
        for first, chunk in _pack(alloc.first_seq, stored):
            key = None if tier is None else tier.key
            base = 0 if tier is None else tier.base_of(first - alloc.first_seq)
            try:
                self.backend.store.write_batch(
                    at, first, alloc.timestamp_ms, chunk, expires, object_key=key, object_base=base
                )
            except SlotTaken as exc:
                raise errors.WriteRaced(
                    "the send stalled so long that its slot was sealed as a gap; nothing was stored, retry"
                ) from exc
        faults.crash_point(faults.PUBLISH_AFTER_WRITE)


def _pack(first_seq: int, stored: Sequence[StoredMessage]) -> list[tuple[int, list[StoredMessage]]]:
    """Split into items under ITEM_BYTES and of at most MAX_BATCH_MESSAGES messages, each keyed by its
    first sequence. Readers rely on the count bound: the item holding sequence s starts at or after
    s - 99, so a reader positioned inside an item always finds it (and never mistakes it for a gap)."""
    chunks: list[tuple[int, list[StoredMessage]]] = []
    current: list[StoredMessage] = []
    size = 0
    start = first_seq
    for index, msg in enumerate(stored):
        msg_size = encoded_size(msg)
        if current and (size + msg_size > ITEM_BYTES or len(current) >= MAX_BATCH_MESSAGES):
            chunks.append((start, current))
            start, current, size = first_seq + index, [], 0
        current.append(msg)
        size += msg_size
    if current:
        chunks.append((start, current))
    return chunks


class _ShardSealed(Exception):
    """The head refused the allocation because the coordinator sealed the shard."""

    def __init__(self, head: Head) -> None:
        super().__init__("sealed")
        self.head = head  # as it was: its map stamp names the map that sealed it


def _is_open(queue: Queue, shard_id: int) -> bool:
    shard = queue.shard(shard_id)
    return shard is not None and shard.state == "open"


def request_batches(messages: Sequence[OutgoingMessage]) -> Iterator[list[OutgoingMessage]]:
    """Consecutive groups that each pass a send request's limits (MAX_BATCH_MESSAGES messages, bodies
    adding up to MAX_REQUEST_BYTES): what the engine moves on its own (dead letters, redrive) must
    not be refused for arriving together when each message alone was accepted."""
    group: list[OutgoingMessage] = []
    size = 0
    for msg in messages:
        if group and (len(group) >= MAX_BATCH_MESSAGES or size + len(msg.body) > MAX_REQUEST_BYTES):
            yield group
            group, size = [], 0
        group.append(msg)
        size += len(msg.body)
    if group:
        yield group
