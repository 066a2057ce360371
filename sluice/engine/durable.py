"""The Durable Streams face over the engine: a stream is a one-shard, ordered, bottomless queue.

A stream name (1-256 characters in `/`-separated segments, `sluice.names.check_stream_name`) maps to an
internal queue name deterministically (`ds-` + 32 base32 characters of its SHA-256), and the queue
document keeps the real name in `stream_name`. The stream is created by its first publish. Version
fencing is the shard HEAD's `pver`, exactly as `?version=` on the native face. Records are any JSON
value, stored as their compact JSON text with numbers kept as written, and returned as that text: `data`
round-trips byte for byte (modulo insignificant whitespace).

Documents are read from the control table (consistent), not the cached mirror: a stream deleted and
written again must never be appended to its old incarnation. That is one GetItem more per request
than the native face's publish.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

from sluice import errors
from sluice.engine.backend import Backend
from sluice.engine.publish import Publisher
from sluice.engine.queues import QueueRegistry
from sluice.engine.store import ShardAddress
from sluice.engine.streams import MAX_LIMIT, MAX_TIMEOUT_MS, Position, StreamReader, parse_position
from sluice.models import MAX_REQUEST_BYTES, OutgoingMessage, Queue
from sluice.names import check_stream_name
from sluice.segments import Record

# One POST's body: 1 MiB, as for every send. Lambda takes at most 6 MB per synchronous request, and the
# body travels inside the event as an escaped JSON string (each '"' and '\\' doubled, non-ASCII perhaps
# \\u-escaped: up to 3x), so 1 MiB is the largest body the deployed path always accepts.
MAX_BODY_BYTES = MAX_REQUEST_BYTES
STREAM_QUEUE_PREFIX = "ds-"
STREAM_SETTINGS: dict[str, Any] = {
    "ordered": True,
    "min_shards": 1,
    "max_shards": 1,
    "bottomless": True,
    "max_message_bytes": 1_048_576,
}


def queue_name_for(stream: str) -> str:
    """The internal queue of a stream: `ds-` + 32 lowercase base32 characters (160 bits of SHA-256)."""
    digest = hashlib.sha256(stream.encode()).digest()[:20]
    return STREAM_QUEUE_PREFIX + base64.b32encode(digest).decode().lower()


# --- JSON that keeps numbers as written ----------------------------------------------------------------


class _Number(str):
    """A JSON number's source text (so 1.10, 1e2 and -0.0 come back exactly as sent)."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json(text: str | bytes) -> Any:
    """Parse JSON keeping numbers' text; NaN/Infinity are rejected (they are not JSON)."""
    return json.loads(text, parse_float=_Number, parse_int=_Number, parse_constant=_reject_constant)


def _string(value: str) -> str:
    try:
        value.encode()
    except UnicodeEncodeError:  # a lone surrogate escape: keep it escaped
        return json.dumps(value)
    return json.dumps(value, ensure_ascii=False)


def canonical(value: Any) -> str:
    """Compact JSON text of a value from `parse_json`, numbers verbatim."""
    if isinstance(value, _Number):
        return str(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ",".join(canonical(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{_string(k)}:{canonical(v)}" for k, v in value.items()) + "}"
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def records_body(records: Sequence[Record]) -> str:
    """`{"records": [{"offset", "data"}]}` with each record's stored JSON text embedded as is."""
    parts = (f'{{"offset":"{r.offset}","data":{r.body.decode()}}}' for r in records)
    return '{"records":[' + ",".join(parts) + "]}"


# --- the face --------------------------------------------------------------------------------------------


class DurableStreams:
    def __init__(
        self, backend: Backend, registry: QueueRegistry, publisher: Publisher, reader: StreamReader
    ) -> None:
        self.backend = backend
        self.registry = registry
        self.publisher = publisher
        self.reader = reader

    def _get(self, stream: str) -> Queue | None:
        try:
            return self.registry.get(queue_name_for(stream))
        except errors.QueueNotFound:
            return None

    def _ensure(self, stream: str) -> Queue:
        queue = self._get(stream)
        if queue is not None:
            return queue
        name = queue_name_for(stream)
        with contextlib.suppress(errors.QueueAlreadyExists):  # a concurrent first publish made it
            self.registry.create(name, STREAM_SETTINGS)
        return self.registry.modify(name, lambda q: q.model_copy(update={"stream_name": stream}))

    def append(self, stream: str, texts: Sequence[str], version: int | None) -> list[str]:
        """Publish JSON texts (from `canonical`) in order, in one allocation; their offsets."""
        check_stream_name(stream)
        queue = self._ensure(stream)
        messages = [OutgoingMessage(body=t.encode(), content_type="json") for t in texts]
        return self.publisher.append(queue, messages, version=version).offsets

    def bump(self, stream: str, version: int | None) -> int:
        """An empty POST: store `version` (fenced like a publish), or report the current one."""
        check_stream_name(stream)
        queue = self._ensure(stream)
        if version is None:
            return self.current_version(queue)
        self.publisher.append(queue, [], version=version)
        return version

    def current_version(self, queue: Queue) -> int:
        shard = queue.shards[0]
        return self.backend.store.head(ShardAddress.of(queue, shard)).producer_version

    def read(
        self,
        stream: str,
        offset: str | None,
        limit: int,
        timeout_ms: int,
        size_of: Callable[[Record], int] | None = None,
        max_bytes: int = 0,
    ) -> list[Record]:
        """Records after `offset` (see streams.parse_position); waits up to `timeout_ms` for the first.
        A stream never written reads as empty (and is waited for); deleting it releases the wait.
        `size_of`/`max_bytes` cap the records by their encoded size (see engine/budget.py)."""
        check_stream_name(stream)
        position = parse_position(offset)
        limit = min(limit, MAX_LIMIT)
        clock = self.backend.clock
        deadline = clock.monotonic() + min(timeout_ms, MAX_TIMEOUT_MS) / 1000
        queue = self._get(stream)
        delay = 0.05
        while queue is None:  # not written yet: everything it will hold is "after the call"
            if clock.monotonic() >= deadline:
                return []
            clock.sleep(min(delay, max(0.0, deadline - clock.monotonic())))
            delay = min(delay * 2, 0.5)
            queue = self._get(stream)
            position = Position(seqs=position.seqs) if position.latest else position
        remaining = max(0, int((deadline - clock.monotonic()) * 1000))
        page = self.reader.read(
            queue.name,
            position,
            limit=limit,
            timeout_ms=remaining,
            queue=queue,
            size_of=size_of,
            max_bytes=max_bytes,
        )
        return page.records

    def delete(self, stream: str) -> None:
        check_stream_name(stream)
        try:
            self.registry.delete(queue_name_for(stream))
        except errors.QueueNotFound as exc:
            raise errors.NotFound("Stream not found") from exc
