"""Queue semantics on the engine (in-process moto, fake clock): Cherami's integration scenarios for
consumer groups, retries and dead letters, redrive, purge, pause, delays, leases and long polls."""

from __future__ import annotations

import json
import threading
import time

import pytest

from sluice import errors, faults
from sluice.engine.consume import RetryRequest
from sluice.models import OutgoingMessage


def _msg(n: int, **kw) -> OutgoingMessage:
    return OutgoingMessage(body=json.dumps({"n": n}).encode(), **kw)


def _n(delivery) -> int:
    return json.loads(delivery.body)["n"]


def _send_one_per_ms(engine, clock, name: str, count: int, first: int = 1) -> list[int]:
    """Send `count` messages one per request, 1 ms apart; their timestamps."""
    stamps = []
    for n in range(first, first + count):
        result = engine.publisher.publish(name, [_msg(n)])
        stamps.append(int(result.offsets[0][:16]))
        clock.advance(1)
    return stamps


def _drain(engine, name: str, group: str = "default", ack: bool = True, batch: int = 100) -> list:
    out = []
    while True:
        got = engine.consumer.pull(name, group=group, batch_size=batch).messages
        if not got:
            return out
        out += got
        if ack:
            engine.consumer.ack(name, [d.lease_id for d in got])


# --- consumer groups -----------------------------------------------------------------------------------


def test_group_created_after_100_sends_with_earliest_gets_all_100(clocked, clock, queue_name):
    clocked.queues.create(queue_name)
    _send_one_per_ms(clocked, clock, queue_name, 100)
    clocked.groups.create(queue_name, "late", "earliest")
    got = _drain(clocked, queue_name, "late")
    assert [_n(d) for d in got] == list(range(1, 101))
    # every group gets every message: the default group too, independently
    assert sorted(_n(d) for d in _drain(clocked, queue_name)) == list(range(1, 101))


def test_group_from_timestamp_of_message_50_gets_exactly_50_to_100_in_order(clocked, clock, queue_name):
    clocked.queues.create(queue_name)
    stamps = _send_one_per_ms(clocked, clock, queue_name, 100)
    clocked.groups.create(queue_name, "from50", stamps[49])
    got = _drain(clocked, queue_name, "from50", batch=7)
    assert [_n(d) for d in got] == list(range(50, 101))
    assert clocked.groups.get(queue_name, "from50") == {"name": "from50", "start_ms": stamps[49]}


def test_timestamp_start_is_inclusive_for_a_shared_millisecond(clocked, clock, queue_name):
    clocked.queues.create(queue_name)
    clocked.publisher.publish(queue_name, [_msg(1)])
    clock.advance(5)
    result = clocked.publisher.publish(queue_name, [_msg(2), _msg(3)])  # one request: one timestamp
    clocked.groups.create(queue_name, "g", int(result.offsets[1][:16]))
    assert [_n(d) for d in _drain(clocked, queue_name, "g")] == [2, 3]


def test_latest_group_gets_only_messages_sent_after_it(clocked, clock, queue_name):
    clocked.queues.create(queue_name)
    _send_one_per_ms(clocked, clock, queue_name, 5)
    clocked.groups.create(queue_name, "new", "latest")
    assert clocked.operations.metrics(queue_name)["consumer_groups"]["new"]["backlog_count"] == 0
    _send_one_per_ms(clocked, clock, queue_name, 3, first=6)
    assert [_n(d) for d in _drain(clocked, queue_name, "new")] == [6, 7, 8]


def test_consumers_in_a_group_compete_and_groups_ack_independently(clocked, queue_name):
    clocked.queues.create(queue_name)
    clocked.groups.create(queue_name, "b")
    clocked.publisher.publish(queue_name, [_msg(n) for n in range(10)])
    first = clocked.consumer.pull(queue_name, group="default", batch_size=4).messages
    second = clocked.consumer.pull(queue_name, group="default", batch_size=10).messages
    assert len(first) == 4 and len(second) == 6
    assert not {d.id for d in first} & {d.id for d in second}
    clocked.consumer.ack(queue_name, [d.lease_id for d in first + second])
    assert clocked.operations.metrics(queue_name)["consumer_groups"]["default"]["backlog_count"] == 0
    assert len(_drain(clocked, queue_name, "b")) == 10  # group b is untouched by default's acks


