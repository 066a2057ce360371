"""The shard-store port: every read and write of a shard's items goes through one `ShardStore`.

Implementations: `sluice.engine.store.dynamo.DynamoShardStore` (the shard tables; the twin runs it
on its in-memory DynamoDB) and `sluice.engine.store.memory.MemoryShardStore` (a dict, for unit tests
of the engine's logic). Both keep the same conditions, so a test on one holds for the other.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol

from sluice.codec import StoredMessage
from sluice.engine.groupstate import GroupState
from sluice.engine.store.items import (
    Allocation,
    BatchItem,
    Head,
    HeadCounts,
    HeadGuard,
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

    # --- consumer-group states ----------------------------------------------------------------------------

    def read_states(
        self, ats: Sequence[ShardAddress], groups: Sequence[str], *, partial: bool = False
    ) -> tuple[list[ShardView], list[ShardAddress]]:
        """HEADs and the groups' states, consistently; (views, shards left unread). Without `partial`,
        keys still throttled after the retries raise `Throttled`; with it, their shards are returned
        unread (a reader that can act on part of them)."""
        ...

    def read_every_state(self, at: ShardAddress) -> ShardView:
        """The HEAD and every group's state of one shard."""
        ...

    def commit_state(self, at: ShardAddress, group: str, state: GroupState, old_version: int) -> None:
        """Store `state` as version `old_version + 1` if `old_version` is still the stored one (0: none
        stored yet); raises `StateConflict` with the stored state otherwise."""
        ...

    def put_state(self, at: ShardAddress, group: str, state: GroupState) -> None:
        """Store `state` unconditionally (a group created at the shards' heads)."""
        ...

    def delete_state(self, at: ShardAddress, group: str) -> None: ...
