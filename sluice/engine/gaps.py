"""Gap repair, shared by pull consumers, stream readers and the shard worker.

A broker that allocated a sequence range and died before writing it leaves a gap. After `GAP_WAIT_MS`
a reader seals it: every sequence in the gap gets a tombstone item written with
`attribute_not_exists`, so the late writer's own conditional put fails and its client gets an error
(nothing it was told is stored goes missing). Sealing is idempotent: whoever loses the race to seal
simply re-reads and finds the tombstones.
"""

from __future__ import annotations

from sluice.adapters.dynamo import ConditionFailed, Table
from sluice.engine import keys

GAP_WAIT_MS = 15_000  # a sequence allocated this long ago and never written is sealed as a gap
TOMBSTONE_TTL_SECONDS = 86_400  # tombstones outlive any writer's stall by far


def gap_is_stale(now_ms: int, evidence_ts_ms: int) -> bool:
    """True when `evidence_ts_ms` (the allocation time of a later item, or of the head) is old enough
    that no live writer can still be writing the hole before it."""
    return now_ms - evidence_ts_ms >= GAP_WAIT_MS


def seal_gap(table: Table, pk: str, start: int, end: int, now_ms: int) -> bool:
    """Tombstone every sequence in [start, end): a late writer's put at any of them then fails.

    Each sequence gets its own tombstone because allocation boundaries are unknown to readers. They
    are put one by one in sequence order, each with `attribute_not_exists`; no transaction is needed:
    if the put at `s` finds an item, no item starts in [start, s) (those puts succeeded), so the
    tombstones already written cover only sequences no writer can claim any more. False when a slot
    was taken first (a late write landed, or another reader sealed it): the caller re-reads.
    (Transactions cost twice the write units, and moto copies every table for each one.)
    """
    ttl = now_ms // 1000 + TOMBSTONE_TTL_SECONDS
    for seq in range(start, end):
        try:
            table.put(
                {
                    keys.PK: pk,
                    keys.SK: keys.msg_sk(seq),
                    keys.ITEM_COUNT: 1,
                    keys.ITEM_TS: 0,
                    keys.ITEM_GAP: True,
                    keys.TTL: ttl,
                },
                condition=keys.NEW_ITEM,
            )
        except ConditionFailed:
            return False
    return True
