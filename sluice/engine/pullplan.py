"""Which shards a pull reads, in which order: its own region's first (another region's first on a share
of pulls, so no region waits behind a busy one), a sample of each region's shards, plus the shards
of acks the pull carries so they share its write."""

from __future__ import annotations

import random
from collections.abc import Sequence

from sluice.engine.backend import Backend
from sluice.engine.commit import GroupView
from sluice.engine.regions import by_region
from sluice.engine.shardlease import CarriedAcks
from sluice.engine.shardstate import ShardStateReader
from sluice.models import Queue, Shard

SHARDS_PER_PULL = 8  # shards sampled per pull: one BatchGetItem of 2 items each
OTHER_REGION_FIRST = 0.25  # the share of pulls that read another region before their own


class PullPlanner:
    def __init__(self, backend: Backend, states: ShardStateReader) -> None:
        self.backend = backend
        self.states = states

    def regions(self, queue: Queue) -> list[tuple[str | None, list[Shard]]]:
        """The readable shards by region, this region's first; on a share of pulls another region's
        first, so a consumer whose own region always fills its batch still drains the others."""
        ordered = by_region(self.backend, queue.readable_shards)
        if len(ordered) > 1 and random.random() < OTHER_REGION_FIRST:
            ordered.insert(0, ordered.pop(random.randrange(1, len(ordered))))
        return ordered

    def views(
        self, queue: Queue, shards: list[Shard], group: str, carried: CarriedAcks | None
    ) -> tuple[list[GroupView], int]:
        """The group's views of a sample of one region's `shards`, in the order to lease from, and the
        backlog they show (scaled up to the region when only a sample was read)."""
        sample = random.sample(shards, min(SHARDS_PER_PULL, len(shards)))
        if carried:  # read the shards the acks are for too, so their acks share the pull's write
            sample += [s for s in shards if (group, s.id) in carried.ops and s not in sample]
        views = self.read(queue, sample, group)
        backlog = sum(v.work for v in views)
        if len(sample) < len(shards) and sample:
            backlog = backlog * len(shards) // len(sample)  # an estimate when not every shard was read
        random.shuffle(views)  # not fullest-first: every puller would pick the same shard (bench/twin)
        return views, backlog

    def read(self, queue: Queue, shards: Sequence[Shard], group: str) -> list[GroupView]:
        return [
            GroupView(read.address, read.head, read.states[group], group in read.floored)
            for read in self.states.read(queue, shards, [group])
        ]
