"""Reading shard state: a shard's HEAD with its consumer groups' states, the purge floor applied once.

Purge writes a floor on each HEAD (`sluice.engine.operations`); every reader of a group state must
see what the floor removed as gone. Consume, the coordinator, metrics and peek all read through here,
so the backlog they compute agrees: after a purge it is 0 everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sluice.adapters.dynamo import Table, batch_get_across, batch_get_available
from sluice.engine import keys
from sluice.engine.backend import Backend
from sluice.engine.groupstate import GroupState
from sluice.models import Queue, Shard

MAX_BATCH_KEYS = 100  # BatchGetItem's limit


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


def state_from(item: dict[str, Any] | None) -> GroupState:
    """A group state item decoded; absent: a group that never read this shard."""
    if item is None:
        return GroupState()
    return GroupState.decode(item[keys.STATE_BLOB], item[keys.STATE_VERSION])


def backlog(state: GroupState, head_next: int) -> int:
    """Messages of one shard the group has not acked: unread ones plus pending (in flight, delayed)."""
    return max(0, head_next - state.read) + len(state.pending)


@dataclass
class ShardRead:
    """One shard's HEAD and the states of the groups asked for, floor applied."""

    shard: Shard
    table: Table
    pk: str
    head: keys.Head
    states: dict[str, GroupState]
    floored: set[str] = field(default_factory=set)  # groups whose stored state predates the floor

    def backlog(self, group: str) -> int:
        return backlog(self.states[group], self.head.next)

    def drained(self, groups: Iterable[str]) -> bool:
        """Sealed HEAD (its `next` is final) and every group's ack level at or past it."""
        return self.head.sealed and all(self.states[g].ack_level >= self.head.next for g in groups)


class ShardStateReader:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def read(self, queue: Queue, shards: Sequence[Shard], groups: Sequence[str]) -> list[ShardRead]:
        """HEADs and group states of `shards` by BatchGetItem (one call per 100 keys), consistent; keys
        throttled on every retry end in `Throttled`."""
        reads, _ = self._read(queue, shards, groups, partial=False)
        return reads

    def read_available(
        self, queue: Queue, shards: Sequence[Shard], groups: Sequence[str]
    ) -> tuple[list[ShardRead], list[Shard]]:
        """`read`, for a reader that can act on part of the shards (the coordinator): the shards read,
        and those with a key still throttled after the retries (their partition is saturated)."""
        return self._read(queue, shards, groups, partial=True)

    def _read(
        self, queue: Queue, shards: Sequence[Shard], groups: Sequence[str], *, partial: bool
    ) -> tuple[list[ShardRead], list[Shard]]:
        per_call = max(1, MAX_BATCH_KEYS // (1 + len(groups)))
        reads: list[ShardRead] = []
        unread: list[Shard] = []
        for start in range(0, len(shards), per_call):
            chunk = shards[start : start + per_call]
            requests: dict[Table, list[tuple[str, str]]] = {}
            for shard in chunk:
                pk = keys.shard_pk(queue, shard.id)
                requests.setdefault(self.backend.table_for(shard), []).extend(
                    [(pk, keys.HEAD_SK), *((pk, keys.group_state_sk(g)) for g in groups)]
                )
            if partial:
                items, missed = batch_get_available(requests)
            else:
                items, missed = batch_get_across(requests), set()
            missed_pks = {(table_name, pk) for table_name, pk, _ in missed}
            for shard in chunk:
                table = self.backend.table_for(shard)
                pk = keys.shard_pk(queue, shard.id)
                if (table.name, pk) in missed_pks:
                    unread.append(shard)
                    continue
                states = {g: state_from(items.get((table.name, pk, keys.group_state_sk(g)))) for g in groups}
                head = keys.Head.of(items.get((table.name, pk, keys.HEAD_SK)))
                reads.append(_floored(ShardRead(shard, table, pk, head, states)))
        return reads, unread

    def read_shard(self, queue: Queue, shard: Shard, groups: Iterable[str]) -> ShardRead:
        """One shard's HEAD and every group's state by one Query (`G#…` sorts just before `HEAD`); groups
        in `groups` without a state item read as fresh."""
        table = self.backend.table_for(shard)
        pk = keys.shard_pk(queue, shard.id)
        items = table.query(pk, sk_from=keys.GROUP_STATE_SK_PREFIX, sk_to=keys.HEAD_SK, consistent=True)
        head = keys.Head()
        states: dict[str, GroupState] = {}
        for item in items:
            if item[keys.SK] == keys.HEAD_SK:
                head = keys.Head.of(item)
            elif item[keys.SK].startswith(keys.GROUP_STATE_SK_PREFIX):
                states[item[keys.SK][len(keys.GROUP_STATE_SK_PREFIX) :]] = state_from(item)
        for group in groups:
            states.setdefault(group, GroupState())
        return _floored(ShardRead(shard, table, pk, head, states))


def _floored(read: ShardRead) -> ShardRead:
    read.floored = {g for g, state in read.states.items() if apply_floor(state, read.head.floor)}
    return read