def test_group_crud(clocked, queue_name):
    clocked.queues.create(queue_name)
    assert clocked.groups.list(queue_name) == [{"name": "default", "start_ms": 0}]
    clocked.groups.create(queue_name, "a", "earliest")
    with pytest.raises(errors.ConsumerGroupAlreadyExists):
        clocked.groups.create(queue_name, "a")
    with pytest.raises(errors.InvalidRequest):
        clocked.groups.create(queue_name, "bad", "yesterday")
    with pytest.raises(errors.InvalidRequest):
        clocked.groups.delete(queue_name, "default")
    clocked.publisher.publish(queue_name, [_msg(1), _msg(2)])
    assert len(_drain(clocked, queue_name, "a")) == 2
    clocked.groups.delete(queue_name, "a")
    with pytest.raises(errors.ConsumerGroupNotFound):
        clocked.consumer.pull(queue_name, group="a", batch_size=5)
    with pytest.raises(errors.ConsumerGroupNotFound):
        clocked.groups.delete(queue_name, "a")
    clocked.groups.create(queue_name, "a", "earliest")  # state was deleted: starts over
    assert len(_drain(clocked, queue_name, "a")) == 2


# --- retries, dead letters, redrive ------------------------------------------------------------------------


def _poison_queue(engine, name: str) -> str:
    dlq = f"{name}-dlq"
    engine.queues.create(name, {"max_retries": 2, "visibility_timeout_ms": 1000, "dead_letter_queue": dlq})
    return dlq


def test_poison_message_is_delivered_exactly_twice_then_dead_lettered_and_redriven(
    clocked, clock, queue_name
):
    dlq = _poison_queue(clocked, queue_name)
    clocked.publisher.publish(queue_name, [_msg(7, attributes={"k": "v"})])
    deliveries = []
    for _ in range(6):  # never acked; well past max_retries
        deliveries += clocked.consumer.pull(queue_name, group="default", batch_size=10).messages
        clock.advance(1001)
    assert [d.attempts for d in deliveries] == [1, 2]
    dead = clocked.consumer.pull(dlq, group="default", batch_size=10, visibility_ms=1).messages
    assert [_n(d) for d in dead] == [7]
    assert dead[0].attributes == {"k": "v", "sluice-source-queue": queue_name}
    assert clocked.operations.metrics(queue_name)["backlog_count"] == 0

    clock.advance(10)
    result = clocked.operations.redrive(queue_name, dlq)
    assert result["moved"] == 1 and result["remaining_in_source"] == 0
    again = clocked.consumer.pull(queue_name, group="default", batch_size=10).messages
    assert [(_n(d), d.attempts, d.attributes) for d in again] == [(7, 1, {"k": "v"})]
    assert again[0].lease_id not in {d.lease_id for d in deliveries}
    assert clocked.consumer.ack(queue_name, [again[0].lease_id]).ack_count == 1


def test_explicit_retries_count_as_deliveries(clocked, clock, queue_name):
    dlq = _poison_queue(clocked, queue_name)
    clocked.publisher.publish(queue_name, [_msg(1)])
    for attempt in (1, 2):
        (d,) = clocked.consumer.pull(queue_name, group="default", batch_size=1).messages
        assert d.attempts == attempt
        result = clocked.consumer.ack(queue_name, [], [RetryRequest(d.lease_id)])
        assert result.retry_count == 1
    assert clocked.consumer.pull(queue_name, group="default", batch_size=1).messages == []
    assert len(_drain(clocked, dlq)) == 1


def test_without_dead_letter_queue_exhausted_messages_are_dropped(clocked, clock, queue_name):
    clocked.queues.create(queue_name, {"max_retries": 1, "visibility_timeout_ms": 1000})
    clocked.publisher.publish(queue_name, [_msg(1)])
    assert len(clocked.consumer.pull(queue_name, group="default", batch_size=1).messages) == 1
    clock.advance(1001)
    assert clocked.consumer.pull(queue_name, group="default", batch_size=1).messages == []
    assert clocked.operations.metrics(queue_name)["backlog_count"] == 0


def test_crash_between_dlq_write_and_ack_loses_nothing_and_duplicates_at_most_once(
    clocked, clock, queue_name
):
    dlq = _poison_queue(clocked, queue_name)
    clocked.publisher.publish(queue_name, [_msg(1), _msg(2)])
    for _ in range(2):
        assert len(clocked.consumer.pull(queue_name, group="default", batch_size=10).messages) == 2
        clock.advance(1001)
    with faults.armed(faults.DLQ_AFTER_WRITE), pytest.raises(faults.InjectedCrash):
        clocked.consumer.pull(queue_name, group="default", batch_size=10)
    # the move completes at the next pull; the source never delivers them a third time
    assert clocked.consumer.pull(queue_name, group="default", batch_size=10).messages == []
    dead = sorted(_n(d) for d in _drain(clocked, dlq))
    assert dead in ([1, 2], [1, 1, 2, 2])  # both present; each at most twice
    assert clocked.operations.metrics(queue_name)["backlog_count"] == 0


