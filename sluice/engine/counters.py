"""Per-shard write counters that ride on the publish path's head update: no extra round trip.

Every allocation adds its request, message and byte counts to the shard's HEAD item in the same
UpdateItem (`ADD wreq, wmsgs, wbytes`; the store writes `HeadCounts`). Throttles and conditional
conflicts a broker saw on a shard are counted in process and carried on that shard's next successful
allocation (`ADD thr, cfl`). The coordinator reads the HEAD items and turns deltas into rates.
"""

from __future__ import annotations

import threading

from sluice.engine.store.items import HeadCounts


class ShardCounters:
    """Throttles and conflicts seen by this process, per shard partition key, until carried."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._carry: dict[str, list[int]] = {}

    def note_throttle(self, pk: str) -> None:
        self._bump(pk, 0)

    def note_conflict(self, pk: str) -> None:
        self._bump(pk, 1)

    def _bump(self, pk: str, index: int) -> None:
        with self._lock:
            self._carry.setdefault(pk, [0, 0])[index] += 1

    def take(self, pk: str, count: int, nbytes: int) -> HeadCounts:
        """What one allocation adds to the HEAD's counters, the carried throttles and conflicts
        included (given back with `restore` when the allocation did not apply)."""
        with self._lock:
            thr, cfl = self._carry.pop(pk, (0, 0))
        return HeadCounts(requests=1, messages=count, bytes=nbytes, throttles=thr, conflicts=cfl)

    def restore(self, pk: str, counts: HeadCounts) -> None:
        if not counts.throttles and not counts.conflicts:
            return
        with self._lock:
            slot = self._carry.setdefault(pk, [0, 0])
            slot[0] += counts.throttles
            slot[1] += counts.conflicts
