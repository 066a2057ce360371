"""Queue semantics against a small reference model (hypothesis stateful testing, fake clock).

Rules: send (with and without delay), pull, ack, retry (with delay; only by the latest delivery's
lease), time passing (leases expire, delays end), and dead-lettering after `max_retries` deliveries.
Each example uses its own queue and DLQ on the session's tables. `SLUICE_MODEL_EXAMPLES` sets the example
count (default 1,000).

Purge and redrive are not on main yet: when `Consumer.purge` / redrive land, add rules here (the
model's `purge` empties ready/delayed/leased into `done`; redrive moves `dlq` back to `ready`).
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from sluice.engine.consume import RetryRequest
from sluice.models import OutgoingMessage
from sluice.service import Sluice

EXAMPLES = int(os.environ.get("SLUICE_MODEL_EXAMPLES", "1000"))
VISIBILITY_MS = 1_000
MAX_RETRIES = 2


@dataclass
class Msg:
    body: bytes
    visible_at: int
    attempts: int = 0
    leased_until: int | None = None  # set while leased (even once expired, until pulled again)
    state: str = "pending"  # pending | done | dlq


class Model:
    def __init__(self) -> None:
        self.msgs: dict[str, Msg] = {}

    def available(self, now: int) -> list[str]:
        out = []
        for mid, m in self.msgs.items():
            if m.state != "pending":
                continue
            if m.leased_until is not None:
                if m.leased_until <= now and m.attempts < MAX_RETRIES:
                    out.append(mid)
            elif m.visible_at <= now:
                out.append(mid)
        return out

    def exhausted(self, now: int) -> list[str]:
        return [
            mid
            for mid, m in self.msgs.items()
            if m.state == "pending"
            and m.leased_until is not None
            and m.leased_until <= now
            and m.attempts >= MAX_RETRIES
        ]


@pytest.mark.slow
def test_queue_semantics_match_the_model(settings_fixture_alias):
    engine_settings, clock = settings_fixture_alias
    docs: dict[str, str] = {}  # queue documents never change in this test: no mirror reads per call
    shared = Sluice.from_settings(engine_settings, read_mirror=lambda name: docs.get(name), clock=clock)

    class QueueMachine(RuleBasedStateMachine):
        leases = Bundle("leases")

        def __init__(self) -> None:
            super().__init__()
            self.engine = shared
            self.name = f"m-{uuid.uuid4().hex[:12]}"
            queue = self.engine.queues.create(
                self.name,
                {
                    "visibility_timeout_ms": VISIBILITY_MS,
                    "max_retries": MAX_RETRIES,
                    "dead_letter_queue": f"{self.name}-dlq",
                },
            )
            docs[self.name] = queue.model_dump_json()
            docs[f"{self.name}-dlq"] = self.engine.queues.get(f"{self.name}-dlq").model_dump_json()
            self.model = Model()
            self.lease_of: dict[str, str] = {}
            self.attempt_of: dict[str, int] = {}  # lease id → the delivery it names
            self.counter = 0

        def now(self) -> int:
            return clock()

        @rule(count=st.integers(1, 3), delay=st.sampled_from([0, 0, 1, 3]))
        def send(self, count: int, delay: int) -> None:
            bodies = []
            for _ in range(count):
                self.counter += 1
                bodies.append(f'{{"n":{self.counter}}}'.encode())
            result = self.engine.publisher.publish(
                self.name, [OutgoingMessage(body=b, delay_seconds=delay) for b in bodies]
            )
            for mid, body in zip(result.message_ids, bodies, strict=True):
                assert mid not in self.model.msgs
                self.model.msgs[mid] = Msg(body=body, visible_at=self.now() + delay * 1000)

        @rule(target=leases, batch=st.integers(1, 5))
        def pull(self, batch: int):
            from hypothesis.stateful import multiple

            now = self.now()
            available = set(self.model.available(now))
            exhausted = self.model.exhausted(now)
            result = self.engine.consumer.pull(self.name, group="default", batch_size=batch)
            got = result.messages
            assert len(got) <= batch
            if available:
                assert got, f"nothing delivered though {len(available)} messages are available"
            for mid in exhausted:
                self.model.msgs[mid].state = "dlq"
            for d in got:
                assert d.id in available, f"{d.id} delivered but not available: {self.model.msgs.get(d.id)}"
                m = self.model.msgs[d.id]
                assert d.body == m.body
                m.attempts += 1
                assert d.attempts == m.attempts
                m.leased_until = now + VISIBILITY_MS
                available.discard(d.id)
                self.lease_of[d.lease_id] = d.id
                self.attempt_of[d.lease_id] = d.attempts
            return multiple(*[d.lease_id for d in got])

        @rule(lease=leases)
        def ack(self, lease: str) -> None:
            m = self.model.msgs[self.lease_of[lease]]
            result = self.engine.consumer.ack(self.name, [lease])
            if m.state == "pending":
                assert result.ack_count == 1, result
                m.state = "done"
            else:
                assert result.ack_count == 0 and result.warnings, result

        @rule(lease=leases, delay=st.sampled_from([0, 2]))
        def retry(self, lease: str, delay: int) -> None:
            m = self.model.msgs[self.lease_of[lease]]
            result = self.engine.consumer.ack(self.name, [], [RetryRequest(lease, delay)])
            current = m.leased_until is not None and self.attempt_of[lease] == m.attempts
            if m.state != "pending" or not current:  # gone, or an older delivery's lease: a warning
                assert result.retry_count == 0 and result.warnings, result
                return
            assert result.retry_count == 1, result
            if m.attempts >= MAX_RETRIES:
                m.state = "dlq"
            else:
                m.leased_until = None
                m.visible_at = self.now() + delay * 1000

        @rule(ms=st.sampled_from([300, 1_000, 2_500]))
        def time_passes(self, ms: int) -> None:
            clock.advance(ms)

        @invariant()
        def ids_are_unique_per_queue(self) -> None:
            assert len(self.model.msgs) == len(set(self.model.msgs))

        def teardown(self) -> None:
            # Everything the model dead-lettered is in the DLQ, exactly once, and nothing else is.
            dlq_bodies = []
            while True:
                got = self.engine.consumer.pull(f"{self.name}-dlq", group="default", batch_size=100).messages
                if not got:
                    break
                dlq_bodies += [d.body for d in got]
                self.engine.consumer.ack(f"{self.name}-dlq", [d.lease_id for d in got])
            expected = sorted(m.body for m in self.model.msgs.values() if m.state == "dlq")
            assert sorted(dlq_bodies) == expected

    run_state_machine_as_test(
        QueueMachine,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=10,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
        ),
    )


@pytest.fixture
def settings_fixture_alias(aws, clock):
    """(settings, the fake clock) on tables of its own: moto's Query scans the whole table, so a
    thousand examples stay fast only away from the rest of the suite's data. (`settings` clashes
    with hypothesis' name here.)"""
    from sluice.local.provision import provision

    return provision(None, "model"), clock