def test_crash_during_redrive_loses_nothing(clocked, clock, queue_name):
    dlq = _poison_queue(clocked, queue_name)
    clocked.publisher.publish(dlq, [_msg(1), _msg(2)])
    with faults.armed(faults.REDRIVE_AFTER_WRITE), pytest.raises(faults.InjectedCrash):
        clocked.operations.redrive(queue_name, dlq)
    clock.advance(60_001)  # the redrive's DLQ leases expire
    assert clocked.operations.redrive(queue_name, dlq)["moved"] == 2
    assert sorted(_n(d) for d in _drain(clocked, queue_name)) == [1, 1, 2, 2]
    assert _drain(clocked, dlq) == []


def test_redrive_max_messages(clocked, queue_name):
    dlq = _poison_queue(clocked, queue_name)
    clocked.publisher.publish(dlq, [_msg(n) for n in range(5)])
    result = clocked.operations.redrive(queue_name, dlq, max_messages=3)
    assert result["moved"] == 3 and result["remaining_in_source"] == 2
    assert [_n(d) for d in _drain(clocked, queue_name)] == [0, 1, 2]


# --- delays ---------------------------------------------------------------------------------------------


def test_delayed_messages_are_never_early_and_hold_up_nothing(clocked, clock, queue_name):
    clocked.queues.create(queue_name)
    clocked.publisher.publish(queue_name, [_msg(1, delay_seconds=86_400), _msg(2)])
    clocked.publisher.publish(queue_name, [_msg(3, delay_seconds=30)])
    clocked.publisher.publish(queue_name, [_msg(4)])
    assert [_n(d) for d in _drain(clocked, queue_name)] == [2, 4]
    clock.advance(29_999)
    assert _drain(clocked, queue_name) == []
    clock.advance(1)
    assert [_n(d) for d in _drain(clocked, queue_name)] == [3]
    clock.advance(86_400_000 - 30_001)
    assert _drain(clocked, queue_name) == []
    clock.advance(1)
    assert [_n(d) for d in _drain(clocked, queue_name)] == [1]


def test_queue_delivery_delay_and_retry_delays(clocked, clock, queue_name):
    clocked.queues.create(queue_name, {"delivery_delay_seconds": 10, "retry_delay_seconds": 5})
    clocked.publisher.publish(queue_name, [_msg(1)])
    clock.advance(9_999)
    assert _drain(clocked, queue_name) == []
    clock.advance(1)
    (d,) = clocked.consumer.pull(queue_name, group="default", batch_size=5).messages
    clocked.consumer.ack(queue_name, [], [RetryRequest(d.lease_id)])  # queue default: 5 s
    clock.advance(4_999)
    assert clocked.consumer.pull(queue_name, group="default", batch_size=5).messages == []
    clock.advance(1)
    (d,) = clocked.consumer.pull(queue_name, group="default", batch_size=5).messages
    assert d.attempts == 2
    clocked.consumer.ack(queue_name, [], [RetryRequest(d.lease_id, 60)])  # per retry: 60 s
    clock.advance(59_999)
    assert clocked.consumer.pull(queue_name, group="default", batch_size=5).messages == []
    clock.advance(1)
    assert [
        d.attempts for d in clocked.consumer.pull(queue_name, group="default", batch_size=5).messages
    ] == [3]


# --- leases ---------------------------------------------------------------------------------------------


def test_lease_extension_late_acks_and_bad_lease_ids(clocked, clock, queue_name):
    clocked.queues.create(queue_name)
    other = f"{queue_name}-other"
    clocked.queues.create(other)
    clocked.publisher.publish(queue_name, [_msg(1), _msg(2), _msg(3)])
    clocked.publisher.publish(other, [_msg(9)])
    a, b, c = clocked.consumer.pull(queue_name, group="default", batch_size=3, visibility_ms=1000).messages
    foreign = clocked.consumer.pull(other, group="default", batch_size=1).messages[0]

    # extend a: not redelivered after its first deadline
    assert clocked.consumer.extend(queue_name, [a.lease_id], 10_000).ack_count == 1
    clock.advance(1001)
    redelivered = clocked.consumer.pull(
        queue_name, group="default", batch_size=3, visibility_ms=1000
    ).messages
    assert sorted(_n(d) for d in redelivered) == [2, 3]  # b and c expired, a did not
    b2 = next(d for d in redelivered if _n(d) == 2)
    c2 = next(d for d in redelivered if _n(d) == 3)
    # expired lease of b: cannot be extended any more
    assert clocked.consumer.extend(queue_name, [b.lease_id], 10_000).warnings
    # b acked with its new lease; then its old lease: already acked → warning, no change
    assert clocked.consumer.ack(queue_name, [b2.lease_id]).ack_count == 1
    stale = clocked.consumer.ack(queue_name, [b.lease_id])
    assert stale.ack_count == 0 and len(stale.warnings) == 1
    # late ack of c with the first (expired) lease: accepted while unacked
    assert clocked.consumer.ack(queue_name, [c.lease_id]).ack_count == 1
    assert clocked.consumer.ack(queue_name, [c2.lease_id]).ack_count == 0
    # made-up and other-queue lease ids: warnings, nothing changes
    bad = clocked.consumer.ack(queue_name, ["made-up", foreign.lease_id], [RetryRequest("nope")])
    assert (bad.ack_count, bad.retry_count, len(bad.warnings)) == (0, 0, 3)
    assert clocked.consumer.ack(other, [foreign.lease_id]).ack_count == 1
    assert clocked.consumer.ack(queue_name, [a.lease_id]).ack_count == 1
    assert clocked.operations.metrics(queue_name)["backlog_count"] == 0


