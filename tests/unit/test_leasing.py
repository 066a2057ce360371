"""The lease state machine (pure) and leasing from one shard on the in-memory store: no AWS, no moto."""

from __future__ import annotations

import json

from sluice.codec import StoredMessage
from sluice.engine.clock import Clock
from sluice.engine.commit import LaneView
from sluice.engine.deadletter import DeadLetterSink
from sluice.engine.groupstate import GroupState, Pending
from sluice.engine.leasebook import Fresh, LeaseBook, Op, Outcome
from sluice.engine.shardlease import ShardLeaser
from sluice.engine.store import HeadCounts, ShardAddress
from sluice.engine.store.memory import MemoryShardStore
from sluice.leases import KeyringSource, LeaseSigner
from sluice.models import Queue, QueueSettings, Shard

KEYS = json.dumps({"current_id": 1, "current": "k" * 40})


def leased(item: int, due: int, attempts: int = 1) -> Pending:
    return Pending(item=item, due_ms=due, attempts=attempts, leased=True)


def test_settle_acks_retries_extends_and_refuses_stale_leases() -> None:
    state = GroupState(read=3, pending={0: leased(0, 100), 1: leased(0, 100, attempts=2), 2: leased(0, 100)})
    book = LeaseBook(state)
    assert book.settle(Op.EXTEND, 0, 1, 50, value_ms=1_000, max_deliveries=3) is Outcome.DONE
    assert state.pending[0].due_ms == 1_050
    assert book.settle(Op.RETRY, 1, 1, 50, value_ms=0, max_deliveries=3) is Outcome.STALE  # attempt 2 owns it
    assert book.settle(Op.RETRY, 1, 2, 50, value_ms=500, max_deliveries=3) is Outcome.RETRIED
    assert not state.pending[1].leased and state.pending[1].due_ms == 550
    assert book.settle(Op.RETRY, 2, 1, 50, value_ms=0, max_deliveries=1) is Outcome.EXHAUSTED
    assert book.settle(Op.ACK, 2, 7, 50, value_ms=0, max_deliveries=1) is Outcome.DONE  # acks are permissive
    assert book.settle(Op.ACK, 2, 1, 50, value_ms=0, max_deliveries=1) is Outcome.GONE


def test_due_sends_out_of_deliveries_to_the_dead_letter_queue_even_after_a_missing_one() -> None:
    state = GroupState(read=4, pending={0: leased(0, 10, attempts=3), 1: leased(0, 10), 2: leased(0, 99)})
    book = LeaseBook(state)
    due = book.due(50, max_deliveries=3, dead_letter_cap=50)
    assert (due.exhausted, due.redeliver) == ([0], [1])
    book.postpone([0], 60)  # its dead letter queue was missing: un-leased, still out of deliveries
    assert book.due(70, max_deliveries=3, dead_letter_cap=50).exhausted == [0]


def test_fresh_reads_lease_park_delayed_and_hold_a_key_behind_its_lease() -> None:
    book = LeaseBook(GroupState(), ordered=True)
    assert book.read_fresh(0, 0, 0, "k", 10, book.first_lease(0, 10, 100)) is Fresh.LEASED
    assert book.read_fresh(1, 0, 500, None, 10, book.first_lease(0, 10, 100)) is Fresh.DELAYED
    assert book.read_fresh(2, 0, 0, "k", 10, book.first_lease(0, 10, 100)) is Fresh.HELD
    state = book.state
    assert state.read == 3 and not state.pending[1].leased and state.pending[1].due_ms == 500
    assert not state.pending[2].leased  # waits for 0's ack
    assert book.ack(0)
    assert LeaseBook(state, ordered=True).due(20, 3, 50).redeliver == [2]


class Sink(DeadLetterSink):
    def __init__(self, exists: bool) -> None:
        self.exists, self.sent = exists, []  # type: ignore[var-annotated]

    def send(self, queue: Queue, messages: list[StoredMessage]) -> bool:
        if self.exists:
            self.sent += messages
        return self.exists


