"""What a long-poll watches between its surveys: cheap reads that tell where to survey again.

An exact empty answer rests on a strongly consistent read of every HEAD and every lane (`pullplan`):
2 read units a shard. Repeating it every poll interval made an idle long-poll cost 5,248 RRU per 20 s
on 32 shards. Once a survey proved nothing available on a shard (no unread message, nothing due), a
message becomes deliverable there only in one of these ways, each seen without surveying:

- a publish (a redrive too: it publishes) moves the HEAD's `next` (a purge moves its floor: nothing
  becomes deliverable, but the shard's figures change);
- a lease runs out, or a delay or a retry's delay comes due, at a time the survey read (`due_ms`);
- a retry or nack by another consumer commits a lane that held a lease in flight: its version moves.
  A lane with nothing in flight has no lease to retry; it gains one only from a message that was
  available, which moved the HEAD or came due first;
- and for the queue: a pause, a group's deletion, new shards or another map change stamp the HEADs
  with a newer map version.

So between surveys a long-poll reads, eventually consistently (half the units), the HEADs and the items
of the lanes with leases in flight, and surveys again (strongly consistent) the shards that moved, or
every shard when the map moved, and always at the end of the wait: every empty answer is a survey's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sluice.engine.lanes import Figures
from sluice.engine.shardstate import NEVER, ShardRead
from sluice.engine.store import Head, LaneAddress, ShardStore


@dataclass(frozen=True)
class Watch:
    """Each shard's latest survey (strongly consistent, nothing available in it) and how to tell that
    it no longer holds."""

    group: str
    reads: dict[int, ShardRead]  # by shard id
    in_flight: list[tuple[LaneAddress, int]]  # the lanes holding leases in flight, version surveyed
    due_ms: dict[int, int]  # by shard id: the earliest time a pending entry comes due (NEVER: none)

    @classmethod
    def of(cls, reads: Mapping[int, ShardRead], group: str) -> Watch:
        in_flight: list[tuple[LaneAddress, int]] = []
        due_ms: dict[int, int] = {}
        for shard, read in reads.items():
            due_ms[shard] = NEVER
            for lane, ls in read.groups[group].lanes.items():
                done = ls.acked_seqs
                pending = [p for seq, p in ls.state.pending.items() if seq not in done]
                if any(p.leased for p in pending):
                    in_flight.append((LaneAddress(read.address, group, lane), ls.state.version))
                due_ms[shard] = min([due_ms[shard], *(p.due_ms for p in pending)])
        return cls(group, dict(reads), in_flight, due_ms)

    def updated(self, reads: Mapping[int, ShardRead]) -> Watch:
        """This watch with newer surveys of some shards (which found nothing available either)."""
        return Watch.of({**self.reads, **reads}, self.group)

    @property
    def shards(self) -> frozenset[int]:
        return frozenset(self.reads)

    @property
    def next_due_ms(self) -> int:
        return min(self.due_ms.values(), default=NEVER)

    def moved(self, store: ShardStore, now_ms: int, *, skip: frozenset[int] = frozenset()) -> frozenset[int]:
        """The shards a survey may find something on now: those with a pending entry come due and those
        whose HEAD or watched lane moved on (one eventually consistent read; shards in `skip` are not
        read), every shard when a HEAD names a newer map. An item read older than surveyed is no move:
        a lagging replica only delays one."""
        out = {shard for shard, due in self.due_ms.items() if due <= now_ms}
        ats = [read.address for shard, read in self.reads.items() if shard not in skip]
        lanes = [(ref, version) for ref, version in self.in_flight if ref.at.id not in skip]
        heads, versions = store.glance(ats, [ref for ref, _ in lanes])
        for at, head in zip(ats, heads, strict=True):
            seen = self.reads[at.id].head
            if head.map_version > seen.map_version:
                return self.shards
            if _moved(seen, head):
                out.add(at.id)
        out.update(ref.at.id for (ref, seen), now in zip(lanes, versions, strict=True) if now > seen)
        return frozenset(out)

    def figures(self, now_ms: int, *, without: frozenset[int]) -> Figures:
        """The backlog the surveys saw on the shards not in `without` (for an answer's estimate)."""
        total = Figures()
        for shard, read in self.reads.items():
            if shard not in without:
                total.add(read.figures(self.group, now_ms))
        return total


def _moved(seen: Head, now: Head) -> bool:
    """A publish (`next`) or a purge (`floor`)."""
    return now.next > seen.next or now.floor > seen.floor
