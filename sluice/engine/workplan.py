"""The shard-work policy: which shards of a queue get flush, compaction and retention, and when.

Pure (no I/O): the coordinator calls `plan` on every pass, in AWS and in `sluice local` alike, with the
HEAD items it already read, and sends each returned `ShardWorkEvent` to the shard function, which does
exactly what it is told. Rules:
- Flush (every queue, bottomless or not): a shard whose HEAD has records past `flushed`, at most every
  `flush_every_ms` per queue; a sealed shard of a bottomless queue at once (it retires only once in S3).
  Flushing seals stale gaps on its way, so gap repair needs no separate trigger. Compaction follows
  every flush (a flush is what adds segments).
- Maintenance every `maintenance_every_ms` per queue, on every readable shard: compaction (catches up
  a merge that failed or was cut short) and, on queues that are not bottomless, retention of segments.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sluice import constants as c
from sluice.events import ShardAction, ShardWorkEvent
from sluice.models import Queue

FLUSHED_AT = "fl"  # keys of the coordinator's per-queue state item
MAINTAINED_AT = "mt"
_ORDER: tuple[ShardAction, ...] = ("flush", "compact", "retention")


@dataclass(frozen=True)
class ShardWorkPolicy:
    flush_every_ms: int = int(c.DEFAULT_SHARD_FLUSH_SECONDS * 1000)
    maintenance_every_ms: int = int(c.DEFAULT_SHARD_MAINTENANCE_SECONDS * 1000)


@dataclass(frozen=True)
class ShardHead:
    """What the plan needs of one readable shard: its map state and its HEAD's `next` and `flushed`."""

    id: int
    state: str
    next: int
    flushed: int

    @property
    def unflushed(self) -> bool:
        return self.next > self.flushed


def plan(
    queue: Queue,
    heads: Iterable[ShardHead],
    state: dict[str, Any],
    now_ms: int,
    policy: ShardWorkPolicy,
) -> list[ShardWorkEvent]:
    """The events to send now; records in `state` (saved by the caller) when each cadence last ran."""
    heads = list(heads)
    bottomless = queue.settings.bottomless
    flush_due = now_ms - int(state.get(FLUSHED_AT, 0)) >= policy.flush_every_ms
    maintain = now_ms - int(state.get(MAINTAINED_AT, 0)) >= policy.maintenance_every_ms
    per_shard: dict[int, set[ShardAction]] = {}
    flushed_any = False
    for h in heads:
        actions: set[ShardAction] = set()
        urgent = bottomless and h.state == "sealed"
        if h.unflushed and (flush_due or urgent):
            actions |= {"flush", "compact"}
            flushed_any |= flush_due
        if maintain:
            actions.add("compact")
            if not bottomless:
                actions.add("retention")
        if actions:
            per_shard[h.id] = actions
    if flushed_any:
        state[FLUSHED_AT] = now_ms
    if maintain and heads:
        state[MAINTAINED_AT] = now_ms
    groups: dict[tuple[ShardAction, ...], list[int]] = {}
    for shard_id, actions in sorted(per_shard.items()):
        groups.setdefault(tuple(a for a in _ORDER if a in actions), []).append(shard_id)
    return [
        ShardWorkEvent(queue=queue.name, shards=ids, actions=list(actions)) for actions, ids in groups.items()
    ]
