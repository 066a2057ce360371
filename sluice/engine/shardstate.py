"""Reading shard state: a shard's HEAD with its consumer groups' states, the purge floor applied once.

Purge writes a floor on each HEAD (`sluice.engine.operations`); every reader of a group state must
see what the floor removed as gone. Consume, the coordinator, metrics and peek all read through here,
so the backlog they compute agrees: after a purge it is 0 everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sluice.engine.groupstate import GroupState
from sluice.engine.store import Head, ShardAddress, ShardStore, ShardView
from sluice.models import Queue, Shard


def apply_floor(state: GroupState, floor: int) -> bool:
    """Drop what a purge removed: move the read level up to the floor, forget pending entries below it.
    True when the state changed (a writer must commit it)."""
    changed = False
    if state.read < floor:
        state.read = state.read_item = floor
        changed = True
    gone = [seq for seq in state.pending if seq < floor]
    for seq in gone:
        del state.pending[seq]
    return changed or bool(gone)


def backlog(state: GroupState, head_next: int) -> int:
    """Messages of one shard the group has not acked: unread ones plus pending (in flight, delayed)."""
    return max(0, head_next - state.read) + len(state.pending)


@dataclass
class ShardRead:
    """One shard's HEAD and the states of the groups asked for, floor applied."""

    address: ShardAddress
    head: Head
    states: dict[str, GroupState]
    floored: set[str] = field(default_factory=set)  # groups whose stored state predates the floor

    @property
    def shard(self) -> Shard:
        return self.address.shard

    def backlog(self, group: str) -> int:
        return backlog(self.states[group], self.head.next)

    def drained(self, groups: Iterable[str]) -> bool:
        """Sealed HEAD (its `next` is final) and every group's ack level at or past it."""
        return self.head.sealed and all(self.states[g].ack_level >= self.head.next for g in groups)


class ShardStateReader:
    def __init__(self, store: ShardStore) -> None:
        self.store = store

    def read(self, queue: Queue, shards: Sequence[Shard], groups: Sequence[str]) -> list[ShardRead]:
        """HEADs and group states of `shards` (one BatchGetItem per 100 keys), consistent; keys
        throttled on every retry end in `Throttled`."""
        views, _ = self.store.read_states([ShardAddress.of(queue, s) for s in shards], groups)
        return [_floored(v) for v in views]

    def read_available(
        self, queue: Queue, shards: Sequence[Shard], groups: Sequence[str]
    ) -> tuple[list[ShardRead], list[Shard]]:
        """`read`, for a reader that can act on part of the shards (the coordinator): the shards read,
        and those with a key still throttled after the retries (their partition is saturated)."""
        ats = [ShardAddress.of(queue, s) for s in shards]
        views, unread = self.store.read_states(ats, groups, partial=True)
        return [_floored(v) for v in views], [at.shard for at in unread]

    def read_shard(self, queue: Queue, shard: Shard, groups: Iterable[str]) -> ShardRead:
        """One shard's HEAD and every group's state; groups in `groups` without a state read as fresh."""
        view = self.store.read_every_state(ShardAddress.of(queue, shard))
        for group in groups:
            view.states.setdefault(group, GroupState())
        return _floored(view)


def _floored(view: ShardView) -> ShardRead:
    read = ShardRead(view.address, view.head, view.states)
    read.floored = {g for g, state in read.states.items() if apply_floor(state, read.head.floor)}
    return read