def test_long_poll_returns_when_messages_arrive_and_empty_at_deadline(engine, queue_name):
    engine.queues.create(queue_name)
    started = time.monotonic()
    assert engine.consumer.pull(queue_name, group="default", batch_size=5, wait_ms=400).messages == []
    assert 0.4 <= time.monotonic() - started < 1.5

    timer = threading.Timer(0.3, lambda: engine.publisher.publish(queue_name, [_msg(1)]))
    timer.start()
    started = time.monotonic()
    got = engine.consumer.pull(queue_name, group="default", batch_size=5, wait_ms=10_000).messages
    elapsed = time.monotonic() - started
    timer.join()
    assert [_n(d) for d in got] == [1]
    assert 0.3 <= elapsed < 1.5


# --- purge, pause, metrics ------------------------------------------------------------------------------


def test_purge_removes_everything_for_every_group(clocked, clock, queue_name):
    clocked.queues.create(queue_name, {"visibility_timeout_ms": 1000})
    clocked.groups.create(queue_name, "other")
    clocked.publisher.publish(queue_name, [_msg(n) for n in range(20)])
    clocked.publisher.publish(queue_name, [_msg(100, delay_seconds=60)])
    in_flight = clocked.consumer.pull(queue_name, group="default", batch_size=5).messages
    (retried,) = clocked.consumer.pull(queue_name, group="other", batch_size=1).messages
    clocked.consumer.ack(queue_name, [], [RetryRequest(retried.lease_id, 30)])
    assert clocked.operations.metrics(queue_name)["backlog_count"] == 21

    clocked.operations.purge(queue_name)
    metrics = clocked.operations.metrics(queue_name)
    assert metrics["backlog_count"] == 0 and metrics["consumer_groups"]["other"]["backlog_count"] == 0
    clock.advance(120_000)  # past leases, retry delays and the delayed message
    clocked.groups.create(queue_name, "after", "earliest")
    for group in ("default", "other", "after"):
        assert clocked.consumer.pull(queue_name, group=group, batch_size=100).messages == []
    assert clocked.consumer.ack(queue_name, [in_flight[0].lease_id]).ack_count == 0
    clocked.publisher.publish(queue_name, [_msg(21)])
    for group in ("default", "other", "after"):
        assert [_n(d) for d in _drain(clocked, queue_name, group)] == [21]


def test_paused_queue_refuses_pulls_accepts_sends_and_delivers_after_resume(clocked, queue_name):
    clocked.queues.create(queue_name)
    clocked.publisher.publish(queue_name, [_msg(1)])
    clocked.queues.set_paused(queue_name, True)
    with pytest.raises(errors.QueuePaused):
        clocked.consumer.pull(queue_name, group="default", batch_size=5)
    clocked.publisher.publish(queue_name, [_msg(2), _msg(3)])
    clocked.queues.set_paused(queue_name, False)
    assert [_n(d) for d in _drain(clocked, queue_name)] == [1, 2, 3]


def test_metrics_per_group_and_shard(clocked, clock, queue_name):
    clocked.queues.create(queue_name, {"min_shards": 2})
    clocked.groups.create(queue_name, "idle")
    for _ in range(10):
        clocked.publisher.publish(queue_name, [OutgoingMessage(body=b'"' + b"x" * 198 + b'"')])
        clock.advance(1000)
    pulled = clocked.consumer.pull(queue_name, group="default", batch_size=3).messages
    clocked.consumer.ack(queue_name, [pulled[0].lease_id])
    metrics = clocked.operations.metrics(queue_name)
    assert metrics["shard_count"] == 2 and len(metrics["shards"]) == 2
    assert (metrics["backlog_count"], metrics["in_flight"]) == (9, 2)
    assert metrics["backlog_bytes"] == 9 * 200
    assert metrics["consumer_groups"]["idle"]["backlog_count"] == 10
    assert metrics["consumer_groups"]["idle"]["oldest_message_age_ms"] == 10_000
    assert sum(s["consumer_groups"]["default"]["backlog_count"] for s in metrics["shards"]) == 9
    assert metrics["oldest_message_timestamp_ms"] > 0
