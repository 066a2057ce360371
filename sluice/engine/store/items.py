"""What crosses the shard-store port: typed items, never raw attribute maps.

A shard's partition holds its HEAD (allocation, seal, purge floor, flush marks, write counters), its
batch items (`M#<first seq>`: messages or a gap tombstone) and its consumer groups' states. The
names of attributes and keys are `sluice.engine.keys`; only the store implementations use them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sluice.engine import keys
from sluice.engine.lanes import Cursor, GroupLanes, LaneState
from sluice.models import Queue, Shard


@dataclass(frozen=True)
class ShardAddress:
    """Where a shard's items live: its queue incarnation and the shard (which names table and region)."""

    queue: str
    incarnation: str
    shard: Shard

    @classmethod
    def of(cls, queue: Queue, shard: Shard) -> ShardAddress:
        return cls(queue.name, queue.incarnation, shard)

    @property
    def pk(self) -> str:
        return keys.shard_partition(self.queue, self.incarnation, self.shard.id)

    @property
    def id(self) -> int:
        return self.shard.id


@dataclass(frozen=True)
class LaneAddress:
    """One lane item: a group's lane on a shard."""

    at: ShardAddress
    group: str
    lane: int


@dataclass(frozen=True)
class Head:
    """A shard's HEAD item (an absent HEAD reads as a fresh shard, `exists` False). `map_version` and
    `map_route` are the shard map the control plane stamped (`mv`, `mo`: sluice/engine/maproute.py),
    0 and "" before any stamp."""

    next: int = 0
    ts: int = 0
    floor: int = 0
    sealed: bool = False
    flushed: int = 0
    ttl_set: int = 0
    producer_version: int = 0
    map_version: int = 0
    map_route: str = ""
    counters: tuple[int, ...] = (0,) * len(keys.HEAD_COUNTERS)  # running totals, in HEAD_COUNTERS order
    exists: bool = False  # the item is there (a shard nobody has written to has none)


@dataclass(frozen=True)
class InlinePayload:
    """The batch's messages encoded in the item itself (`sluice.codec.encode_batch`)."""

    data: bytes


@dataclass(frozen=True)
class ObjectPayload:
    """The batch's bodies in an S3 object of the shard's region (the payload tier, sluice.engine.payloads):
    `index` is the codec blob of the messages' headers with empty bodies and each body's length, the
    bodies lie back to back in the object from `base` on. The store is the one place that resolves a
    payload into messages."""

    key: str
    index: bytes
    base: int = 0


Payload = InlinePayload | ObjectPayload


@dataclass(frozen=True)
class BatchItem:
    """Sequences [first, first + count) written at `ts`; or a gap tombstone (`gap`, count 1)."""

    first: int
    count: int
    ts: int
    gap: bool = False
    payload: Payload | None = None
    expires_s: int | None = None  # the TTL attribute: gone once passed, swept or not

    @property
    def end(self) -> int:
        return self.first + self.count

    def expired(self, now_ms: int) -> bool:
        """DynamoDB TTL semantics: an item whose expiry (epoch seconds) has passed is gone."""
        return self.expires_s is not None and self.expires_s * 1000 <= now_ms


@dataclass(frozen=True)
class HeadCounts:
    """What one allocation adds to the HEAD's write counters (`sluice.engine.counters`)."""

    requests: int = 1
    messages: int = 0
    bytes: int = 0
    throttles: int = 0
    conflicts: int = 0


@dataclass
class HeadGuard:
    """Extra state changed on the shard head atomically with an allocation (open-protocol streams:
    closure, producer epochs and sequences). The allocation holds only while the head's `field`
    still has the value `expected` the caller decided on (optimistic concurrency); `updates` are SET
    in the same write."""

    field: str
    expected: int | None  # None: the attribute must not exist yet
    updates: dict[str, Any]


@dataclass(frozen=True)
class Allocation:
    first_seq: int
    timestamp_ms: int
    map_version: int = 0  # the HEAD's `mv` after the allocation (see Head.map_version)
    map_route: str = ""  # and its `mo`


@dataclass
class ShardView:
    """One shard's HEAD and the groups asked for, every lane that may hold work, as stored (no floor
    applied)."""

    address: ShardAddress
    head: Head
    groups: dict[str, GroupLanes] = field(default_factory=dict)


@dataclass
class LaneRead:
    """Some lanes of one group on one shard, and lane 0's cursor (read with them); the HEAD when asked."""

    head: Head | None
    cursor: Cursor | None
    lanes: dict[int, LaneState]


class AllocationRefused(Exception):
    """The HEAD's condition failed: sealed, a newer producer version, a clock ahead of ours, or the
    guard's field changed. `head` is the HEAD as the failed write found it."""

    def __init__(self, head: Head, guard_value: int | None = None) -> None:
        super().__init__("allocation refused")
        self.head = head
        self.guard_value = guard_value


class SlotTaken(Exception):
    """A batch item's key was already taken (a gap sealed it): nothing was written."""


class StateConflict(Exception):
    """A lane's commit lost the race: `winner` is the lane as stored now (`cursor` too, for lane 0)."""

    def __init__(self, winner: LaneState, cursor: Cursor | None) -> None:
        super().__init__("group state changed")
        self.winner = winner
        self.cursor = cursor


class ClaimRefused(Exception):
    """A claim did not apply (another claim of the lane won, the lanes were reduced, or the backlog
    is smaller than the claim): `cursor` is the cursor as stored now (None: the lanes were merged)."""

    def __init__(self, cursor: Cursor | None) -> None:
        super().__init__("claim refused")
        self.cursor = cursor
