"""The SDK's batching producer (sluice/producer.py) and the SDK's acks on the next pull, against a
recording stand-in for the HTTP client."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import wait
from typing import Any

import pytest

from sluice.client import SluiceApiError, SluiceClient
from sluice.producer import BatchingProducer


class FakeClient:
    """Records every send_batch; answers message ids `m<n>` in arrival order, or fails on demand."""

    def __init__(self, delay: float = 0.0, fail: Exception | None = None) -> None:
        self.batches: list[list[dict[str, Any]]] = []
        self.delay, self.fail = delay, fail
        self._lock = threading.Lock()
        self._next = 0

    def send_batch(self, queue: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
        time.sleep(self.delay)
        if self.fail:
            raise self.fail
        with self._lock:
            self.batches.append(messages)
            ids = [f"m{self._next + i}" for i in range(len(messages))]
            self._next += len(messages)
        return {"message_ids": ids}


def test_sends_from_many_threads_travel_in_full_batches():
    client = FakeClient(delay=0.02)
    futures = []
    lock = threading.Lock()
    with BatchingProducer(client, "q", linger_ms=50) as producer:  # type: ignore[arg-type]

        def work(t: int) -> None:
            for i in range(100):
                f = producer.send({"t": t, "i": i}, partition_key=f"k{t}")
                with lock:
                    futures.append(f)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    ids = [f.result(timeout=5) for f in futures]
    assert len(set(ids)) == 800  # every send answered with its own id
    sent = [m for batch in client.batches for m in batch]
    assert len(sent) == 800 and all(len(b) <= 100 for b in client.batches)
    assert len(client.batches) <= 16  # batched (800 single requests without it)
    assert sent[0]["partition_key"].startswith("k")  # per-message options travel with the message
    for t in range(8):  # one thread's messages keep their order
        mine = [m["body"]["i"] for m in sent if m["body"]["t"] == t]
        assert mine == sorted(mine)


def test_a_lone_message_leaves_after_the_linger_time():
    client = FakeClient()
    producer = BatchingProducer(client, "q", linger_ms=30)  # type: ignore[arg-type]
    started = time.monotonic()
    assert producer.send("one").result(timeout=5) == "m0"
    waited = time.monotonic() - started
    assert 0.025 <= waited < 2.0
    producer.close()


def test_batches_are_cut_by_bytes():
    client = FakeClient()
    body = "x" * 300
    size = len(json.dumps({"body": body}, separators=(",", ":")))
    with BatchingProducer(client, "q", linger_ms=1000, max_batch_bytes=3 * size) as producer:  # type: ignore[arg-type]
        futures = [producer.send(body) for _ in range(7)]
    wait(futures, timeout=5)
    assert [len(b) for b in client.batches] == [3, 3, 1]


def test_flush_ships_without_waiting_for_the_linger_and_close_flushes():
    client = FakeClient()
    producer = BatchingProducer(client, "q", linger_ms=60_000)  # type: ignore[arg-type]
    first = producer.send(1)
    producer.flush(timeout=5)
    assert first.done() and client.batches == [[{"body": 1}]]
    last = producer.send(2)
    producer.close(timeout=5)
    assert last.result() == "m1"
    with pytest.raises(RuntimeError, match="closed"):
        producer.send(3)


def test_a_failed_request_fails_every_future_of_its_batch():
    client = FakeClient(fail=ConnectionError("down"))
    with BatchingProducer(client, "q", linger_ms=1000) as producer:  # type: ignore[arg-type]
        futures = [producer.send(i) for i in range(3)]
    for f in futures:
        with pytest.raises(ConnectionError, match="down"):
            f.result(timeout=5)


def test_bad_settings_and_oversized_messages_are_refused():
    client = FakeClient()
    with pytest.raises(ValueError, match="max_batch_messages"):
        BatchingProducer(client, "q", max_batch_messages=101)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="linger_ms"):
        BatchingProducer(client, "q", linger_ms=-1)  # type: ignore[arg-type]
    producer = BatchingProducer(client, "q", max_batch_bytes=100)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="larger than max_batch_bytes"):
        producer.send("x" * 200)
    producer.close()
    assert client.batches == []


class RecordingClient(SluiceClient):
    """The real SDK with its transport replaced: records requests, answers pulls from a script."""

    def __init__(self, pulls: list[list[str]]) -> None:
        super().__init__("http://sluice.invalid", "t")
        self.requests: list[tuple[str, Any]] = []
        self._pulls = pulls

    def request(self, method: str, path: str, body: Any = None, **_: Any) -> Any:
        self.requests.append((path.rsplit("/", 1)[-1], body))
        leases = self._pulls.pop(0) if self._pulls else []
        messages = [{"id": lease, "body": lease, "lease_id": lease} for lease in leases]
        carried = body.get("acks")
        ack = {"ackCount": len(carried), "retryCount": 0, "warnings": []} if carried is not None else None
        return {"messages": messages, "message_backlog_count": 0, **({"ack": ack} if ack else {})}


def test_iterate_acks_each_batch_on_the_next_pull():
    client = RecordingClient([["a", "b"], ["c"]])
    assert [m.body for m in client.iterate("q", batch_size=2)] == ["a", "b", "c"]
    assert [(path, body.get("acks")) for path, body in client.requests] == [
        ("pull", None),
        ("pull", [{"lease_id": "a"}, {"lease_id": "b"}]),
        ("pull", [{"lease_id": "c"}]),  # the last batch's acks ride on the pull that finds nothing
    ]


class ThrottledClient(RecordingClient):
    """Pulls that fail as they would after the SDK's own retries, before the script's answers."""

    def __init__(self, pulls: list[list[str]], failures: dict[int, SluiceApiError]) -> None:
        super().__init__(pulls)
        self.failures = failures  # request number -> the error it raises

    def request(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        failure = self.failures.pop(len(self.requests), None)
        if failure is not None:
            self.requests.append(("refused", body))
            raise failure
        return super().request(method, path, body, **kwargs)


def test_iterate_outlives_throttles_and_keeps_the_acks_for_the_next_pull(monkeypatch):
    monkeypatch.setattr("sluice.client.time.sleep", lambda _s: None)
    busy = SluiceApiError(429, None, "Too Many Requests")  # API Gateway past its quota: no code
    client = ThrottledClient([["a"], ["b"]], {1: busy, 2: busy, 4: SluiceApiError(503, 10503, "busy")})
    assert [m.body for m in client.iterate("q", batch_size=1)] == ["a", "b"]
    acks = [(path, body.get("acks")) for path, body in client.requests]
    assert acks == [
        ("pull", None),
        ("refused", [{"lease_id": "a"}]),
        ("refused", [{"lease_id": "a"}]),
        ("pull", [{"lease_id": "a"}]),  # a's ack went again with the pull that got through
        ("refused", [{"lease_id": "b"}]),
        ("pull", [{"lease_id": "b"}]),
    ]
    gone = ThrottledClient([["a"]], {1: SluiceApiError(404, 10200, "queue not found")})
    with pytest.raises(SluiceApiError, match="404"):
        list(gone.iterate("q", batch_size=1))


def test_which_answers_are_transient():
    assert SluiceApiError(429, 10429, "shard busy").transient
    assert SluiceApiError(429, None, "Too Many Requests").transient
    assert SluiceApiError(503, None, "Service Unavailable").transient
    assert SluiceApiError(500, None, "Internal Server Error").transient  # the gateway's own
    assert not SluiceApiError(500, 10000, "a handler's bug").transient
    assert not SluiceApiError(409, 10115, "a concurrent change won").transient
    assert not SluiceApiError(400, 10100, "bad request").transient


def test_pull_reports_the_carried_acks():
    client = RecordingClient([["x"]])
    result = client.pull("q", acks=["old"])
    assert result.ack == {"ackCount": 1, "retryCount": 0, "warnings": []}
    assert client.pull("q").ack is None
