"""Consumer groups (Cherami): every group receives every message; consumers inside one group compete.

A group is a name → start time in the queue document (`Queue.groups`). Its per-shard state (lane 0's
item, see lanes.py and groupstate.py) is created at the first pull, scanning from the shard's purge floor and
skipping batch items stamped before the start. `latest` is stored as the creation time and, to skip the
scan, its state starts at each shard's current head; shards added later hold only newer messages.

Starts are inclusive: a group started at T receives every message whose timestamp is >= T. Messages
sent in one request share one timestamp, so they are in or out together.
"""

from __future__ import annotations

from typing import Any

from sluice import errors
from sluice.engine.backend import Backend
from sluice.engine.groupstate import GroupState
from sluice.engine.queues import QueueRegistry
from sluice.engine.store import ShardAddress
from sluice.models import DEFAULT_GROUP, MAX_TIMESTAMP_MS, Queue
from sluice.names import check_group_name

MAX_GROUPS = 32  # the queue document is mirrored to SSM (4 KB standard parameters): keep it small


def parse_start(start: Any, now_ms: int) -> int:
    """`earliest` → 0, `latest` → now, a timestamp in ms (an integer, 0..MAX_TIMESTAMP_MS) → itself."""
    if start is None or start == "earliest":
        return 0
    if start == "latest":
        return now_ms
    if isinstance(start, int) and not isinstance(start, bool) and 0 <= start <= MAX_TIMESTAMP_MS:
        return start
    raise errors.InvalidRequest(
        f"start must be 'earliest', 'latest' or a timestamp in milliseconds (0..{MAX_TIMESTAMP_MS})"
    )


def public_group(name: str, start_ms: int) -> dict[str, Any]:
    return {"name": name, "start_ms": start_ms}


class ConsumerGroups:
    def __init__(self, backend: Backend, registry: QueueRegistry) -> None:
        self.backend = backend
        self.registry = registry

    def create(self, queue_name: str, name: str, start: Any = "earliest") -> dict[str, Any]:
        check_group_name(name)
        now = self.backend.clock()
        start_ms = parse_start(start, now)
        queue = self.registry.get(queue_name)
        self._check_absent(queue, name)
        if start == "latest":
            self._start_at_heads(queue, name)
        else:
            self._delete_states(queue, name)  # leftovers of a deleted group of the same name

        def change(q: Queue) -> Queue:
            self._check_absent(q, name)
            return q.model_copy(update={"groups": {**q.groups, name: start_ms}})

        self.registry.modify(queue_name, change)
        return public_group(name, start_ms)

    def get(self, queue_name: str, name: str) -> dict[str, Any]:
        queue = self.registry.get(queue_name)
        if name not in queue.groups:
            raise errors.ConsumerGroupNotFound(f"consumer group {name!r} not found on queue {queue_name!r}")
        return public_group(name, queue.groups[name])

    def list(self, queue_name: str) -> list[dict[str, Any]]:
        queue = self.registry.get(queue_name)
        return [public_group(n, s) for n, s in sorted(queue.groups.items())]

    def delete(self, queue_name: str, name: str) -> None:
        if name == DEFAULT_GROUP:
            raise errors.InvalidRequest("the default consumer group cannot be deleted")

        def change(q: Queue) -> Queue:
            if name not in q.groups:
                raise errors.ConsumerGroupNotFound(
                    f"consumer group {name!r} not found on queue {queue_name!r}"
                )
            return q.model_copy(update={"groups": {k: v for k, v in q.groups.items() if k != name}})

        queue = self.registry.modify(queue_name, change)
        self._delete_states(queue, name)

    # --- per-shard state ------------------------------------------------------------------------------

    @staticmethod
    def _check_absent(queue: Queue, name: str) -> None:
        if name in queue.groups:
            raise errors.ConsumerGroupAlreadyExists(
                f"consumer group {name!r} already exists on queue {queue.name!r}"
            )
        if len(queue.groups) >= MAX_GROUPS:
            raise errors.InvalidRequest(f"a queue has at most {MAX_GROUPS} consumer groups; delete one first")

    def _start_at_heads(self, queue: Queue, name: str) -> None:
        """`latest`: the group's state on each shard starts at the shard's next sequence."""
        store = self.backend.store
        ats = [ShardAddress.of(queue, shard) for shard in queue.readable_shards]
        views, _ = store.read_groups(ats, [])
        for view in views:
            start = max(view.head.next, view.head.floor)
            store.put_state(view.address, name, GroupState(read=start, read_item=start, version=1))

    def _delete_states(self, queue: Queue, name: str) -> None:
        for shard in queue.shards:
            self.backend.store.delete_group(ShardAddress.of(queue, shard), name)
