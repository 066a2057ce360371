"""What a pass sees of a queue: per-shard rates against the previous pass, drained and flushed shards,
backlog per group and the oldest unacked message's age, all from shard state read with the purge floor
applied (`sluice.engine.shardstate`), so purged messages count nowhere."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress

from sluice import errors
from sluice.adapters.dynamo import Table
from sluice.engine import keys
from sluice.engine.backend import Backend
from sluice.engine.lanes import GroupLanes
from sluice.engine.scaling import LaneObservation, ShardObservation
from sluice.engine.shardstate import ShardRead
from sluice.engine.store import ShardAddress
from sluice.models import Queue, Shard

OLDEST_AGE_PAIRS = 100  # shard x group pairs read for the oldest message: one BatchGetItem
# ... of which at most this many on striped shards, whose level is not an item's first sequence (a
# stripe's next block starts inside an item), are looked up with a Query for the item holding it
OLDEST_AGE_LOOKUPS = 16


def shard_observation(
    read: ShardRead, before: list[int], dt: float, drained: bool, flushed: bool
) -> ShardObservation:
    """One shard's rates: its HEAD counters' growth since the previous pass (`before`), over `dt` s."""
    current = read.head.counters
    rates = [max(0, a - b) / dt if dt > 0 else 0.0 for a, b in zip(current, before, strict=True)]
    return ShardObservation(
        id=read.shard.id,
        state=read.shard.state,
        requests_per_s=rates[0],
        messages_per_s=rates[1],
        bytes_per_s=rates[2],
        throttles_per_s=rates[3],
        conflicts_per_s=rates[4],
        head_sealed=read.head.sealed,
        drained=drained,
        flushed=flushed,
    )


def lane_observation(read: ShardRead, lanes: GroupLanes, now_ms: int, busy_ms: int) -> LaneObservation | None:
    """A group's lanes on a shard for the consumer-pressure policy (None: one lane, not split)."""
    cursor = lanes.cursor
    if cursor is None:
        return None
    busy = sum(1 for k, ls in lanes.lanes.items() if k < cursor.lanes and now_ms - ls.last_ms <= busy_ms)
    unclaimed = lanes.unclaimed(read.head.next, read.head.floor)
    return LaneObservation(cursor.ceiling, cursor.lanes, busy, unclaimed)


def unreadable_observation(shard: Shard) -> ShardObservation:
    """A shard whose HEAD read was throttled on every retry: no rates, a saturated partition (the policy
    counts it as a full ceiling with throttles, `sluice.engine.scaling`)."""
    return ShardObservation(id=shard.id, state=shard.state, unreadable=True)


def counts_to_keep(
    before: Mapping[str, list[int]], reads: list[ShardRead], unread: list[Shard]
) -> dict[str, list[int]]:
    """The HEAD counters the next pass measures rates against. An unread shard keeps its older counters:
    its next rate spans two passes over one interval, an overestimate on a saturated shard (the side
    that scales up), where no entry would count the shard's whole history as one interval's growth."""
    kept = {str(s.id): before[str(s.id)] for s in unread if str(s.id) in before}
    return kept | {str(r.shard.id): list(r.head.counters) for r in reads}


def backlog(queue: Queue, reads: list[ShardRead]) -> dict[str, int]:
    """Unacked messages per group over the shards read."""
    return {g: sum(r.backlog(g) for r in reads) for g in sorted(queue.groups)}


def oldest_age_s(backend: Backend, queue: Queue, reads: list[ShardRead], now: int) -> float:
    """Age of the oldest unacked message over groups: one BatchGetItem of the items holding each
    group's ack level (at most 100 shardxgroup pairs, the largest backlogs first), and, on striped
    shards, a Query for the item holding a level that no item starts at (a stripe's next block: blocks
    of 100 sequences do not line up with the items sends wrote; up to OLDEST_AGE_LOOKUPS, the largest
    backlogs first). A claim's start that no item starts at is still left out (claims mostly begin where
    a lane's read stands; a Query each pass for them slowed `sluice local`'s coordinator on moto, whose
    Query walks the whole table). Items still throttled after the retries are left out of this pass's
    figure."""
    candidates = []
    for read in reads:
        for group, lanes in read.groups.items():
            pending = read.backlog(group)
            item = lanes.oldest_item(read.head.next, read.head.floor)
            if pending > 0 and item is not None:
                striped = lanes.cursor is not None and lanes.cursor.stripe > 0
                candidates.append((pending, read.address, item, striped))
    candidates.sort(key=lambda x: -x[0])
    wanted: dict[tuple[str, int], tuple[ShardAddress, int, bool]] = {}
    for _, at, item, striped in candidates[:OLDEST_AGE_PAIRS]:
        wanted.setdefault((at.pk, item), (at, item, striped))
    if not wanted:
        return 0.0
    # a throttled item: skipped, not fatal
    found = backend.store.items_available([(at, item) for at, item, _ in wanted.values()])
    stamps = [it.ts for it in found.values() if it.ts]
    missed = [(at, seq) for key, (at, seq, striped) in wanted.items() if striped and key not in found]
    for at, seq in missed[:OLDEST_AGE_LOOKUPS]:
        with suppress(errors.Throttled):
            holder = backend.store.item_before(at, seq)
            if holder is not None and holder.end > seq and not holder.gap and holder.ts:
                stamps.append(holder.ts)
    return max(0.0, (now - min(stamps)) / 1000) if stamps else 0.0


def shard_is_flushed(control: Table, queue: Queue, shard: Shard, head_next: int) -> bool:
    """Every sequence below `head_next` is in an S3 segment (bottomless queues): the newest entry of the
    shard's segment index (`sluice.segments`, written by the shard worker) reaches `head_next - 1`."""
    if head_next <= 0:
        return True
    pk = keys.segment_index_pk(queue.name, queue.incarnation, shard.id)
    newest = next(iter(control.query(pk, forward=False, limit=1, consistent=True)), None)
    return newest is not None and int(newest.get(keys.SEGMENT_LAST, -1)) + 1 >= head_next
