"""The shard-store port: every read and write of a shard's items goes through one `ShardStore`.

Implementations: `sluice.engine.store.dynamo.DynamoShardStore` (the shard tables; the twin runs it
on its in-memory DynamoDB) and `sluice.engine.store.memory.MemoryShardStore` (a dict, for unit tests
of the engine's logic). Both keep the same conditions, so a test on one holds for the other.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from typing import Protocol

from sluice.codec import StoredMessage
from sluice.engine.groupstate import GroupState
from sluice.engine.lanes import Cursor
from sluice.engine.store.items import (
    Allocation,
    BatchItem,
    Head,
    HeadCounts,
    HeadGuard,
    LaneAddress,
    LaneRead,
    ShardAddress,
    ShardView,
)


class ShardStore(Protocol):
    # --- HEAD ---------------------------------------------------------------------------------------------

    def head(self, at: ShardAddress) -> Head:
        """The HEAD, read consistently (a shard never written reads as `Head()`)."""
        ...

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
        """Take `count` sequences: one conditional write (not sealed, `ts <= now`, producer version not
        older, guard field unchanged) that returns the whole HEAD (its map stamp too). Raises
        `AllocationRefused` with the HEAD it found. `fail_fast`: a throttle is not retried (the caller
        has another shard to go to); an outage still is."""
        ...

    def stamp_map(self, at: ShardAddress, version: int, route: str) -> bool:
        """Stamp the HEAD with the shard map's `version` and this region's `route` unless it names that
        version or a newer one already (False then); a HEAD nobody wrote yet is made. Not retried on a
        throttle (raises `Throttled`: the next coordinator pass stamps it)."""
        ...

    def set_floor(self, at: ShardAddress) -> None:
        """Purge: `floor = next` (a shard never written gets a HEAD with floor 0)."""
        ...

    def seal(self, at: ShardAddress, now_ms: int) -> None:
        """No more allocations on this shard (idempotent: the first seal's time is kept)."""
        ...

    def mark_flushed(self, at: ShardAddress, old: int, new: int) -> bool:
        """Move `flushed` from `old` to `new`; False when another worker moved it first."""
        ...

    def mark_ttl_set(self, at: ShardAddress, end: int) -> None:
        """Record that items below `end` have their expiry (never moves back)."""
        ...

    # --- batch items --------------------------------------------------------------------------------------

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
        """Store one batch item keyed by `first`; raises `SlotTaken` when a gap tombstone got there first.
        With `object_key`, the item indexes a payload-tier object (its bodies, from `object_base` on)
        that the caller already wrote: `messages` carry empty bodies and their lengths."""
        ...

    def seal_gap(self, at: ShardAddress, start: int, end: int, now_ms: int) -> bool:
        """Tombstone every sequence in [start, end) (see sluice.engine.gaps); False when a slot was taken."""
        ...

    def scan(
        self, at: ShardAddress, from_seq: int, *, to_seq: int | None = None, limit: int | None = None
    ) -> Iterator[BatchItem]:
        """Batch items whose first sequence is in [from_seq, to_seq], in order, at most `limit`."""
        ...

    def item_before(self, at: ShardAddress, seq: int) -> BatchItem | None:
        """The last batch item whose first sequence is at or below `seq`."""
        ...

    def items(
        self, at: ShardAddress, firsts: Iterable[int], *, consistent: bool = True
    ) -> dict[int, BatchItem]:
        """The batch items starting at `firsts` that exist, by first sequence."""
        ...

    def items_available(self, wanted: Sequence[tuple[ShardAddress, int]]) -> dict[tuple[str, int], BatchItem]:
        """Batch items over several shards, eventually consistent, by (partition, first); items still
        throttled after the retries are left out (for figures that can do without them)."""
        ...

    def set_expiry(self, at: ShardAddress, first: int, expires_s: int) -> bool:
        """Give an existing batch item its expiry; False when it is gone (swept)."""
        ...

    def delete_items(self, at: ShardAddress, firsts: Sequence[int]) -> None: ...

    def messages(self, at: ShardAddress, item: BatchItem) -> Sequence[StoredMessage]:
        """The item's messages, whatever holds its payload (the one place that resolves one). A
        payload-tier item's bodies come from S3 when first read (sluice.engine.payloads.ItemMessages)."""
        ...

    def body_sizes(self, at: ShardAddress, item: BatchItem) -> list[int]:
        """Each message's body length, without fetching any body from S3."""
        ...

    def body(self, at: ShardAddress, message: StoredMessage) -> bytes:
        """A message's whole body (one larger than an item allows lives in the segment bucket)."""
        ...

    # --- consumer groups, in lanes (sluice.engine.lanes) --------------------------------------------------

    def read_groups(
        self,
        ats: Sequence[ShardAddress],
        groups: Sequence[str],
        *,
        partial: bool = False,
        every_lane: bool = True,
        fail_fast: bool = False,
    ) -> tuple[list[ShardView], list[ShardAddress]]:
        """HEADs and the groups' lanes, consistently: lane 0 (with the cursor), then (`every_lane`) the
        other lanes the cursor says may hold work. (views, shards left unread): without `partial`, keys
        still throttled after the retries raise `Throttled`; with it, their shards are returned unread.
        `fail_fast`: keys throttled on the first call are not asked again (a pull holding leases)."""
        ...

    def read_other_lanes(
        self,
        views: Sequence[ShardView],
        *,
        fail_fast: bool = False,
        skip: Container[tuple[str, str, int]] = frozenset(),
    ) -> tuple[list[ShardView], list[ShardAddress]]:
        """Lanes 1 .. high - 1 of the split groups of shards whose HEAD and lane 0 (with the cursor) the
        caller read moments ago (`views`, kept as given: a pull's second survey does not read the shard's
        partition again), but those in `skip` ((shard pk, group, lane): absent from the views). New views
        with those lanes, and the shards whose lanes stayed throttled (left out, as `read_groups` with
        `partial`; `fail_fast` as there)."""
        ...

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
        """`lanes` of one group on one shard, consistently unless told (`consistent`: half the read
        units, a state up to moments old); with `cursor` lane 0 too (its item holds the cursor); the HEAD
        with `head`. Without `cursor`, `LaneRead.cursor` is None: unknown. `fail_fast` as in
        `read_groups`."""
        ...

    def glance(
        self, ats: Sequence[ShardAddress], lanes: Sequence[LaneAddress]
    ) -> tuple[list[Head], list[int]]:
        """The HEADs of `ats` and the versions of `lanes` (in order), eventually consistent: half the read
        units, for a long-poll asking whether anything moved since its consistent survey (an item may
        read older than stored, never newer). Keys throttled on every retry end in `Throttled`."""
        ...

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
        """Store the lane's `state` as version `old_version + 1` (stamped `now_ms`) if that is still the
        stored one, dropping the ack records it `folded` in; with `acks_added` (a commit that redelivers),
        only while no ack was recorded since the lane was read. Raises `StateConflict`."""
        ...

    def claim(
        self, at: ShardAddress, group: str, lane: int, count: int, *, limit: int, seen_hi: int | None
    ) -> tuple[int, int]:
        """Take the next `count` unclaimed sequences for `lane` (lanes split): one write on lane 0's
        item that never reaches past `limit + count` (the caller passes HEAD `next` - `count`) and holds
        only while the lane's latest claim still ends at `seen_hi`. Raises `ClaimRefused`."""
        ...

    def record_acks(self, at: ShardAddress, group: str, lane: int, records: frozenset[str]) -> None:
        """Record acks on the lane's item (an ADD to a set, and one to the count of such ADDs: never fails
        a condition)."""
        ...

    def split(self, at: ShardAddress, group: str, lanes: int, stripe: int = 0) -> bool:
        """One lane → `lanes`: the cursor starts at lane 0's read level as stored (lane 0 keeps its pending
        set; its version moves on, so no puller commits over the split). With `stripe`, lanes 1 .. lanes
        - 1 read blocks of that many sequences in turn, in a new epoch (`Cursor`). False when already
        split or lane 0 never committed."""
        ...

    def set_lanes(self, at: ShardAddress, group: str, lanes: int, high: int, seen: Cursor) -> bool:
        """How many lanes may claim / may hold work; False when the cursor's counts changed meanwhile."""
        ...

    def set_ceiling(self, at: ShardAddress, group: str, ceiling: int, seen: Cursor) -> bool:
        """How many lanes pullers may widen to while split (the coordinator's call); False when the group
        merged or the ceiling changed since `seen`. Touches no lane's state or version."""
        ...

    def merge(
        self,
        at: ShardAddress,
        group: str,
        lane0: GroupState,
        old_version: int,
        seen: Cursor,
        stripes: Mapping[int, GroupState] | None = None,
    ) -> bool:
        """Back to one lane: lane 0 reads on from `lane0.read` (the caller saw every lane hold nothing and
        nothing unclaimed, in `seen`); holds only while lane 0's version and the cursor are as seen (every
        claim moves the cursor, so no lane gained work). A striped split's lanes (`stripes`: each stripe
        lane's state as seen, with its version) are retired with it, all or none, each only while its
        version is as seen. False when anything changed meanwhile."""
        ...

    def put_state(self, at: ShardAddress, group: str, state: GroupState) -> None:
        """Store lane 0's state unconditionally (a group created at the shards' heads)."""
        ...

    def delete_group(self, at: ShardAddress, group: str) -> None:
        """Every lane item of the group on the shard."""
        ...
