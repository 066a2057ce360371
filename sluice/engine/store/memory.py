"""The shard store in process memory, with the DynamoDB store's conditions: for unit tests of the
engine's logic (leases, planning, commits) without moto. Not thread-safe beyond one lock per call."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sluice import codec
from sluice.codec import StoredMessage
from sluice.engine.groupstate import GroupState
from sluice.engine.lanes import MAX_LANES, Cursor, GroupLanes, LaneState
from sluice.engine.payloads import ItemMessages
from sluice.engine.store.dynamo import TOMBSTONE_TTL_SECONDS
from sluice.engine.store.items import (
    Allocation,
    AllocationRefused,
    BatchItem,
    ClaimRefused,
    Head,
    HeadCounts,
    HeadGuard,
    InlinePayload,
    LaneAddress,
    LaneRead,
    ObjectPayload,
    ShardAddress,
    ShardView,
    SlotTaken,
    StateConflict,
)


@dataclass
class _Partition:
    head: Head | None = None
    guards: dict[str, Any] = field(default_factory=dict)  # HeadGuard fields (open-stream attributes)
    firsts: list[int] = field(default_factory=list)  # sorted
    items: dict[int, BatchItem] = field(default_factory=dict)
    lanes: dict[tuple[str, int], _LaneItem] = field(default_factory=dict)  # (group, lane) -> its item
    overflow: dict[str, bytes] = field(default_factory=dict)
    objects: dict[str, bytes] = field(default_factory=dict)  # payload-tier objects


class MemoryShardStore:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._parts: dict[str, _Partition] = {}
        self.writes = 0  # successful writes, for tests that count them
        self.conflicts = 0

    def _part(self, at: ShardAddress) -> _Partition:
        return self._parts.setdefault(at.pk, _Partition())

    def put_overflow(self, key: str, body: bytes, at: ShardAddress) -> None:
        """A body stored beside the item (what the publisher does for bodies over an item's size)."""
        self._part(at).overflow[key] = body

    def put_object(self, key: str, data: bytes, at: ShardAddress) -> None:
        """A payload-tier object (what the publisher puts in S3 before the items that index it)."""
        self._part(at).objects[key] = data

    # --- HEAD ---------------------------------------------------------------------------------------------

    def head(self, at: ShardAddress) -> Head:
        with self._lock:
            return self._part(at).head or Head()

    def allocate(
        self,
        at: ShardAddress,
        count: int,
        now_ms: int,
        counts: HeadCounts,
        *,
        producer_version: int | None = None,
        guard: HeadGuard | None = None,
        fail_fast: bool = False,
    ) -> Allocation:
        with self._lock:
            part = self._part(at)
            head = part.head or Head()
            refused = head.sealed or (part.head is not None and head.ts > now_ms)
            if producer_version is not None and head.producer_version > producer_version:
                refused = True
            if guard is not None and part.guards.get(guard.field) != guard.expected:
                refused = True
            if refused:
                self.conflicts += 1
                value = part.guards.get(guard.field) if guard is not None else None
                raise AllocationRefused(head, value)
            added = (counts.requests, counts.messages, counts.bytes, counts.throttles, counts.conflicts)
            part.head = replace(
                head,
                exists=True,
                next=head.next + count,
                ts=now_ms,
                producer_version=head.producer_version if producer_version is None else producer_version,
                counters=tuple(a + b for a, b in zip(head.counters, added, strict=True)),
            )
            if guard is not None:
                part.guards.update(guard.updates)
            self.writes += 1
            return Allocation(part.head.next - count, now_ms, part.head.map_version, part.head.map_route)

    def stamp_map(self, at: ShardAddress, version: int, route: str) -> bool:
        with self._lock:
            part = self._part(at)
            head = part.head or Head()
            if head.map_version and head.map_version >= version:  # 0: never stamped
                return False
            part.head = replace(head, exists=True, map_version=version, map_route=route)
            return True

    def set_floor(self, at: ShardAddress) -> None:
        with self._lock:
            part = self._part(at)
            head = part.head or Head()
            part.head = replace(head, exists=True, floor=head.next)

    def seal(self, at: ShardAddress, now_ms: int) -> None:
        with self._lock:
            part = self._part(at)
            part.head = replace(part.head or Head(), exists=True, sealed=True)

    def mark_flushed(self, at: ShardAddress, old: int, new: int) -> bool:
        with self._lock:
            part = self._part(at)
            head = part.head or Head()
            if head.flushed not in (0, old):
                return False
            part.head = replace(head, exists=True, flushed=new)
            return True

    def mark_ttl_set(self, at: ShardAddress, end: int) -> None:
        with self._lock:
            part = self._part(at)
            head = part.head or Head()
            if head.ttl_set < end:
                part.head = replace(head, exists=True, ttl_set=end)

    # --- batch items --------------------------------------------------------------------------------------

    def _insert(self, part: _Partition, item: BatchItem) -> bool:
        if item.first in part.items:
            return False
        bisect.insort(part.firsts, item.first)
        part.items[item.first] = item
        return True

    def write_batch(
        self,
        at: ShardAddress,
        first: int,
        timestamp_ms: int,
        messages: Sequence[StoredMessage],
        expires_s: int | None,
        *,
        object_key: str | None = None,
        object_base: int = 0,
    ) -> None:
        blob = codec.encode_batch(messages)
        payload = InlinePayload(blob) if object_key is None else ObjectPayload(object_key, blob, object_base)
        item = BatchItem(first, len(messages), timestamp_ms, False, payload, expires_s)
        with self._lock:
            if not self._insert(self._part(at), item):
                raise SlotTaken
            self.writes += 1

    def seal_gap(self, at: ShardAddress, start: int, end: int, now_ms: int) -> bool:
        with self._lock:
            part = self._part(at)
            for seq in range(start, end):
                if not self._insert(
                    part, BatchItem(seq, 1, 0, True, None, now_ms // 1000 + TOMBSTONE_TTL_SECONDS)
                ):
                    return False
            return True

    def scan(
        self, at: ShardAddress, from_seq: int, *, to_seq: int | None = None, limit: int | None = None
    ) -> Iterator[BatchItem]:
        with self._lock:
            part = self._part(at)
            lo = bisect.bisect_left(part.firsts, from_seq)
            hi = len(part.firsts) if to_seq is None else bisect.bisect_right(part.firsts, to_seq)
            found = [part.items[f] for f in part.firsts[lo:hi]]
        return iter(found if limit is None else found[:limit])

    def item_before(self, at: ShardAddress, seq: int) -> BatchItem | None:
        with self._lock:
            part = self._part(at)
            index = bisect.bisect_right(part.firsts, seq)
            return part.items[part.firsts[index - 1]] if index else None

    def items(
        self, at: ShardAddress, firsts: Iterable[int], *, consistent: bool = True
    ) -> dict[int, BatchItem]:
        with self._lock:
            part = self._part(at)
            return {f: part.items[f] for f in set(firsts) if f in part.items}

    def items_available(self, wanted: Sequence[tuple[ShardAddress, int]]) -> dict[tuple[str, int], BatchItem]:
        out: dict[tuple[str, int], BatchItem] = {}
        for at, first in wanted:
            found = self.items(at, [first])
            if first in found:
                out[(at.pk, first)] = found[first]
        return out

    def set_expiry(self, at: ShardAddress, first: int, expires_s: int) -> bool:
        with self._lock:
            part = self._part(at)
            if first not in part.items:
                return False
            part.items[first] = replace(part.items[first], expires_s=expires_s)
            return True

    def delete_items(self, at: ShardAddress, firsts: Sequence[int]) -> None:
        with self._lock:
            part = self._part(at)
            for first in firsts:
                if part.items.pop(first, None) is not None:
                    part.firsts.remove(first)

    def messages(self, at: ShardAddress, item: BatchItem) -> Sequence[StoredMessage]:
        if item.gap or item.payload is None:
            return []
        if isinstance(item.payload, ObjectPayload):
            objects = self._part(at).objects

            def read(key: str, lo: int, hi: int) -> bytes | None:
                return objects[key][lo:hi] if key in objects else None

            payload = item.payload
            return ItemMessages(read, payload.key, payload.base, codec.decode_batch(payload.index))
        return list(codec.decode_batch(item.payload.data))

    def body_sizes(self, at: ShardAddress, item: BatchItem) -> list[int]:
        if isinstance(item.payload, ObjectPayload):
            return [m.body_size for m in codec.decode_batch(item.payload.index)]
        return [m.body_size for m in self.messages(at, item)]

    def body(self, at: ShardAddress, message: StoredMessage) -> bytes:
        if not message.overflow_key:
            return message.body
        return self._part(at).overflow.get(message.overflow_key, b"")

    # --- consumer groups, in lanes -----------------------------------------------------------------------

    def _lane(self, at: ShardAddress, group: str, lane: int) -> _LaneItem:
        return self._part(at).lanes.setdefault((group, lane), _LaneItem())

    def _view(self, at: ShardAddress, group: str, every_lane: bool = True) -> GroupLanes:
        cursor = self._lane(at, group, 0).cursor()
        count = 1 if cursor is None or not every_lane else cursor.high
        lanes = {lane: self._lane(at, group, lane).typed(lane) for lane in range(count)}
        return GroupLanes(cursor, lanes)

    def read_groups(
        self,
        ats: Sequence[ShardAddress],
        groups: Sequence[str],
        *,
        partial: bool = False,
        every_lane: bool = True,
        fail_fast: bool = False,
    ) -> tuple[list[ShardView], list[ShardAddress]]:
        with self._lock:
            views = [
                ShardView(
                    at, self._part(at).head or Head(), {g: self._view(at, g, every_lane) for g in groups}
                )
                for at in ats
            ]
            return views, []

    def read_other_lanes(
        self,
        views: Sequence[ShardView],
        *,
        fail_fast: bool = False,
        skip: Container[tuple[str, str, int]] = frozenset(),
    ) -> tuple[list[ShardView], list[ShardAddress]]:
        with self._lock:
            out = []
            for view in views:
                groups = {}
                for g, given in view.groups.items():
                    high = 1 if given.cursor is None else given.cursor.high
                    at = view.address
                    lanes = {
                        lane: self._lane(at, g, lane).typed(lane)
                        for lane in range(1, high)
                        if (at.pk, g, lane) not in skip
                    }
                    groups[g] = GroupLanes(given.cursor, {0: given.lane0, **lanes})
                out.append(ShardView(view.address, view.head, groups))
            return out, []

    def read_lanes(
        self,
        at: ShardAddress,
        group: str,
        lanes: Sequence[int],
        *,
        head: bool,
        cursor: bool = True,
        fail_fast: bool = False,
        consistent: bool = True,
    ) -> LaneRead:
        with self._lock:
            wanted = sorted({0, *lanes} if cursor else set(lanes))
            return LaneRead(
                (self._part(at).head or Head()) if head else None,
                self._lane(at, group, 0).cursor() if cursor else None,
                {lane: self._lane(at, group, lane).typed(lane) for lane in wanted},
            )

    def glance(
        self, ats: Sequence[ShardAddress], lanes: Sequence[LaneAddress]
    ) -> tuple[list[Head], list[int]]:
        with self._lock:
            heads = [self._part(at).head or Head() for at in ats]
            return heads, [self._lane(r.at, r.group, r.lane).version for r in lanes]

    def commit_lane(
        self,
        at: ShardAddress,
        group: str,
        lane: int,
        state: GroupState,
        old_version: int,
        *,
        now_ms: int,
        folded: frozenset[str] = frozenset(),
        acks_added: int | None = None,
    ) -> None:
        with self._lock:
            item = self._lane(at, group, lane)
            if item.version != old_version or (acks_added is not None and item.added != acks_added):
                self.conflicts += 1
                raise StateConflict(item.typed(lane), item.cursor() if lane == 0 else None)
            item.version, item.blob, item.last_ms = old_version + 1, state.encode(), now_ms
            item.acked -= folded
            self.writes += 1

    def claim(
        self, at: ShardAddress, group: str, lane: int, count: int, *, limit: int, seen_hi: int | None
    ) -> tuple[int, int]:
        with self._lock:
            zero = self._lane(at, group, 0)
            current = zero.ranges.get(lane)
            ok = zero.next is not None and zero.next <= limit and zero.lanes > lane
            if not ok or (current[1] if current else None) != seen_hi:
                self.conflicts += 1
                raise ClaimRefused(zero.cursor())
            assert zero.next is not None
            zero.ranges[lane] = (zero.next, zero.next + count)
            zero.next += count
            self.writes += 1
            return zero.ranges[lane]

    def record_acks(self, at: ShardAddress, group: str, lane: int, records: frozenset[str]) -> None:
        with self._lock:
            item = self._lane(at, group, lane)
            item.acked |= records
            item.added += 1
            self.writes += 1

    def split(self, at: ShardAddress, group: str, lanes: int, stripe: int = 0) -> bool:
        with self._lock:
            zero = self._lane(at, group, 0)
            if zero.next is not None or zero.blob is None:
                return False
            read = GroupState.decode(zero.blob, zero.version).read
            zero.next, zero.lanes, zero.high, zero.stripe = read, lanes, lanes, stripe
            zero.epoch += 1 if stripe else 0
            zero.ranges[0] = (read, read)
            zero.version += 1
            return True

    def set_lanes(self, at: ShardAddress, group: str, lanes: int, high: int, seen: Cursor) -> bool:
        with self._lock:
            zero = self._lane(at, group, 0)
            if zero.next is None or (zero.lanes, zero.high) != (seen.lanes, seen.high):
                return False
            zero.lanes, zero.high = lanes, high
            return True

    def set_ceiling(self, at: ShardAddress, group: str, ceiling: int, seen: Cursor) -> bool:
        with self._lock:
            zero = self._lane(at, group, 0)
            if zero.next is None or zero.ceiling != seen.ceiling:
                return False
            zero.ceiling = ceiling
            self.writes += 1
            return True

    def merge(
        self,
        at: ShardAddress,
        group: str,
        lane0: GroupState,
        old_version: int,
        seen: Cursor,
        stripes: Mapping[int, GroupState] | None = None,
    ) -> bool:
        with self._lock:
            zero = self._lane(at, group, 0)
            if zero.version != old_version or zero.next != seen.next:
                return False
            retiring = [(self._lane(at, group, lane), state) for lane, state in (stripes or {}).items()]
            if any(item.version != state.version for item, state in retiring):
                return False
            for item, state in retiring:
                item.version, item.blob, item.retired = state.version + 1, state.encode(), seen.epoch
            zero.version, zero.blob = old_version + 1, lane0.encode()
            zero.next, zero.lanes, zero.high, zero.ranges, zero.ceiling = None, 1, 1, {}, MAX_LANES
            zero.stripe = 0
            return True

    def put_state(self, at: ShardAddress, group: str, state: GroupState) -> None:
        with self._lock:
            zero = self._lane(at, group, 0)
            zero.version, zero.blob = max(1, state.version), state.encode()
            self.writes += 1

    def delete_group(self, at: ShardAddress, group: str) -> None:
        with self._lock:
            lanes = self._part(at).lanes
            for key in [k for k in lanes if k[0] == group]:
                del lanes[key]


@dataclass
class _LaneItem:
    version: int = 0
    blob: bytes | None = None
    acked: frozenset[str] = frozenset()
    last_ms: int = 0
    added: int = 0  # ADDs of ack records
    next: int | None = None  # lane 0: the cursor (None: one lane)
    lanes: int = 1
    high: int = 1
    ranges: dict[int, tuple[int, int]] = field(default_factory=dict)
    ceiling: int = MAX_LANES
    stripe: int = 0
    epoch: int = 0
    retired: int = 0

    def typed(self, lane: int) -> LaneState:
        state = GroupState() if self.blob is None else GroupState.decode(self.blob, self.version)
        return LaneState(lane, state, self.acked, self.last_ms, self.added, self.retired)

    def cursor(self) -> Cursor | None:
        if self.next is None:
            return None
        return Cursor(
            self.next, self.lanes, self.high, dict(self.ranges), self.ceiling, self.stripe, self.epoch
        )
