"""The coordinator on the local runtime, driven by the template's schedule run 5 times faster (a 1 s
tick instead of the deployed 5 s), scales a queue out and back under real producers and consumers, and
starts push workers for a webhook consumer.

Moto serves far fewer writes than DynamoDB, so the per-shard write ceiling is lowered to 20 WCU/s
(`SLUICE_SHARD_WCU_CEILING`) and idle shards are sealed after 3 s instead of 60 s: the policy is the
deployed one, only the thresholds are scaled to what moto reaches.
"""

from __future__ import annotations

import collections
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sluice import constants as c
from sluice.client import SluiceApiError, SluiceClient
from sluice.local.runtime import LocalRuntime
from sluice.service import Sluice

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
TOKEN = "coordinator-e2e-token"


@pytest.fixture(scope="module")
def runtime():
    rt = LocalRuntime(
        port=0,
        admin_token=TOKEN,
        stage="coord",
        concurrency={c.FN_BROKER: 4, c.FN_CONSUMER: 2, c.FN_COORDINATOR: 1},
        async_concurrency={c.FN_CONSUMER: 4},
        time_scale=c.DEFAULT_COORDINATOR_TICK_SECONDS,  # ticks of 1 s
        extra_env={
            c.ENV_SHARD_WCU_CEILING: "8",  # scaling triggers at rates moto reaches on a loaded machine
            c.ENV_SCALE_DOWN_AFTER_SECONDS: "3",
            c.ENV_COORDINATOR_LEASE_SECONDS: "20",
        },
    )
    rt.start()
    yield rt
    rt.stop()


def shard_states(engine: Sluice, name: str) -> collections.Counter:
    return collections.Counter(s.state for s in engine.queues.get(name).shards)


def test_producers_scale_a_queue_out_and_back_and_every_message_arrives_once(runtime):
    engine = Sluice.from_settings(runtime.settings)
    admin = SluiceClient(runtime.url, TOKEN)
    name = "scaled"
    admin.create_queue(name, max_shards=6, min_shards=1)
    engine.queues.modify(name, lambda q: q.model_copy(update={"groups": {**q.groups, "analytics": 0}}))

    stop_producing, stop_consuming = threading.Event(), threading.Event()
    sent: list[str] = []
    producer_errors: list[Exception] = []
    stalled: list[Exception] = []
    received: dict[str, list[str]] = {"default": [], "analytics": []}
    lock = threading.Lock()

    def produce(p: int) -> None:
        client = SluiceClient(runtime.url, TOKEN, max_attempts=1)  # any error would reach us
        n = 0
        while not stop_producing.is_set():
            try:
                ids = client.send_batch(name, [{"body": {"p": p, "n": n + i}} for i in range(10)])
            except SluiceApiError as exc:
                # Transient 503s of the publish path that have nothing to do with sealing, on an
                # overloaded machine: 10504 (a send stalled > 15 s between its two writes and lost its
                # slot to gap repair) and "the shard head is contended" (8 producers on one head before
                # the coordinator adds shards). Nothing was stored; the documented answer is to retry.
                # Counted and reported, not hidden. A sealed shard surfacing would be "resharding".
                transient = exc.code == 10504 or (exc.code == 10503 and "contended" in str(exc))
                (stalled if transient else producer_errors).append(exc)
                continue
            except Exception as exc:
                producer_errors.append(exc)
                continue
            n += 10
            with lock:
                sent.extend(ids["message_ids"])

    def consume(group: str) -> None:
        client = SluiceClient(runtime.url, TOKEN)
        while not stop_consuming.is_set():
            result = client.pull(name, batch_size=100, consumer_group=group, visibility_timeout_ms=20_000)
            messages = result.messages
            if messages:
                received[group].extend(m.id for m in messages)
                client.ack(name, [m.lease_id for m in messages])
            else:
                time.sleep(0.2)

    producers = [threading.Thread(target=produce, args=(p,)) for p in range(8)]
    consumers = [threading.Thread(target=consume, args=(g,)) for g in received]
    for t in producers + consumers:
        t.start()
    timeline = []
    started = time.monotonic()
    try:
        most_open = 1
        while time.monotonic() - started < 180 and most_open < 4:
            states = shard_states(engine, name)
            most_open = max(most_open, states["open"])
            timeline.append((round(time.monotonic() - started, 1), dict(states), len(sent)))
            time.sleep(0.5)
        time.sleep(2)  # let messages land on the new shards too
    finally:
        stop_producing.set()
        for t in producers:
            t.join()
    stopped_at = time.monotonic()
    try:
        while time.monotonic() - stopped_at < 180:
            states = shard_states(engine, name)
            timeline.append((round(time.monotonic() - started, 1), dict(states), len(sent)))
            done = all(len(set(r)) >= len(sent) for r in received.values())
            if states["open"] == 1 and states["sealed"] == 0 and done:
                break
            time.sleep(0.5)
    finally:
        stop_consuming.set()
        for t in consumers:
            t.join()
    print(f"\nsent {len(sent)}; 1 → {most_open} shards; {len(stalled)} transient 503s retried")
    print(f"timeline (s, shard states, sent): {timeline[::4]}")
    assert most_open >= 4, timeline
    assert not producer_errors, producer_errors[:3]
    states = shard_states(engine, name)
    assert states["open"] == 1 and states["sealed"] == 0, timeline  # back to min_shards, all retired
    for group, ids in received.items():
        counts = collections.Counter(ids)
        assert set(counts) == set(sent), f"{group}: {len(set(sent) - set(counts))} missing"
        assert max(counts.values()) == 1, f"{group}: duplicates"


class _Hook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        server = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with server.lock:
            server.inflight += 1
            server.max_inflight = max(server.max_inflight, server.inflight)
        time.sleep(0.15)
        with server.lock:
            server.inflight -= 1
            server.ids.extend(m["id"] for m in body["messages"])
            server.batches += 1
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def test_webhook_push_consumer_drains_a_5000_message_backlog_with_rising_concurrency(runtime):
    hook = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    hook.daemon_threads = True
    hook.lock, hook.inflight, hook.max_inflight, hook.ids, hook.batches = threading.Lock(), 0, 0, [], 0
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    try:
        admin = SluiceClient(runtime.url, TOKEN)
        name = "pushed"
        admin.create_queue(name, max_shards=1)
        sent = []
        for b in range(50):
            sent += admin.send_batch(name, [{"body": {"n": b * 100 + i}} for i in range(100)])["message_ids"]
        consumer = admin.request(
            "POST",
            f"/v1/queues/{name}/consumers",
            {
                "type": "webhook",
                "url": f"http://127.0.0.1:{hook.server_address[1]}/hook",
                "max_batch_size": 50,
                "max_batch_timeout_ms": 200,
                "max_concurrency": 4,
                "max_retries": 5,
            },
        )
        assert consumer["type"] == "webhook"
        started = time.monotonic()
        while time.monotonic() - started < 300 and len(set(hook.ids)) < len(sent):  # loaded CI machines
            time.sleep(0.5)
        elapsed = time.monotonic() - started
        duplicates = len(hook.ids) - len(set(hook.ids))  # at-least-once: a failed ack redelivers a batch
        print(
            f"\npush: {len(set(hook.ids))}/{len(sent)} delivered in {elapsed:.1f} s, {hook.batches} batches, "
            f"max concurrent webhook calls {hook.max_inflight}, duplicates {duplicates}"
        )
        assert set(hook.ids) == set(sent)
        assert hook.max_inflight > 1
    finally:
        hook.shutdown()
