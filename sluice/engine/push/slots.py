"""Push worker slots (`Q#<queue>` / `CSLOT#<consumer>#<slot>`): a worker owns a numbered slot before it
pushes, so at most `max_concurrency` run at once even when invocations overlap, and a crashed worker's
slot frees itself after `SLOT_TTL_MS`."""

from __future__ import annotations

from sluice.engine import keys
from sluice.engine.backend import Backend
from sluice.engine.ownership import Ownership
from sluice.models import Queue

SLOT_TTL_MS = 60_000  # a worker renews its slot at half this; a crashed worker's slot frees after it
SLOT_ITEM_TTL_S = 3600  # a slot item nobody took again is deleted by the table's TTL this long after


class WorkerSlots:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.table = backend.control

    def held(self, queue: Queue, consumer_id: str, now: int) -> set[int]:
        """The slots of a consumer some worker owns now."""
        items = self.table.query(
            keys.queue_pk(queue.name), sk_prefix=keys.slot_prefix(consumer_id), consistent=True
        )
        return {
            keys.slot_of(item[keys.SK])
            for item in items
            if item.get(keys.OWNER_EXPIRES_MS, 0) >= now and not item.get(keys.OWNER_RELEASED)
        }

    def slot(self, queue: Queue, consumer_id: str, slot: int, run_id: str) -> Ownership:
        """The ownership of one slot by the worker run `run_id` (not taken yet)."""
        return Ownership(
            self.table,
            keys.queue_pk(queue.name),
            keys.slot_sk(consumer_id, slot),
            run_id,
            SLOT_TTL_MS,
            self.backend.clock,
            item_ttl_s=SLOT_ITEM_TTL_S,
        )
