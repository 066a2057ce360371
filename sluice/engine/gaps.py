"""Gap repair, shared by pull consumers, stream readers and the shard worker.

A broker that allocated a sequence range and died before writing it leaves a gap. After `GAP_WAIT_MS`
a reader seals it (`ShardStore.seal_gap`): every sequence in the gap gets a tombstone item written with
`attribute_not_exists`, so the late writer's own conditional put fails and its client gets an error
(nothing it was told is stored goes missing). Sealing is idempotent: whoever loses the race to seal
simply re-reads and finds the tombstones.

Each sequence gets its own tombstone because allocation boundaries are unknown to readers. They are
put one by one in sequence order, each with `attribute_not_exists`; no transaction is needed: if the
put at `s` finds an item, no item starts in [start, s) (those puts succeeded), so the tombstones
already written cover only sequences no writer can claim any more. (Transactions cost twice the
write units, and moto copies every table for each one.)
"""

from __future__ import annotations

GAP_WAIT_MS = 15_000  # a sequence allocated this long ago and never written is sealed as a gap


def gap_is_stale(now_ms: int, evidence_ts_ms: int) -> bool:
    """True when `evidence_ts_ms` (the allocation time of a later item, or of the head) is old enough
    that no live writer can still be writing the hole before it."""
    return now_ms - evidence_ts_ms >= GAP_WAIT_MS
