"""Reading shard state: a shard's HEAD with its consumer groups' lanes, the purge floor applied once.

Purge writes a floor on each HEAD (`sluice.engine.operations`); every reader of a group's state must
see what the floor removed as gone. Consume, the coordinator, metrics and peek all read through here,
so the figures they compute agree: after a purge the backlog is 0 everywhere.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass, field

from sluice.engine.lanes import Figures, GroupLanes
from sluice.engine.store import Head, ShardAddress, ShardStore, ShardView
from sluice.models import Queue, Shard

NEVER = 2**62  # a time no lease or delay reaches: `figures(group, NEVER)` counts every pending entry as due


@dataclass
class ShardRead:
    """One shard's HEAD and the lanes of the groups asked for, floor applied."""

    address: ShardAddress
    head: Head
    groups: dict[str, GroupLanes]
    floored: dict[str, set[int]] = field(
        default_factory=dict
    )  # group -> lanes whose state predates the floor

    @property
    def shard(self) -> Shard:
        return self.address.shard

    def figures(self, group: str, now_ms: int) -> Figures:
        return self.groups[group].figures(self.head.next, now_ms, self.head.floor)

    def backlog(self, group: str) -> int:
        """Messages of one shard the group has not acked: unread ones plus pending (in flight, delayed)."""
        return self.figures(group, NEVER).backlog

    def drained(self, groups: Iterable[str]) -> bool:
        """Sealed HEAD (its `next` is final) and every group's ack level at or past it."""
        head = self.head
        return head.sealed and all(
            self.groups[g].ack_level(head.next, head.floor) >= head.next for g in groups
        )


class ShardStateReader:
    def __init__(self, store: ShardStore) -> None:
        self.store = store

    def read(self, queue: Queue, shards: Sequence[Shard], groups: Sequence[str]) -> list[ShardRead]:
        """HEADs and the groups' every lane of `shards`, consistent; keys throttled on every retry end
        in `Throttled`."""
        ats = [ShardAddress.of(queue, s) for s in shards]
        views, _ = self.store.read_groups(ats, groups)
        return [_floored(v) for v in views]

    def read_available(
        self,
        queue: Queue,
        shards: Sequence[Shard],
        groups: Sequence[str],
        *,
        every_lane: bool = True,
        fail_fast: bool = False,
    ) -> tuple[list[ShardRead], list[Shard]]:
        """`read`, for a reader that can act on part of the shards (the coordinator, a pull): the shards
        read, and those with a key still throttled after the retries (`fail_fast`: on the first call;
        their partition is saturated)."""
        ats = [ShardAddress.of(queue, s) for s in shards]
        views, unread = self.store.read_groups(
            ats, groups, partial=True, every_lane=every_lane, fail_fast=fail_fast
        )
        return [_floored(v) for v in views], [at.shard for at in unread]

    def read_other_lanes(
        self,
        reads: Sequence[ShardRead],
        *,
        fail_fast: bool = False,
        skip: Container[tuple[str, str, int]] = frozenset(),
    ) -> tuple[list[ShardRead], list[Shard]]:
        """`reads` (HEAD and lane 0 read moments ago) with their other lanes read now, but `skip`'s, and
        the shards whose lanes could not be read (`store.read_other_lanes`)."""
        views, unread = self.store.read_other_lanes(
            [ShardView(r.address, r.head, r.groups) for r in reads], fail_fast=fail_fast, skip=skip
        )
        given = {r.address.pk: r for r in reads}
        out = []
        for view in views:
            read = _floored(view)
            for group, lanes in given[view.address.pk].floored.items():  # lane 0's floor, applied then
                read.floored[group] = read.floored.get(group, set()) | lanes
            out.append(read)
        return out, [at.shard for at in unread]


def _floored(view: ShardView) -> ShardRead:
    read = ShardRead(view.address, view.head, view.groups)
    read.floored = {g: lanes.apply_floor(view.head.floor) for g, lanes in view.groups.items()}
    return read
