"""Per-shard write counters that ride on the publish path's head update: no extra round trip.

Every allocation adds its request, message and byte counts to the shard's HEAD item in the same
UpdateItem (`ADD wreq, wmsgs, wbytes`). Throttles and conditional conflicts a broker saw on a shard are
counted in process and carried on that shard's next successful allocation (`ADD thr, cfl`). The
coordinator reads the HEAD items and turns deltas between its runs into rates.
"""

from __future__ import annotations

import threading
from typing import Any

from sluice.engine.keys import HEAD_COUNTERS

# Attribute names on the HEAD item (the schema is sluice.engine.keys).
REQUESTS, MESSAGES, BYTES, THROTTLES, CONFLICTS = HEAD_COUNTERS
COUNTER_ATTRIBUTES = HEAD_COUNTERS


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

    def add_clause(
        self, pk: str, count: int, nbytes: int, names: dict[str, str], values: dict[str, Any]
    ) -> tuple[str, tuple[int, int]]:
        """The ` ADD ...` clause for one allocation, and the carried counts it consumes.

        The caller gives the carried counts back with `restore` when the update did not apply.
        """
        with self._lock:
            thr, cfl = self._carry.pop(pk, (0, 0))
        names.update({"#cr": REQUESTS, "#cm": MESSAGES, "#cb": BYTES})
        values.update({":cr": 1, ":cm": count, ":cb": nbytes})
        clause = " ADD #cr :cr, #cm :cm, #cb :cb"
        if thr:
            names["#ct"], values[":ct"] = THROTTLES, thr
            clause += ", #ct :ct"
        if cfl:
            names["#cc"], values[":cc"] = CONFLICTS, cfl
            clause += ", #cc :cc"
        return clause, (thr, cfl)

    def restore(self, pk: str, carried: tuple[int, int]) -> None:
        if carried == (0, 0):
            return
        with self._lock:
            slot = self._carry.setdefault(pk, [0, 0])
            slot[0] += carried[0]
            slot[1] += carried[1]