def setup(
    dlq_exists: bool = True,
) -> tuple[MemoryShardStore, ShardLeaser, Queue, ShardAddress, list[int], Sink]:
    store, now, sink = MemoryShardStore(), [1_000], Sink(dlq_exists)
    clock = Clock(now_ms=lambda: now[0], sleep=lambda _s: None)
    leaser = ShardLeaser(store, clock, LeaseSigner(KeyringSource(lambda _f: KEYS), clock), sink)
    settings = QueueSettings(max_retries=1, dead_letter_queue="dlq", visibility_timeout_ms=100)
    queue = Queue(
        name="q",
        incarnation="0000abcd",
        created_ms=0,
        settings=settings,
        shards=[Shard(id=0, table=0, created_ms=0)],
    )
    at = ShardAddress.of(queue, queue.shards[0])
    store.allocate(at, 3, 1_000, HeadCounts())
    store.write_batch(at, 0, 1_000, [StoredMessage(body=b'"%d"' % i) for i in range(3)], None)
    return store, leaser, queue, at, now, sink


def view(store: MemoryShardStore, at: ShardAddress, lane: int = 0) -> LaneView:
    read = store.read_lanes(at, "default", [lane], head=True)
    return LaneView.of(at, "default", read.lanes[lane], read.cursor, read.head)


def test_leasing_from_one_shard_commits_once_and_redelivers_after_the_lease() -> None:
    store, leaser, queue, at, now, sink = setup()
    first = leaser.take(queue, view(store, at), 2, 100, None)
    assert [d.seq for d in first] == [0, 1] and store.writes == 3  # allocate, batch, one state commit
    assert [d.seq for d in leaser.take(queue, view(store, at), 5, 100, None)] == [2]
    now[0] += 150  # every lease ran out; max_retries 1: out of deliveries, to the dead letter queue
    assert leaser.take(queue, view(store, at), 5, 100, None) == []
    assert [m.body for m in sink.sent] == [b'"0"', b'"1"', b'"2"']
    assert view(store, at).state.pending == {}


def test_a_missing_dead_letter_queue_keeps_the_message_pending_and_undelivered() -> None:
    store, leaser, queue, at, now, _sink = setup(dlq_exists=False)
    leaser.take(queue, view(store, at), 1, 100, None)
    now[0] += 150
    again = leaser.take(queue, view(store, at), 5, 100, None)
    assert [d.seq for d in again] == [1, 2]  # seq 0 is not delivered again
    pending = view(store, at).state.pending[0]
    assert not pending.leased and pending.attempts == 1 and pending.due_ms > now[0]


def test_a_lost_race_decides_again_from_the_winners_state() -> None:
    store, leaser, queue, at, _now, _sink = setup()
    stale = view(store, at)
    leaser.take(queue, view(store, at), 2, 100, None)  # another puller commits first
    got = leaser.take(queue, stale, 2, 100, None)
    assert [d.seq for d in got] == [2] and store.conflicts == 1  # never seq 0 or 1 twice


def test_a_redelivery_never_commits_over_an_ack_recorded_after_the_lane_was_read() -> None:
    store, leaser, queue, at, now, _sink = setup()
    queue.settings.max_retries = 5
    leaser.take(queue, view(store, at), 1, 100, None)  # seq 0 leased
    now[0] += 150  # its lease ran out: the next pull would deliver it again
    stale = view(store, at)
    store.record_acks(at, "default", 0, frozenset({"0:1"}))  # its consumer acks it meanwhile (an ADD)
    again = leaser.take(queue, stale, 5, 100, None)
    assert 0 not in [d.seq for d in again] and store.conflicts == 1  # decided again, with the ack folded
    assert 0 not in view(store, at).state.pending


def test_a_pull_that_only_folds_acks_writes_nothing_and_the_acks_still_count() -> None:
    store, leaser, queue, at, _now, _sink = setup()
    leaser.take(queue, view(store, at), 5, 100, None)  # every message leased
    store.record_acks(at, "default", 0, frozenset({"0:3"}))  # and acked, by an ADD
    writes = store.writes
    assert leaser.take(queue, view(store, at), 5, 100, None) == []
    assert store.writes == writes  # nothing to lease: the fold alone is not committed
    lane = view(store, at)
    assert lane.state.pending and lane.fold() == 3  # the records stay on the item, and still count
    assert leaser.take(queue, lane, 5, 100, None) == []  # never delivered again
