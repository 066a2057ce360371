"""Lease ownership: only the latest delivery's lease may retry or extend a message; acks stay permissive.

Three consumers share one message. A property test drives interleavings of pull / lapse / stale or
current retry / extend / ack against a tiny model of who holds the message, with a fake clock. The
bug this guards: A's lease lapses, B pulls the message, A retries with its old lease and the message
was taken from B (given to C while B held it, or moved to the DLQ under B's feet).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sluice.engine.consume import RetryRequest
from sluice.models import OutgoingMessage
from sluice.service import Sluice

VISIBILITY_MS = 1_000
MAX_RETRIES = 3
CONSUMERS = ("A", "B", "C")


@dataclass
class Holder:
    """The model: one message, its delivery count, whether its latest delivery is leased, until when."""

    attempts: int = 0
    leased: bool = False
    due_ms: int = 0
    state: str = "pending"  # pending | done | dlq
    held: dict[str, tuple[str, int]] = field(default_factory=dict)  # consumer → (lease id, attempt)

    def current(self, consumer: str) -> bool:
        return consumer in self.held and self.leased and self.held[consumer][1] == self.attempts


ops = st.lists(
    st.one_of(
        st.tuples(st.just("pull"), st.sampled_from(CONSUMERS)),
        st.tuples(st.just("lapse"), st.just("")),
        st.tuples(st.just("retry"), st.sampled_from(CONSUMERS)),
        st.tuples(st.just("extend"), st.sampled_from(CONSUMERS)),
        st.tuples(st.just("ack"), st.sampled_from(CONSUMERS)),
    ),
    min_size=1,
    max_size=12,
)


@pytest.fixture(scope="module")
def ownership(aws):
    from sluice.local.provision import provision
    from tests.conftest import FakeClock

    clock = FakeClock()
    docs: dict[str, str] = {}
    engine = Sluice.from_settings(
        provision(None, "leases"), read_mirror=lambda name: docs.get(name), clock=clock
    )
    return engine, clock, docs


def _new_queue(engine: Sluice, docs: dict[str, str]) -> str:
    name = f"own-{uuid.uuid4().hex[:10]}"
    queue = engine.queues.create(
        name,
        {
            "visibility_timeout_ms": VISIBILITY_MS,
            "max_retries": MAX_RETRIES,
            "retry_delay_seconds": 0,
            "dead_letter_queue": f"{name}-dlq",
        },
    )
    docs[name] = queue.model_dump_json()
    docs[f"{name}-dlq"] = engine.queues.get(f"{name}-dlq").model_dump_json()
    engine.publisher.publish(name, [OutgoingMessage(body=b'"m"')])
    return name


def _dlq_count(engine: Sluice, name: str) -> int:
    got = engine.consumer.pull(f"{name}-dlq", group="default", batch_size=10).messages
    return len(got)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(steps=ops)
def test_only_the_current_lease_retries_or_extends(ownership, steps):
    engine, clock, docs = ownership
    name = _new_queue(engine, docs)
    m = Holder()
    for op, who in steps:
        now = clock()
        if op == "lapse":
            clock.advance(VISIBILITY_MS + 1)
            continue
        if op == "pull":
            got = engine.consumer.pull(name, group="default", batch_size=1).messages
            available = m.state == "pending" and m.due_ms <= now
            if available and m.leased and m.attempts >= MAX_RETRIES:
                m.state, available = "dlq", False  # exhausted by expiry: moved, not delivered
            assert bool(got) == available, (steps, m, got)
            if got:
                m.attempts, m.leased, m.due_ms = m.attempts + 1, True, now + VISIBILITY_MS
                assert got[0].attempts == m.attempts
                m.held[who] = (got[0].lease_id, m.attempts)
            continue
        if who not in m.held:
            continue
        lease_id = m.held[who][0]
        current = m.state == "pending" and m.current(who)
        if op == "ack":
            result = engine.consumer.ack(name, [lease_id])
            assert result.ack_count == (m.state == "pending"), (steps, m, result)  # any lease acks
            if m.state == "pending":
                m.state = "done"
        elif op == "extend":
            result = engine.consumer.extend(name, [lease_id], VISIBILITY_MS)
            assert result.ack_count == current, (steps, m, result)
            if current:
                m.due_ms = now + VISIBILITY_MS
            else:
                assert result.warnings
        else:
            result = engine.consumer.ack(name, [], [RetryRequest(lease_id, 0)])
            assert result.retry_count == current, (steps, m, result)
            if not current:
                assert result.warnings, "a stale retry must say it changed nothing"
            elif m.attempts >= MAX_RETRIES:
                m.state = "dlq"
            else:
                m.leased, m.due_ms = False, now
    assert _dlq_count(engine, name) == (m.state == "dlq"), (steps, m)


def test_stale_retry_leaves_the_live_holder_alone(ownership):
    """The issue's sequence, step by step: A lapses, B pulls, A's retry is a warning, C gets nothing,
    and with max_retries reached A's stale retry moves nothing to the DLQ; B's ack succeeds."""
    engine, clock, docs = ownership
    name = _new_queue(engine, docs)
    leases = []
    for _ in range(MAX_RETRIES):  # deliveries 1..MAX_RETRIES, each lapsing but the last
        got = engine.consumer.pull(name, group="default", batch_size=1).messages
        leases.append(got[0].lease_id)
        if len(leases) < MAX_RETRIES:
            clock.advance(VISIBILITY_MS + 1)
    stale, live = leases[-2], leases[-1]
    result = engine.consumer.ack(name, [], [RetryRequest(stale, 0)])
    assert result.retry_count == 0 and "expired" in result.warnings[0]
    assert engine.consumer.pull(name, group="default", batch_size=1).messages == []  # C: nothing
    assert _dlq_count(engine, name) == 0
    assert engine.consumer.ack(name, [live]).ack_count == 1
