"""The control table as a DynamoDB global table (multi-region eventual consistency), inside moto.

`sluice local --regions` runs one moto server for every region; each region has its own control table
of the same name, as each region of a global table has its replica. A write to it in any region (put,
update, delete, a transaction's items, TTL deletions) is copied to every other region's table after
the replication lag, item by item (as global tables replicate: a transaction's items are not copied
together). Conflicts resolve as MREC global tables resolve them: last writer wins, per item. Every
write gets a stamp from one clock (this process's: one moto serves all regions); a replicated copy
lands only if no later write to that item has landed in the destination, so concurrent writers
converge on the last one everywhere.

Copies are applied straight to moto's tables (not through its API), so they fire no replication of
their own: no ping-pong. A copy to a region that is down (`OutageSwitch`) waits until it is back up,
as a global table catches a replica up after an outage.
"""

from __future__ import annotations

import copy
import heapq
import itertools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from sluice.local import moto_patches

log = logging.getLogger(__name__)
RETRY_WHILE_DOWN_SECONDS = 0.1  # how often a copy to a region that is down looks again


@dataclass(order=True)
class _Copy:
    due: float
    seq: int
    stamp: int = field(compare=False)
    account: str = field(compare=False)
    region: str = field(compare=False)  # the destination
    table: str = field(compare=False)
    key: dict[str, Any] = field(compare=False)
    item: dict[str, Any] | None = field(compare=False)  # None: the item was deleted


class GlobalTableReplicator:
    """Replicates `tables` between `regions` of moto's DynamoDB with `lag_seconds` of delay."""

    def __init__(
        self,
        tables: Iterable[str],
        regions: Iterable[str],
        lag_seconds: float,
        is_down: Callable[[str], bool] = lambda region: False,
    ) -> None:
        self.tables = frozenset(tables)
        self.regions = tuple(regions)
        self.lag_seconds = lag_seconds
        self.is_down = is_down
        self._queue: list[_Copy] = []
        self._cond = threading.Condition()
        self._seq = itertools.count()
        self._clock = 0
        self._last: dict[tuple[str, str, str, str], int] = {}  # (account, region, table, key) -> stamp
        self._stopping = False
        self._applying = False
        self._unsubscribe: Callable[[], None] | None = None
        self._thread: threading.Thread | None = None
        self.copied = 0  # copies applied
        self.superseded = 0  # copies dropped: a later write to the item had landed first

    def start(self) -> None:
        self._unsubscribe = moto_patches.on_write(self._written)
        self._thread = threading.Thread(target=self._run, name="global-table-replication", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._unsubscribe:
            self._unsubscribe()
        with self._cond:
            self._stopping = True
            self._cond.notify_all()

    def settle(self, timeout: float) -> bool:
        """Wait until every copy queued so far has landed; False if `timeout` passed first."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._queue or self._applying:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.05))
        return True

    def _stamp(self) -> int:
        """A stamp later than every earlier one (wall clock in ns, strictly increasing)."""
        self._clock = max(time.time_ns(), self._clock + 1)
        return self._clock

    def _written(self, backend: Any, written: list[tuple[str, dict[str, Any]]]) -> None:
        """moto's write listener (under its write lock): queue a copy of each written item."""
        source = backend.region_name
        if source not in self.regions:
            return
        due = time.monotonic() + self.lag_seconds
        copies = []
        for table_name, key in written:
            if table_name not in self.tables:
                continue
            table = backend.get_table(table_name)
            found = table.get_item(*_key_values(table, key))
            item = copy.deepcopy(found.to_json()["Attributes"]) if found is not None else None
            stamp = self._stamp()
            account = backend.account_id
            self._last[(account, source, table_name, _text(key))] = stamp
            for region in self.regions:
                if region != source:
                    copies.append(
                        _Copy(due, next(self._seq), stamp, account, region, table_name, dict(key), item)
                    )
        if copies:
            with self._cond:
                for one in copies:
                    heapq.heappush(self._queue, one)
                self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopping and (not self._queue or self._queue[0].due > time.monotonic()):
                    wait = self._queue[0].due - time.monotonic() if self._queue else None
                    self._cond.wait(wait)
                if self._stopping:
                    return
                due = heapq.heappop(self._queue)
                if self.is_down(due.region):
                    due.due = time.monotonic() + RETRY_WHILE_DOWN_SECONDS
                    heapq.heappush(self._queue, due)
                    continue
                self._applying = True
            try:
                self._apply(due)
            except Exception:
                log.exception("replicating %s to %s failed", due.table, due.region)
            with self._cond:
                self._applying = False
                self._cond.notify_all()  # settle() waiters

    def _apply(self, one: _Copy) -> None:
        from moto.dynamodb.models import dynamodb_backends

        with moto_patches.exclusive():
            slot = (one.account, one.region, one.table, _text(one.key))
            if self._last.get(slot, 0) > one.stamp:
                self.superseded += 1  # last writer wins: a later write is there already
                return
            table = dynamodb_backends[one.account][one.region].get_table(one.table)
            if one.item is None:
                table.delete_item(*_key_values(table, one.key))
            else:
                table.put_item(copy.deepcopy(one.item), overwrite=True)
            self._last[slot] = one.stamp
            self.copied += 1


def _key_values(table: Any, key: dict[str, Any]) -> tuple[Any, Any]:
    from moto.dynamodb.models.dynamo_type import DynamoType

    hash_value = DynamoType(key[table.hash_key_attr])
    range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
    return hash_value, range_value


def _text(key: dict[str, Any]) -> str:
    return json.dumps(key, sort_keys=True)
