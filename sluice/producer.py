"""A batching producer for the SDK: single sends from many threads travel in batched requests.

Sluice is priced per request and per KB written, so a message sent alone costs about as much as a
batch of 100 (docs/performance.md). Like Kafka's producer (`linger.ms`, `batch.size`) and SQS's
buffered async client, `send` returns at once with a future; a sender thread ships what has gathered
when the oldest message has waited `linger_ms`, or as soon as a batch is full (by count or bytes).
One request is in flight at a time, so messages leave in the order they were sent.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import Future, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sluice.client import SluiceClient

MAX_BATCH_MESSAGES = 100  # the API's limit per send request
MAX_BATCH_BYTES = 4_000_000  # under the native API's 4 MiB per send, counted as JSON (bodies are no larger)


@dataclass
class _Pending:
    message: dict[str, Any]
    size: int
    future: Future[str]


class BatchingProducer:
    """`send(body, **options) -> Future[message id]`; `flush()` waits for everything sent so far;
    `close()` (or leaving a `with` block) flushes and stops the sender. Thread-safe."""

    def __init__(
        self,
        client: SluiceClient,
        queue: str,
        *,
        linger_ms: float = 5.0,
        max_batch_messages: int = MAX_BATCH_MESSAGES,
        max_batch_bytes: int = MAX_BATCH_BYTES,
    ) -> None:
        if not 1 <= max_batch_messages <= MAX_BATCH_MESSAGES:
            raise ValueError(f"max_batch_messages must be 1..{MAX_BATCH_MESSAGES}")
        if not 1 <= max_batch_bytes <= MAX_BATCH_BYTES:
            raise ValueError(f"max_batch_bytes must be 1..{MAX_BATCH_BYTES}")
        if linger_ms < 0:
            raise ValueError("linger_ms must be >= 0")
        self._client, self._queue = client, queue
        self._linger = linger_ms / 1000
        self._max_messages, self._max_bytes = max_batch_messages, max_batch_bytes
        self._cond = threading.Condition()
        self._buffer: list[_Pending] = []
        self._buffered_bytes = 0
        self._oldest = 0.0  # monotonic time the oldest buffered message arrived
        self._in_flight: list[_Pending] = []
        self._flushing = 0  # callers waiting in flush(): ship without lingering
        self._closed = False
        self._sender = threading.Thread(target=self._run, name=f"sluice-producer-{queue}", daemon=True)
        self._sender.start()

    def send(self, body: Any, **options: Any) -> Future[str]:
        """Queue one message (options as `SluiceClient.send`: content_type, delay_seconds,
        partition_key, attributes); the future gives its message id, or the request's error."""
        message = {"body": body, **options}
        size = len(json.dumps(message, separators=(",", ":")).encode())
        if size > self._max_bytes:
            raise ValueError(f"message of {size} bytes is larger than max_batch_bytes ({self._max_bytes})")
        pending = _Pending(message, size, Future())
        with self._cond:
            if self._closed:
                raise RuntimeError("the producer is closed")
            first = not self._buffer
            if first:
                self._oldest = time.monotonic()
            self._buffer.append(pending)
            self._buffered_bytes += size
            if first or self._full():  # the sender starts the linger clock, or ships a full batch
                self._cond.notify_all()
        return pending.future

    def flush(self, timeout: float | None = None) -> None:
        """Ship what is buffered now and wait for it (and the request in flight) to be answered."""
        with self._cond:
            waiting = [p.future for p in self._buffer + self._in_flight]
            self._flushing += 1
            self._cond.notify_all()
        try:
            wait(waiting, timeout=timeout)
        finally:
            with self._cond:
                self._flushing -= 1

    def close(self, timeout: float | None = None) -> None:
        """Send what is buffered, then stop the sender; `send` fails from now on."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._sender.join(timeout)

    def __enter__(self) -> BatchingProducer:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # --- the sender thread --------------------------------------------------------------------------

    def _full(self) -> bool:
        return len(self._buffer) >= self._max_messages or self._buffered_bytes >= self._max_bytes

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if not self._buffer:
                        if self._closed:
                            return
                        self._cond.wait()
                        continue
                    due = self._oldest + self._linger - time.monotonic()
                    if self._closed or self._flushing or self._full() or due <= 0:
                        break
                    self._cond.wait(due)
                batch = self._take()
                self._in_flight = batch
            self._ship(batch)
            with self._cond:
                self._in_flight = []

    def _take(self) -> list[_Pending]:
        """The oldest messages that fit one request (by count and bytes); the rest stay buffered."""
        batch: list[_Pending] = []
        size = 0
        for pending in self._buffer:
            if len(batch) == self._max_messages or (batch and size + pending.size > self._max_bytes):
                break
            batch.append(pending)
            size += pending.size
        del self._buffer[: len(batch)]
        self._buffered_bytes -= size  # what is left over was a full batch's overflow: it ships at once
        return batch

    def _ship(self, batch: list[_Pending]) -> None:
        try:
            answer = self._client.send_batch(self._queue, [p.message for p in batch])
        except Exception as exc:  # every future of the batch carries the request's error
            for p in batch:
                p.future.set_exception(exc)
            return
        for p, message_id in zip(batch, answer["message_ids"], strict=True):
            p.future.set_result(message_id)
