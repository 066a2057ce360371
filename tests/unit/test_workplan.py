"""The shard-work policy: every queue is flushed and compacted, retention only where it applies, each
on its cadence; sealed shards of bottomless queues are flushed at once."""

from __future__ import annotations

from sluice.engine.workplan import FLUSHED_AT, MAINTAINED_AT, ShardHead, ShardWorkPolicy, plan
from sluice.models import Queue

POLICY = ShardWorkPolicy(flush_every_ms=10_000, maintenance_every_ms=60_000)


def queue(bottomless: bool) -> Queue:
    return Queue.model_validate(
        {"name": "q", "created_ms": 0, "incarnation": "i", "settings": {"bottomless": bottomless}}
    )


def summary(events) -> list[tuple[list[str], list[int]]]:
    return [(e.actions, e.shards) for e in events]


def test_a_plain_queue_gets_flush_compaction_and_retention():
    heads = [ShardHead(0, "open", next=10, flushed=0), ShardHead(1, "open", next=5, flushed=5)]
    state: dict = {}
    assert summary(plan(queue(False), heads, state, 100_000, POLICY)) == [
        (["flush", "compact", "retention"], [0]),
        (["compact", "retention"], [1]),
    ]
    assert state == {FLUSHED_AT: 100_000, MAINTAINED_AT: 100_000}


def test_a_bottomless_queue_never_gets_retention():
    heads = [ShardHead(0, "open", next=10, flushed=0)]
    assert summary(plan(queue(True), heads, {}, 100_000, POLICY)) == [(["flush", "compact"], [0])]


def test_each_kind_of_work_waits_for_its_cadence():
    heads = [ShardHead(0, "open", next=10, flushed=0)]
    state = {FLUSHED_AT: 95_000, MAINTAINED_AT: 95_000}
    assert plan(queue(False), heads, state, 100_000, POLICY) == []
    assert summary(plan(queue(False), heads, state, 105_000, POLICY)) == [(["flush", "compact"], [0])]
    assert state == {FLUSHED_AT: 105_000, MAINTAINED_AT: 95_000}
    assert summary(plan(queue(False), heads, state, 155_000, POLICY)) == [
        (["flush", "compact", "retention"], [0])
    ]


def test_nothing_to_flush_keeps_the_flush_cadence_open():
    state: dict = {}
    heads = [ShardHead(0, "open", next=3, flushed=3)]
    plan(queue(False), heads, state, 100_000, POLICY)
    assert FLUSHED_AT not in state  # new records are flushed on the next pass, not 10 s later


def test_a_sealed_bottomless_shard_is_flushed_at_once():
    heads = [ShardHead(0, "open", next=4, flushed=0), ShardHead(3, "sealed", next=7, flushed=2)]
    state = {FLUSHED_AT: 99_000, MAINTAINED_AT: 99_000}
    assert summary(plan(queue(True), heads, state, 100_000, POLICY)) == [(["flush", "compact"], [3])]
    assert state[FLUSHED_AT] == 99_000  # the open shard still waits for the cadence
