"""Per-shard write counters that ride on the publish path's head update: no extra round trip.

Every allocation adds its request, message and byte counts to the shard's HEAD item in the same
UpdateItem (`ADD wreq, wmsgs, wbytes`; the store writes `HeadCounts`). Conditional conflicts a broker
saw on a shard are counted in process and carried on that shard's next successful allocation (`ADD
cfl`). Throttled sends (one per request, whichever shards it tried) are carried on the next successful
allocation on any shard of the same queue (`ADD thr`): a saturated shard rarely takes one, and the
coordinator sums a queue's throttles anyway. A throttle count older than `STALE_MS` is dropped instead:
the coordinator reads it as demand now, and a count from before a scale-out would make it grow again for
nothing. The coordinator reads the HEAD items and turns deltas between its runs into rates.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from sluice.engine.store.items import HeadCounts

STALE_MS = 2_000


def _queue_of(pk: str) -> str:
    """`<queue>#<incarnation>#<shard>` → `<queue>#<incarnation>`."""
    return pk.rsplit("#", 1)[0]


class ShardCounters:
    """Throttles (per queue) and conflicts (per shard partition key) seen by this process, until
    carried. `clock`: milliseconds (the backend's)."""

    def __init__(self, clock: Callable[[], int]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._conflicts: dict[str, int] = {}
        self._throttles: dict[str, tuple[int, int]] = {}  # queue -> (count, when the oldest was seen)

    def note_throttle(self, pk: str) -> None:
        now = self._clock()
        with self._lock:
            count, since = self._throttles.get(_queue_of(pk), (0, now))
            self._throttles[_queue_of(pk)] = (count + 1, since)

    def note_conflict(self, pk: str) -> None:
        with self._lock:
            self._conflicts[pk] = self._conflicts.get(pk, 0) + 1

    def take(self, pk: str, count: int, nbytes: int) -> HeadCounts:
        """What one allocation adds to the HEAD's counters, the carried throttles and conflicts
        included (given back with `restore` when the allocation did not apply)."""
        with self._lock:
            thr, since = self._throttles.pop(_queue_of(pk), (0, 0))
            cfl = self._conflicts.pop(pk, 0)
        if thr and self._clock() - since > STALE_MS:
            thr = 0
        return HeadCounts(requests=1, messages=count, bytes=nbytes, throttles=thr, conflicts=cfl)

    def restore(self, pk: str, counts: HeadCounts) -> None:
        now = self._clock()
        with self._lock:
            if counts.throttles:
                count, since = self._throttles.get(_queue_of(pk), (0, now))
                self._throttles[_queue_of(pk)] = (count + counts.throttles, min(since, now))
            if counts.conflicts:
                self._conflicts[pk] = self._conflicts.get(pk, 0) + counts.conflicts
