"""Kill and check (Jepsen style) against a `sluice local` subprocess: producers, two consumer groups and
a stream reader run over HTTP while the runtime's Lambda containers are SIGKILLed and SIGSTOPped.

Checked at the end, per group: nothing acknowledged is lost, nothing unexpected is delivered (every
body was sent by a producer), nothing is delivered by a pull that began after its ack returned; the
stream reader sees every acknowledged message exactly once, in offset order per shard. A message
delivered `max_retries` times unacked (three lost responses to pulls of it, say) is moved to the dead
letter queue, as the contract says: it counts as lost only if no copy of it is there.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
import uuid
from collections import Counter
from typing import Any

import pytest

from sluice.client import SluiceClient
from tests.conftest import report
from tests.e2e.conftest import start_local_server, stop_local_server, worker_pids

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
GROUPS = ("default", "g2")
PRODUCERS, CONSUMERS_PER_GROUP, BATCH = 2, 2, 20
CHAOS_SECONDS = 45
PRODUCE_LIMIT_SECONDS, TARGET_ACKED = 100, 300
DRAIN_LIMIT_SECONDS = 120
VISIBILITY_MS = 8_000


def test_no_acknowledged_message_is_lost_or_duplicated_while_containers_are_killed_and_stopped(pytestconfig):
    server = start_local_server()
    try:
        _run(server, pytestconfig)
    finally:
        stop_local_server(server)


def _client(server: Any) -> SluiceClient:
    return SluiceClient(server.url, server.token, max_attempts=1, timeout_seconds=40)


def _run(server: Any, pytestconfig: pytest.Config) -> None:
    admin = SluiceClient(server.url, server.token)
    queue = f"kac-{uuid.uuid4().hex[:8]}"
    # The default retry limit (3) and a dead letter queue: three lost responses to pulls of one batch
    # (killed containers, each lease coming due 8 s later) move it there, which the check counts (a queue
    # without one drops such a message by contract, engine/deadletter.py: a run once "lost" a batch of 10
    # that no client had seen, likely so).
    dlq = f"{queue}-dlq"
    admin.create_queue(queue, min_shards=2, visibility_timeout_ms=VISIBILITY_MS, dead_letter_queue=dlq)
    admin.request("POST", f"/v1/queues/{queue}/consumer-groups", {"name": "g2", "start": "earliest"})

    lock = threading.Lock()
    acked_sends: dict[str, str] = {}  # message id -> body key, for sends answered 2xx
    attempted: set[str] = set()  # every body key any producer sent, answered or not
    delivered: dict[str, Counter[str]] = {g: Counter() for g in GROUPS}
    acked_at: dict[tuple[str, str], float] = {}
    dup_after_ack: dict[str, list[str]] = {g: [] for g in GROUPS}
    unexpected: dict[str, list[Any]] = {g: [] for g in GROUPS}
    errors_seen: Counter[str] = Counter()
    producing = threading.Event()
    producing.set()
    stop = threading.Event()

    def note_error(exc: BaseException) -> None:
        with lock:
            status = getattr(exc, "status", None)
            errors_seen[f"{status}/{getattr(exc, 'code', None)}" if status else type(exc).__name__] += 1

    def producer(pid: int) -> None:
        mine, batch_no = _client(server), 0
        while producing.is_set():
            keys = [f"p{pid}-b{batch_no}-{i}" for i in range(BATCH)]
            batch_no += 1
            with lock:
                attempted.update(keys)
            try:
                result = mine.send_batch(queue, [{"body": {"key": k}} for k in keys])
            except Exception as exc:  # a killed container: the send may or may not be stored
                note_error(exc)
                time.sleep(0.2)
                continue
            with lock:
                acked_sends.update(zip(result["message_ids"], keys, strict=True))

    def consumer(group: str) -> None:
        mine = _client(server)
        while not stop.is_set():
            began = time.monotonic()
            try:
                got = mine.pull(
                    queue, batch_size=10, visibility_timeout_ms=VISIBILITY_MS, consumer_group=group
                )
            except Exception as exc:
                note_error(exc)
                time.sleep(0.2)
                continue
            if not got.messages:
                time.sleep(0.2)
                continue
            with lock:
                for m in got.messages:
                    delivered[group][m.id] += 1
                    done = acked_at.get((group, m.id))
                    if done is not None and done < began:
                        dup_after_ack[group].append(m.id)
                    key = m.body.get("key") if isinstance(m.body, dict) else None
                    if key not in attempted:
                        unexpected[group].append(m.body)
            try:
                mine.ack(queue, [m.lease_id for m in got.messages])
            except Exception as exc:  # unacked: the leases lapse and the messages come back
                note_error(exc)
                continue
            now = time.monotonic()
            with lock:
                for m in got.messages:
                    acked_at.setdefault((group, m.id), now)

    reader_seen: Counter[str] = Counter()
    reader_violations: list[str] = []

    def reader() -> None:
        mine, offset = _client(server), "-"
        last_per_shard: dict[str, str] = {}
        while not stop.is_set():
            try:
                page = mine.request(
                    "GET", f"/v1/queues/{queue}/records", query={"offset": offset, "limit": 200}
                )
            except Exception as exc:
                note_error(exc)
                time.sleep(0.2)
                continue
            for rec in page["records"]:
                shard, off = str(rec["shard"]), rec["offset"]
                if shard in last_per_shard and off <= last_per_shard[shard]:
                    reader_violations.append(f"shard {shard}: {off} after {last_per_shard[shard]}")
                last_per_shard[shard] = off
                with lock:
                    reader_seen[rec["id"]] += 1
            offset = page.get("next_offset") or offset
            if not page["records"]:
                time.sleep(0.3)

    kills = stops = 0

    def chaos() -> None:
        nonlocal kills, stops
        rng = random.Random(18)
        end = time.monotonic() + CHAOS_SECONDS
        while time.monotonic() < end:
            time.sleep(rng.uniform(0.8, 2.0))
            pids = worker_pids(server.process.pid)
            if not pids:
                continue
            pid = rng.choice(pids)
            try:
                if rng.random() < 0.75:
                    os.kill(pid, signal.SIGKILL)
                    kills += 1
                else:
                    os.kill(pid, signal.SIGSTOP)
                    stops += 1
                    time.sleep(rng.uniform(1.0, 4.0))
                    os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    threads = [threading.Thread(target=producer, args=(p,), daemon=True) for p in range(PRODUCERS)]
    threads += [
        threading.Thread(target=consumer, args=(g,), daemon=True)
        for g in GROUPS
        for _ in range(CONSUMERS_PER_GROUP)
    ]
    threads.append(threading.Thread(target=reader, daemon=True))
    chaos_thread = threading.Thread(target=chaos, daemon=True)
    begin = time.monotonic()
    for t in [*threads, chaos_thread]:
        t.start()
    chaos_thread.join()
    # On a loaded machine sends are slow: produce on (without chaos) until the sample is big enough.
    while time.monotonic() - begin < PRODUCE_LIMIT_SECONDS:
        with lock:
            if len(acked_sends) >= TARGET_ACKED:
                break
        time.sleep(0.5)
    producing.clear()
    for t in threads[:PRODUCERS]:
        t.join(60)

    def caught_up() -> bool:
        with lock:
            wanted = set(acked_sends)
            return all(wanted <= {m for (g2, m) in acked_at if g2 == g} for g in GROUPS) and wanted <= set(
                reader_seen
            )

    deadline = time.monotonic() + DRAIN_LIMIT_SECONDS
    while time.monotonic() < deadline and not caught_up():
        time.sleep(0.5)
    time.sleep(VISIBILITY_MS / 1000)  # let any wrongly kept lease lapse: a redelivery would show now
    stop.set()
    for t in threads:
        t.join(60)

    dead_lettered: Counter[str] = Counter()  # body key -> copies in the dead letter queue
    for message in admin.iterate(dlq, batch_size=100, wait_time_ms=0):
        dead_lettered[message.body["key"]] += 1
    with lock:
        # Undelivered in a group: lost, unless the group dead-lettered it (one copy a group at least).
        missing = {g: [m for m in acked_sends if m not in delivered[g]] for g in GROUPS}
        undelivered = Counter(acked_sends[m] for g in GROUPS for m in missing[g])
        lost = {
            g: sorted(m for m in missing[g] if undelivered[acked_sends[m]] > dead_lettered[acked_sends[m]])
            for g in GROUPS
        }
        dup_delivered = {g: sum(1 for n in delivered[g].values() if n > 1) for g in GROUPS}
        stream_missing = sorted(set(acked_sends) - set(reader_seen))
        stream_dups = sorted(m for m, n in reader_seen.items() if n > 1)
    figures = {
        "acknowledged_sends": len(acked_sends),
        "attempted_messages": len(attempted),
        "kills": kills,
        "stops": stops,
        "lost": {g: len(v) for g, v in lost.items()},
        "dead_lettered": sum(dead_lettered.values()),
        "unexpected": {g: len(v) for g, v in unexpected.items()},
        "dup_after_ack": {g: len(v) for g, v in dup_after_ack.items()},
        "redelivered_before_ack": dup_delivered,
        "stream_seen": len(reader_seen),
        "stream_missing": len(stream_missing),
        "stream_duplicates": len(stream_dups),
        "stream_order_violations": len(reader_violations),
        "client_errors": dict(errors_seen),
        "seconds": round(time.monotonic() - begin, 1),
    }
    report(pytestconfig, "kill-and-check", json.dumps(figures, sort_keys=True))
    assert kills >= 10 and stops >= 2, figures
    assert len(acked_sends) >= 100, figures
    assert all(not v for v in lost.values()), {g: v[:5] for g, v in lost.items()}
    assert all(not v for v in unexpected.values()), {g: v[:5] for g, v in unexpected.items()}
    assert all(not v for v in dup_after_ack.values()), {g: v[:5] for g, v in dup_after_ack.items()}
    assert not stream_missing, stream_missing[:5]
    assert not stream_dups, stream_dups[:5]
    assert not reader_violations, reader_violations[:5]
