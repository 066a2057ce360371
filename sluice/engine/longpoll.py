"""What a long-poll watches between its exact surveys: cheap reads that tell when to survey again.

An exact empty answer rests on a strongly consistent read of every HEAD and every lane (`pullplan`):
2 read units a shard. Repeating it every poll interval made an idle long-poll cost 5,248 RRU per 20 s
on 32 shards. Once a survey proved nothing available (an exact answer: no unread message, nothing due),
a message can become deliverable only in one of these ways, each seen without surveying:

- a publish (a redrive too: it publishes) moves a HEAD's `next`; a purge moves its floor; a pause, a
  group's deletion, new shards or another map change stamp the HEADs with a newer map version;
- a lease runs out, or a delay or a retry's delay comes due, at a time the survey read (`due_ms`);
- a retry or nack by another consumer commits a lane that held a lease in flight: its version moves.
  A lane with nothing in flight has no lease to retry; it gains one only from a message that was
  available, which moved a HEAD or came due first.

So between surveys a long-poll reads, eventually consistently (half the units), the HEADs and the items
of the lanes with leases in flight, and surveys again (strongly consistent, as before) when one moved,
when `due_ms` passed, or when the wait ends: every empty answer is still a survey's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sluice.engine.shardstate import NEVER, ShardRead
from sluice.engine.store import Head, LaneAddress, ShardAddress, ShardStore


@dataclass(frozen=True)
class Watch:
    """What one survey that found nothing available saw, and how to tell it no longer holds."""

    heads: list[tuple[ShardAddress, Head]]
    in_flight: list[tuple[LaneAddress, int]]  # the lanes holding leases in flight, version surveyed
    due_ms: int  # the earliest time a pending entry comes due (NEVER: none pending)

    @classmethod
    def after(cls, reads: Iterable[ShardRead], group: str) -> Watch:
        heads: list[tuple[ShardAddress, Head]] = []
        in_flight: list[tuple[LaneAddress, int]] = []
        due_ms = NEVER
        for read in reads:
            heads.append((read.address, read.head))
            for lane, ls in read.groups[group].lanes.items():
                done = ls.acked_seqs
                pending = [p for seq, p in ls.state.pending.items() if seq not in done]
                if any(p.leased for p in pending):
                    in_flight.append((LaneAddress(read.address, group, lane), ls.state.version))
                due_ms = min([due_ms, *(p.due_ms for p in pending)])
        return cls(heads, in_flight, due_ms)

    @property
    def shards(self) -> set[int]:
        return {at.id for at, _ in self.heads}

    def moved(self, store: ShardStore, now_ms: int, *, skip: frozenset[int] = frozenset()) -> bool:
        """True when a survey may find something the last one did not: a pending entry came due, or a
        HEAD or a watched lane moved on (one eventually consistent read of them; shards in `skip` are
        not read). An item read older than surveyed is not a move: a lagging replica only delays it."""
        if now_ms >= self.due_ms:
            return True
        heads = [(at, head) for at, head in self.heads if at.id not in skip]
        lanes = [(ref, version) for ref, version in self.in_flight if ref.at.id not in skip]
        now_heads, now_versions = store.glance([at for at, _ in heads], [ref for ref, _ in lanes])
        return any(_moved(seen, now) for (_, seen), now in zip(heads, now_heads, strict=True)) or any(
            now > seen for (_, seen), now in zip(lanes, now_versions, strict=True)
        )


def _moved(seen: Head, now: Head) -> bool:
    """A publish (`next`), a purge (`floor`) or a map change such as a pause (`map_version`)."""
    return now.next > seen.next or now.floor > seen.floor or now.map_version > seen.map_version
