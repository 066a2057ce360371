"""Pieces shared by the fault tests: a private set of tables, serialized moto, resharding, a reader."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from sluice import errors
from sluice.engine import keys
from sluice.models import Queue, Shard
from sluice.service import Sluice

T = TypeVar("T")
RETRYABLE = (errors.Throttled, errors.DependencyUnavailable, errors.Conflict)


@contextmanager
def serialized_moto() -> Iterator[None]:
    """moto's in-process backends take no locks, so two threads' conditional writes to one item can
    interleave between the check and the write. DynamoDB applies each request atomically; one lock
    around moto's request processing gives the test that same guarantee (and no more)."""
    from moto.core.botocore_stubber import BotocoreStubber

    original = BotocoreStubber.process_request
    lock = threading.RLock()

    def locked(self: Any, request: Any) -> Any:
        with lock:
            return original(self, request)

    BotocoreStubber.process_request = locked  # type: ignore[method-assign]
    try:
        yield
    finally:
        BotocoreStubber.process_request = original  # type: ignore[method-assign]


def retrying(call: Callable[[], T], attempts: int = 40, pause: float = 0.01) -> T:
    """What a client does on 429/503/409: try again after a short pause."""
    for attempt in range(attempts):
        try:
            return call()
        except RETRYABLE:
            if attempt == attempts - 1:
                raise
            time.sleep(pause * min(attempt + 1, 10))
    raise AssertionError("unreachable")


def reshard(engine: Sluice, name: str, seal_id: int, open_target: int = 2) -> None:
    """The coordinator's mechanics (its policy is another module's): add open shards up to
    `open_target`, mark shard `seal_id` sealed in the map, mirror, then seal its head so a broker with
    a stale map fails its allocation and refreshes. Idempotent, so a retried step is harmless."""
    tables = len(engine.backend.shard_tables)

    def change(queue: Queue) -> Queue:
        shards = [
            s.model_copy(update={"state": "sealed"}) if s.id == seal_id and s.state == "open" else s
            for s in queue.shards
        ]
        next_id = queue.next_shard_id
        while sum(s.state == "open" for s in shards) < open_target:
            shards.append(Shard(id=next_id, table=next_id % tables, created_ms=engine.backend.clock()))
            next_id += 1
        return queue.model_copy(update={"shards": shards, "next_shard_id": next_id})

    queue = retrying(lambda: engine.queues.modify(name, change))
    shard = queue.shard(seal_id)
    assert shard is not None
    table = engine.backend.table_for(shard)
    retrying(
        lambda: table.update(
            keys.shard_pk(queue, seal_id),
            keys.HEAD_SK,
            "SET #s = :t",
            names={"#s": "sealed"},
            values={":t": True},
        )
    )


class HotTierReader:
    """A stream reader over the hot tier: per shard, items in sequence order from the last position,
    never past a hole (an allocated range neither written nor sealed yet). It records every
    violation of "each record exactly once, in order": an item overlapping one already read, or a
    sequence seen twice."""

    def __init__(self, engine: Sluice, name: str) -> None:
        self.engine = engine
        self.name = name
        self.next_seq: dict[int, int] = {}
        self.last_first: dict[int, int] = {}
        self.seen: dict[tuple[int, int], bytes] = {}
        self.violations: list[str] = []

    def step(self) -> None:
        from sluice.codec import decode_batch

        queue = self.engine.queues.get(self.name)
        for shard in queue.readable_shards:
            table = self.engine.backend.table_for(shard)
            pk = keys.shard_pk(queue, shard.id)
            nxt = self.next_seq.get(shard.id, 0)
            start = self.last_first.get(shard.id, -1) + 1
            for item in table.query(pk, sk_from=keys.msg_sk(start), sk_to=keys.MSG_SK_END, limit=50):
                first, count = keys.seq_of(item["sk"]), item["n"]
                if first < nxt:
                    self.violations.append(
                        f"shard {shard.id}: item {first}+{count} overlaps read up to {nxt}"
                    )
                    continue
                if first > nxt:
                    break  # a hole: wait until it is written or sealed
                if not item.get("gap"):
                    for index, msg in enumerate(decode_batch(item["d"])):
                        seq = first + index
                        if (shard.id, seq) in self.seen:
                            self.violations.append(f"shard {shard.id}: seq {seq} read twice")
                        self.seen[(shard.id, seq)] = msg.body
                self.last_first[shard.id] = first
                nxt = first + count
            self.next_seq[shard.id] = nxt

    def heads(self) -> dict[int, int]:
        queue = self.engine.queues.get(self.name)
        out = {}
        for shard in queue.readable_shards:
            head = self.engine.backend.table_for(shard).get(keys.shard_pk(queue, shard.id), keys.HEAD_SK)
            out[shard.id] = (head or {}).get("next", 0)
        return out
