"""Everything at once under 10% injected DynamoDB/S3 faults: producers, competing consumers in two
groups, resharding and (once the shard Lambda exists) the flusher, plus a stream reader.

Invariants checked:
- every acknowledged send is delivered to every group, or sits in the dead-letter queue;
- nothing is delivered again by a pull that started after the message's ack returned;
- a stream reader sees each record exactly once, in order (no overlapping items, no re-reads), and
  reaches every shard's head once gaps are sealed;
- no caller saw an error that maps to HTTP 500 (only 409/429/503, which clients retry).
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable

import pytest

from lambdas.common.errors import status_of
from sluice import errors
from sluice.engine import consume, gaps
from sluice.faults import FaultInjector
from sluice.local.provision import provision
from sluice.models import OutgoingMessage
from sluice.service import Sluice
from tests.faults.harness import RETRYABLE, HotTierReader, reshard, retrying, serialized_moto

GROUPS = ("default", "g2")
PRODUCERS, BATCHES_PER_PRODUCER = 2, 24
CONSUMERS_PER_GROUP = 2
POISON_EVERY = 29  # these messages are always retried by consumers: they must end in the DLQ
VISIBILITY_MS = 1_500
MAX_RETRIES = 3
RUN_LIMIT_SECONDS = 150

# The shard Lambda's flush step, `(engine, queue_name) -> None`, run on a timer during the test.
# None until `lambdas/shard` lands on main; the reader then has to read segments as well.
FLUSH_STEP: Callable[[Sluice, str], None] | None = None


@pytest.fixture(scope="module")
def private_engine(aws):
    """Own small tables: moto copies a whole table for each transaction (gap sealing), and other
    tests' items would slow every Query."""
    return Sluice.from_settings(provision(None, "faults"))


@pytest.mark.slow
def test_everything_at_once_under_10_percent_faults(private_engine, monkeypatch):
    monkeypatch.setattr(gaps, "GAP_WAIT_MS", 1_000)  # seal holes after 1 s instead of 15 s
    engine = private_engine
    name = f"conc-{random.getrandbits(32):08x}"
    engine.queues.create(
        name,
        {
            "min_shards": 2,
            "visibility_timeout_ms": VISIBILITY_MS,
            "max_retries": MAX_RETRIES,
            "dead_letter_queue": f"{name}-dlq",
        },
    )
    engine.queues.modify(name, lambda q: q.model_copy(update={"groups": {**q.groups, "g2": 0}}))

    lock = threading.Lock()
    sent: dict[str, bytes] = {}  # acknowledged sends: message id -> body
    delivered: dict[str, dict[str, int]] = {g: defaultdict(int) for g in GROUPS}
    acked_at: dict[tuple[str, str], float] = {}
    violations: list[str] = []
    statuses: Counter[int] = Counter()
    producers_done = threading.Event()
    stop = threading.Event()
    failures: list[BaseException] = []

    def seen_error(exc: BaseException) -> None:
        status = status_of(exc) if isinstance(exc, errors.SluiceError) else 500
        with lock:
            statuses[status] += 1
            if status not in (409, 429, 503):
                violations.append(f"a caller saw {status}: {exc!r}")

    def guarded(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:
                failures.append(exc)
                stop.set()

        return run

    def producer(pid: int) -> None:
        rng = random.Random(pid)
        for b in range(BATCHES_PER_PRODUCER):
            size = rng.randint(1, 10)
            batch = []
            for i in range(size):
                n = (pid * 1000 + b) * 100 + i
                poison = n % POISON_EVERY == 0
                batch.append(OutgoingMessage(body=json.dumps({"n": n, "poison": poison}).encode()))
            while not stop.is_set():
                try:
                    result = engine.publisher.publish(name, batch)
                except errors.SluiceError as exc:
                    seen_error(exc)
                    if not isinstance(exc, RETRYABLE):
                        raise
                    time.sleep(0.01)
                    continue
                with lock:
                    sent.update(zip(result.message_ids, (m.body for m in batch), strict=True))
                break

    def consumer(group: str, cid: int) -> None:
        while not stop.is_set():
            started = time.monotonic()
            try:
                result = engine.consumer.pull(name, group=group, batch_size=10, visibility_ms=VISIBILITY_MS)
            except errors.SluiceError as exc:
                seen_error(exc)
                if not isinstance(exc, RETRYABLE):
                    raise
                time.sleep(0.01)
                continue
            if not result.messages:
                time.sleep(0.05)
                continue
            acks, retries = [], []
            with lock:
                for d in result.messages:
                    done = acked_at.get((group, d.id))
                    if done is not None and done < started:
                        violations.append(f"{group}: {d.id} delivered by a pull that began after its ack")
                    delivered[group][d.id] += 1
                    (retries if json.loads(d.body)["poison"] else acks).append(d.lease_id)
            while not stop.is_set():
                try:
                    engine.consumer.ack(name, acks, [consume.RetryRequest(lease, 0) for lease in retries])
                except errors.SluiceError as exc:
                    seen_error(exc)
                    if not isinstance(exc, RETRYABLE):
                        raise
                    time.sleep(0.01)
                    continue
                now = time.monotonic()
                with lock:
                    for d in result.messages:
                        if not json.loads(d.body)["poison"]:
                            acked_at.setdefault((group, d.id), now)
                break

    reader = HotTierReader(engine, name)

    def background() -> None:
        """Resharding twice while producers run, the flusher, and the stream reader."""
        plan = [(0.3, 0), (0.6, 1)]  # (share of batches sent, shard to seal)
        total = PRODUCERS * BATCHES_PER_PRODUCER
        while not stop.is_set():
            with lock:
                progress = len(sent) / (total * 5.5)  # 5.5 messages per batch on average
            if plan and progress >= plan[0][0]:
                reshard(engine, name, plan.pop(0)[1])
            if FLUSH_STEP is not None:
                retrying(lambda: FLUSH_STEP(engine, name))
            try:
                reader.step()
            except RETRYABLE as exc:
                seen_error(exc)
            time.sleep(0.05)

    def everything_arrived() -> bool:
        with lock:
            wanted = {m for m, body in sent.items() if not json.loads(body)["poison"]}
            return all(wanted <= set(delivered[g]) for g in GROUPS) and all(
                len([k for k in acked_at if k[0] == g]) >= len(wanted) for g in GROUPS
            )

    threads = [threading.Thread(target=guarded(lambda p=p: producer(p))) for p in range(PRODUCERS)]
    threads += [
        threading.Thread(target=guarded(lambda g=g, c=c: consumer(g, c)))
        for g in GROUPS
        for c in range(CONSUMERS_PER_GROUP)
    ]
    threads.append(threading.Thread(target=guarded(background)))
    begin = time.monotonic()
    with serialized_moto(), FaultInjector(0.10, applied_share=0.25, throttle_share=0.2, seed=11) as faults:
        for t in threads:
            t.start()
        for t in threads[:PRODUCERS]:
            t.join(RUN_LIMIT_SECONDS)
        producers_done.set()
        while not stop.is_set() and time.monotonic() - begin < RUN_LIMIT_SECONDS:
            if everything_arrived():
                time.sleep(3 * VISIBILITY_MS / 1000)  # let retries of poison messages run out
                break
            time.sleep(0.2)
        stop.set()
        for t in threads:
            t.join(30)
    elapsed = time.monotonic() - begin
    assert not failures, failures

    # After the run, without faults: drain what each group has left (a loaded machine can end the run
    # before the consumers caught up; a message truly lost never comes), then the DLQ, then the stream.
    for group in GROUPS:
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < 3 * VISIBILITY_MS / 1000:
            got = retrying(
                lambda g=group: engine.consumer.pull(
                    name, group=g, batch_size=100, visibility_ms=VISIBILITY_MS
                )
            ).messages
            if not got:
                time.sleep(0.1)
                continue
            quiet_since = time.monotonic()
            delivered[group].update({d.id: delivered[group][d.id] + 1 for d in got})
            poison = [d.lease_id for d in got if json.loads(d.body)["poison"]]
            fine = [d.lease_id for d in got if not json.loads(d.body)["poison"]]
            retrying(
                lambda f=fine, p=poison: engine.consumer.ack(name, f, [consume.RetryRequest(x, 0) for x in p])
            )
    dlq_bodies: Counter[bytes] = Counter()
    while batch := retrying(
        lambda: engine.consumer.pull(f"{name}-dlq", group="default", batch_size=100)
    ).messages:
        dlq_bodies.update(d.body for d in batch)
        engine.consumer.ack(f"{name}-dlq", [d.lease_id for d in batch])
    for _ in range(50):
        reader.step()
        if reader.heads() == reader.next_seq:
            break
        time.sleep(0.05)

    lost = [
        (g, m) for m, body in sent.items() for g in GROUPS if m not in delivered[g] and body not in dlq_bodies
    ]
    poison_sent = [m for m, body in sent.items() if json.loads(body)["poison"]]
    stream_missing = [m for m, body in sent.items() if body not in set(reader.seen.values())]
    print(
        f"\nconcurrency: {len(sent)} acknowledged sends ({len(poison_sent)} poison), "
        f"{sum(len(d) for d in delivered.values())} distinct deliveries over {len(GROUPS)} groups, "
        f"{sum(dlq_bodies.values())} in the DLQ, {faults.injected} injected faults "
        f"({dict(Counter(k[2] for k in faults.counts.elements()))}), caller statuses {dict(statuses)}, "
        f"{elapsed:.1f} s"
    )
    assert faults.injected > 50
    assert len(sent) >= PRODUCERS * BATCHES_PER_PRODUCER
    assert not violations, violations[:10]
    assert not lost, f"{len(lost)} lost: {lost[:10]}"
    assert all(body in dlq_bodies for m, body in sent.items() if m in poison_sent)
    assert not reader.violations, reader.violations[:10]
    assert reader.heads() == reader.next_seq, "the stream reader is stuck behind an unsealed hole"
    assert not stream_missing, f"{len(stream_missing)} acknowledged sends missing from the stream"
    assert set(statuses) <= {409, 429, 503}, statuses
