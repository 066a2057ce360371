"""The open Durable Streams protocol (ElectricSQL's PROTOCOL.md) over the engine.

A stream is a one-shard, ordered, bottomless queue (`os-` + 32 base32 characters of its path's
SHA-256), so its history flows to S3 segments and reads from any offset work after the hot tier
expired. What the protocol adds lives in two places:

- the queue document's `open_stream` (content type, TTL, expiry): fixed at creation, written
  atomically with it, so an idempotent `PUT` compares against what the winner created;
- the shard head (closure, the last `Stream-Seq`, idempotent producers' epochs and sequences, the
  sliding-TTL clock): changed in the same conditional write that allocates the append's sequences
  (`publish.HeadGuard`, optimistic on `osv`), so a close, a producer's sequence and its data commit
  together or not at all. A concurrent change makes the write fail; the append re-reads and decides
  again, which also serialises each producer as the protocol requires.

Forks (sluice/engine/openforks.py) share their source's offset space: a fork's own records start
at its `base`, below which reads come from the source chain in place.

Offsets are the next sequence to read, 16 zero-padded digits: opaque, sortable as strings, never
`-1` or `now`. A non-JSON body is stored as chunks of at most CHUNK_BYTES (the stream is bytes,
chunk boundaries carry no meaning); a JSON body as one record per message (one array level
flattened), each its compact JSON text.
"""

from __future__ import annotations

import base64
import hashlib
import random
from dataclasses import dataclass, field
from typing import Any

from sluice import errors
from sluice.engine import keys
from sluice.engine.backend import Backend
from sluice.engine.durable import canonical, parse_json
from sluice.engine.openforks import ForkRequest, Lineage, fork_meta, fork_point
from sluice.engine.publish import HeadChanged, Publisher
from sluice.engine.queues import QueueRegistry
from sluice.engine.store import HeadGuard
from sluice.engine.streams import Position, StreamReader
from sluice.models import OpenStreamMeta, OutgoingMessage, Queue

QUEUE_PREFIX = "os-"
MAX_PATH_CHARS = 1024
DEFAULT_CONTENT_TYPE = "application/octet-stream"
CHUNK_BYTES = 256 * 1024  # at most one segment-friendly record; larger ones would overflow to S3
MAX_APPEND_BYTES = 4 * 1024 * 1024  # API Gateway carries 6 MB, binary bodies base64-encoded
MAX_READ_BYTES = 2 * 1024 * 1024  # a response stays under 6 MB even base64-encoded for SSE/binary
STREAM_SETTINGS: dict[str, Any] = {
    "ordered": True,
    "min_shards": 1,
    "max_shards": 1,
    "bottomless": True,
    "max_message_bytes": 1_048_576,
}
_APPEND_ATTEMPTS = 50
SETTLE_SECONDS = 2.0  # how long a read waits for positions allocated but not yet written


def queue_name_for(path: str) -> str:
    digest = hashlib.sha256(path.encode()).digest()[:20]
    return QUEUE_PREFIX + base64.b32encode(digest).decode().lower()


def encode_offset(seq: int) -> str:
    return f"{seq:016d}"


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def is_json(content_type: str) -> bool:
    return media_type(content_type) == "application/json"


def is_text(content_type: str) -> bool:
    """SSE carries these as UTF-8 text; anything else is base64-encoded."""
    return media_type(content_type).startswith("text/") or is_json(content_type)


# --- request values --------------------------------------------------------------------------------------


def validate_path(path: str) -> None:
    if not path:
        raise errors.InvalidRequest("the stream path is empty")
    if len(path) > MAX_PATH_CHARS:
        raise errors.StreamNameTooLong(f"the stream path is longer than {MAX_PATH_CHARS} characters")


@dataclass(frozen=True)
class Producer:
    id: str
    epoch: int
    seq: int

    @property
    def tuple_key(self) -> str:
        return f"{self.id}\x00{self.epoch}\x00{self.seq}"


def json_messages(body: bytes, *, allow_empty: bool) -> list[str]:
    """The compact JSON texts of a JSON-mode body, one array level flattened."""
    try:
        value = parse_json(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise errors.MalformedJson("the body is not valid JSON") from exc
    items = value if isinstance(value, list) else [value]
    if not items and not allow_empty:
        raise errors.InvalidRequest("an empty JSON array appends nothing")
    return [canonical(item) for item in items]


# --- results ---------------------------------------------------------------------------------------------


@dataclass
class StreamInfo:
    queue: Queue
    meta: OpenStreamMeta
    tail: int  # in the offset space shared with a fork's source: the fork's base + its own records
    closed: bool

    @property
    def tail_offset(self) -> str:
        return encode_offset(self.tail)


@dataclass
class Created:
    info: StreamInfo
    created: bool  # False: it existed with this configuration


@dataclass
class Appended:
    """What an append came to: `outcome` is one of appended, duplicate, closed (an idempotent close
    of a closed stream), closed_conflict, type_conflict, seq_conflict, stale_epoch, seq_gap,
    epoch_seq (a new epoch not starting at 0)."""

    outcome: str
    tail: int
    closed: bool
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class ReadResult:
    info: StreamInfo
    start: int
    next: int
    bodies: list[bytes]

    @property
    def up_to_date(self) -> bool:
        return self.next >= self.info.tail

    @property
    def at_end(self) -> bool:
        """Closed and everything read: the EOF signal."""
        return self.info.closed and self.up_to_date

    def body(self) -> bytes:
        if is_json(self.info.meta.content_type):
            return b"[" + b",".join(self.bodies) + b"]"
        return b"".join(self.bodies)


# --- the face --------------------------------------------------------------------------------------------


class OpenStreams:
    def __init__(
        self, backend: Backend, registry: QueueRegistry, publisher: Publisher, reader: StreamReader
    ) -> None:
        self.backend = backend
        self.registry = registry
        self.publisher = publisher
        self.reader = reader
        self.lineage = Lineage(backend, registry)

    # --- lookups --------------------------------------------------------------------------------------

    def _head(self, queue: Queue) -> dict[str, Any]:
        shard = queue.shards[0]
        return self.backend.table_for(shard).get(keys.shard_pk(queue, shard.id), keys.HEAD_SK) or {}

    def _expired(self, queue: Queue, meta: OpenStreamMeta, head: dict[str, Any]) -> bool:
        now = self.backend.clock()
        if meta.expires_at_ms is not None and now >= meta.expires_at_ms:
            return True
        if meta.ttl_seconds is not None:
            touched = max(int(head.get(keys.OS_TOUCHED, 0)), queue.created_ms)
            return now >= touched + meta.ttl_seconds * 1000
        return False

    def _find(self, path: str, *, drop_expired: bool = True) -> tuple[Queue, dict[str, Any]] | None:
        """The live stream at `path` and its head; an expired one reads as absent, and the write paths
        (the broker: create, append, delete) delete it. Readers only look: the consumer's role may not
        delete queues, as deployed. A soft-deleted one (kept for its forks) raises StreamGone."""
        validate_path(path)
        try:
            queue = self.registry.get(queue_name_for(path))
        except errors.QueueNotFound:
            return None
        if queue.open_stream is None:
            raise errors.Conflict("this path is taken by a queue that is not an open-protocol stream")
        head = self._head(queue)
        if head.get(keys.OS_GONE):
            raise errors.StreamGone("the stream was deleted (its data is kept for its forks)")
        if self._expired(queue, queue.open_stream, head):
            if drop_expired:
                self._drop(queue)
            return None
        return queue, head

    def _drop(self, queue: Queue) -> None:
        self.lineage.drop(queue)

    @staticmethod
    def _info(queue: Queue, head: dict[str, Any]) -> StreamInfo:
        assert queue.open_stream is not None
        tail = _base(queue) + int(head.get(keys.HEAD_NEXT, 0))
        return StreamInfo(queue, queue.open_stream, tail, bool(head.get(keys.OS_CLOSED)))

    def info(self, path: str) -> StreamInfo:
        found = self._find(path, drop_expired=False)
        if found is None:
            raise errors.NotFound("stream not found")
        return self._info(*found)

    def touch(self, info: StreamInfo) -> None:
        """A read resets a sliding TTL (HEAD does not)."""
        if info.meta.ttl_seconds is None:
            return
        shard = info.queue.shards[0]
        self.backend.table_for(shard).update(
            keys.shard_pk(info.queue, shard.id),
            keys.HEAD_SK,
            "SET #t = :now",
            names={"#t": keys.OS_TOUCHED},
            values={":now": self.backend.clock()},
        )

    # --- create / delete ------------------------------------------------------------------------------

    def create(
        self,
        path: str,
        content_type: str | None,
        ttl_seconds: int | None,
        expires_at: str | None,
        expires_at_ms: int | None,
        closed: bool,
        body: bytes,
        fork: ForkRequest | None = None,
    ) -> Created:
        validate_path(path)
        if ttl_seconds is not None and expires_at is not None:
            raise errors.InvalidRequest("send Stream-TTL or Stream-Expires-At, not both")
        meta = OpenStreamMeta(
            path=path,
            content_type=content_type or DEFAULT_CONTENT_TYPE,
            ttl_seconds=ttl_seconds,
            expires_at=expires_at.strip() if expires_at else None,
            expires_at_ms=expires_at_ms,
        )
        source: Queue | None = None
        prefix: list[OutgoingMessage] = []
        if fork is not None:
            source, meta, prefix = self._fork_meta(meta, fork, content_type)
        messages = prefix + self._messages(meta.content_type, body, allow_empty=True)
        for _ in range(3):
            try:
                found = self._find(path)
            except errors.StreamGone as exc:
                raise errors.Conflict("the stream was deleted and is kept for its forks") from exc
            if found is not None:
                info = self._info(*found)
                if not _same_config(info.meta, meta) or info.closed != closed:
                    raise errors.Conflict("the stream exists with another configuration")
                return Created(info, created=False)
            if source is not None:
                self.lineage.add_ref(source)  # before the fork exists: never a fork without its reference
            try:
                queue = self.registry.create(queue_name_for(path), STREAM_SETTINGS, open_stream=meta)
            except errors.QueueAlreadyExists:
                if source is not None:
                    self.lineage.release(source.name, source.incarnation)
                continue  # a concurrent PUT won: compare with what it created
            if messages or closed:  # the append also starts the sliding TTL
                done = self._append(queue, messages, closed=closed, producer=None, stream_seq=None)
                return Created(StreamInfo(queue, meta, done.tail, done.closed), created=True)
            info = StreamInfo(queue, meta, _base(queue), False)
            self.touch(info)  # the TTL runs from the answer, not from the start of the request
            return Created(info, created=True)
        raise errors.Conflict("the stream is being created and deleted concurrently; retry")

    def _fork_meta(
        self, meta: OpenStreamMeta, fork: ForkRequest, content_type: str | None
    ) -> tuple[Queue, OpenStreamMeta, list[OutgoingMessage]]:
        """The fork's metadata (`openforks.fork_meta`), its source queue, and the records a binary
        sub-offset cuts out of the source's record at the fork offset (the one thing copied: the head
        of that one record; `openforks.fork_point`)."""
        try:
            found = self._find(fork.source_path)
        except errors.StreamGone as exc:
            raise errors.Conflict("the source stream was deleted; it is kept only for its forks") from exc
        if found is None:
            raise errors.NotFound("the source stream (Stream-Forked-From) does not exist")
        source = self._info(*found)
        if content_type and media_type(content_type) != media_type(source.meta.content_type):
            raise errors.Conflict("a fork's Content-Type must be its source's")
        offset = source.tail if fork.offset is None else fork.offset
        if offset > source.tail:
            raise errors.InvalidOffset("Stream-Fork-Offset is past the source stream's tail")

        def record_at(seq: int) -> bytes | None:
            read = self._read_once(source, seq, 1, self._layers(source))
            return read.bodies[0] if read.bodies and read.next == seq + 1 else None

        base, cut = fork_point(
            offset,
            fork.sub_offset,
            tail=source.tail,
            json_records=is_json(source.meta.content_type),
            record_at=record_at,
        )
        meta = fork_meta(meta, fork, source.queue, source.meta, offset=offset, base=base)
        return source.queue, meta, [] if cut is None else [OutgoingMessage(body=cut, content_type="bytes")]

    def delete(self, path: str) -> None:
        found = self._find(path)
        if found is None:
            raise errors.NotFound("stream not found")
        self._drop(found[0])

    # --- append ---------------------------------------------------------------------------------------

    def append(
        self,
        path: str,
        content_type: str | None,
        body: bytes,
        *,
        closed: bool,
        producer: Producer | None,
        stream_seq: str | None,
    ) -> Appended:
        if not body and not closed:
            raise errors.InvalidRequest("an append needs a body (or Stream-Closed: true to close)")
        if body and not content_type:
            raise errors.InvalidRequest("an append with a body needs a Content-Type")
        found = self._find(path)
        if found is None:
            raise errors.NotFound("stream not found")
        queue, head = found
        meta = queue.open_stream
        assert meta is not None
        if body and media_type(content_type) != media_type(meta.content_type):
            tail = _base(queue) + int(head.get(keys.HEAD_NEXT, 0))
            if head.get(keys.OS_CLOSED):  # closure is reported first (PROTOCOL.md 5.2, error precedence)
                return Appended("closed_conflict", tail, True)
            return Appended("type_conflict", tail, False)
        messages = self._messages(meta.content_type, body, allow_empty=False) if body else []
        return self._append(queue, messages, closed=closed, producer=producer, stream_seq=stream_seq)

    def _messages(self, content_type: str, body: bytes, *, allow_empty: bool) -> list[OutgoingMessage]:
        if len(body) > MAX_APPEND_BYTES:
            raise errors.RequestTooLarge(f"a request carries at most {MAX_APPEND_BYTES} bytes")
        if not body:
            return []
        if is_json(content_type):
            texts = json_messages(body, allow_empty=allow_empty)
            return [OutgoingMessage(body=t.encode(), content_type="json") for t in texts]
        return [
            OutgoingMessage(body=body[i : i + CHUNK_BYTES], content_type="bytes")
            for i in range(0, len(body), CHUNK_BYTES)
        ]

    def _append(
        self,
        queue: Queue,
        messages: list[OutgoingMessage],
        *,
        closed: bool,
        producer: Producer | None,
        stream_seq: str | None,
    ) -> Appended:
        base = _base(queue)
        for attempt in range(_APPEND_ATTEMPTS):
            head = self._head(queue)
            if head.get(keys.OS_GONE):  # deleted since it was looked up
                raise errors.StreamGone("the stream was deleted (its data is kept for its forks)")
            decided = _decide(head, base, bool(messages), closed, producer, stream_seq)
            if isinstance(decided, Appended):
                return decided
            updates, headers = decided
            updates[keys.OS_TOUCHED] = self.backend.clock()
            guard = HeadGuard(keys.OS_GUARD, head.get(keys.OS_GUARD), updates)
            try:
                result = self.publisher.append(queue, messages, guard=guard)
            except HeadChanged:
                self.backend.clock.sleep(random.uniform(0, 0.002 * (attempt + 1)))
                continue
            assert result.tail_seq is not None
            return Appended("appended", base + result.tail_seq, bool(updates.get(keys.OS_CLOSED)), headers)
        raise errors.DependencyUnavailable("the stream is contended; retry shortly")

    # --- reads ----------------------------------------------------------------------------------------

    def read_from(self, info: StreamInfo, seq: int, *, max_bytes: int = MAX_READ_BYTES) -> ReadResult:
        """Data from `seq` up to the tail `info` saw. Positions allocated but not written yet (an append
        between its two writes) are waited for briefly, so a reader woken by a new tail gets its data."""
        clock = self.backend.clock
        deadline = clock.monotonic() + SETTLE_SECONDS
        layers = self._layers(info) if seq < info.tail else []
        while True:
            result = self._read_once(info, seq, max_bytes, layers)
            if result.bodies or result.up_to_date or clock.monotonic() >= deadline:
                return result
            clock.sleep(0.02)

    def _layers(self, info: StreamInfo) -> list[_Layer]:
        """Where each range of `info`'s offsets is stored, oldest first: up a fork chain, each source
        serves the offsets below the base of the fork above it (and below that fork's own limit)."""
        layers = [_Layer(info.queue, _base(info.queue), info.tail)]
        queue, end = info.queue, _base(info.queue)
        while end > 0 and queue.open_stream is not None and queue.open_stream.fork is not None:
            queue = self.lineage.source_of(queue)
            base = min(_base(queue), end)
            layers.append(_Layer(queue, base, end))
            end = base
        return layers[::-1]

    def _read_once(self, info: StreamInfo, seq: int, max_bytes: int, layers: list[_Layer]) -> ReadResult:
        if seq > info.tail:
            raise errors.InvalidOffset("the offset is past the stream's tail")
        bodies: list[bytes] = []
        position = seq
        for layer in layers:
            if position >= layer.end:
                continue
            position, stopped = self._read_layer(layer, position, bodies, max_bytes)
            if stopped:
                break
        return ReadResult(info, seq, position, bodies)

    def _read_layer(
        self, layer: _Layer, position: int, bodies: list[bytes], max_bytes: int
    ) -> tuple[int, bool]:
        """Records of one layer from `position` into `bodies` (at most `max_bytes` in all, at least one
        record); the position reached and whether the read stopped before the layer's end."""
        shard = layer.queue.shards[0].id
        size = sum(len(b) for b in bodies)
        while position < layer.end:
            if size >= max_bytes:
                return position, True
            page = self.reader.read(
                layer.queue.name, Position(seqs={shard: position - layer.base}), limit=100, queue=layer.queue
            )
            reached = min(layer.base + page.positions[shard], layer.end)
            if not page.records:
                if reached <= position:  # nothing readable yet (an unwritten position)
                    return position, True
                position = reached  # a sealed gap was passed: keep going
                continue
            for record in page.records:
                if layer.base + record.seq >= layer.end:  # a source's records past its fork's base
                    return layer.end, False
                if bodies and size + len(record.body) > max_bytes:
                    return position, True
                bodies.append(record.body)
                size += len(record.body)
                position = layer.base + record.seq + 1
            position = max(position, reached)
        return position, False

    def wait(self, path: str, seq: int, timeout_ms: int) -> StreamInfo:
        """The stream once its tail passed `seq`, it closed, or `timeout_ms` passed (whichever first)."""
        clock = self.backend.clock
        deadline = clock.monotonic() + timeout_ms / 1000
        delay = 0.02
        info = self.info(path)
        checked = clock.monotonic()
        while info.tail <= seq and not info.closed and clock.monotonic() < deadline:
            clock.sleep(min(delay, max(0.0, deadline - clock.monotonic())))
            delay = min(delay * 1.5, 0.2)
            if clock.monotonic() - checked > 1.0:  # deleted meanwhile: NotFound ends the wait
                info, checked = self.info(path), clock.monotonic()
            else:
                info = self._info(info.queue, self._head(info.queue))
        return info


@dataclass(frozen=True)
class _Layer:
    """Offsets [base, end) of a stream, stored in `queue` as its own sequences from 0."""

    queue: Queue
    base: int
    end: int


def _base(queue: Queue) -> int:
    """Where the queue's own records start in the stream's offsets (0 unless it is a fork)."""
    fork = queue.open_stream.fork if queue.open_stream else None
    return fork.base if fork else 0


def _same_config(a: OpenStreamMeta, b: OpenStreamMeta) -> bool:
    def origin(meta: OpenStreamMeta) -> tuple[str, int, int] | None:
        return (meta.fork.source_path, meta.fork.offset, meta.fork.sub_offset) if meta.fork else None

    return (
        media_type(a.content_type) == media_type(b.content_type)
        and a.ttl_seconds == b.ttl_seconds
        and a.expires_at_ms == b.expires_at_ms
        and origin(a) == origin(b)
    )


def _decide(
    head: dict[str, Any],
    base: int,
    has_data: bool,
    close: bool,
    producer: Producer | None,
    stream_seq: str | None,
) -> Appended | tuple[dict[str, Any], dict[str, str]]:
    """PROTOCOL.md 5.2 and 5.2.1 on the head as read: either the answer (nothing to write) or the head
    updates to commit with the append and the producer headers of its success."""
    tail = base + int(head.get(keys.HEAD_NEXT, 0))
    if head.get(keys.OS_CLOSED):
        if producer is not None and head.get(keys.OS_CLOSER) == producer.tuple_key:
            headers = {"Producer-Epoch": str(producer.epoch), "Producer-Seq": str(producer.seq)}
            return Appended("duplicate", tail, True, headers)
        if close and not has_data:
            return Appended("closed", tail, True)
        return Appended("closed_conflict", tail, True)
    updates: dict[str, Any] = {keys.OS_GUARD: int(head.get(keys.OS_GUARD, 0)) + 1}
    headers = {}
    if producer is not None:
        producers = dict(head.get(keys.OS_PRODUCERS) or {})
        state = producers.get(producer.id)
        epoch, last = (None, None)
        if state:
            epoch, last = int(state[keys.OS_PRODUCER_EPOCH]), int(state[keys.OS_PRODUCER_SEQ])
        if epoch is not None and producer.epoch < epoch:
            return Appended("stale_epoch", tail, False, {"Producer-Epoch": str(epoch)})
        if epoch is None or producer.epoch > epoch:
            if producer.seq != 0:
                if epoch is None:
                    gap = {"Producer-Expected-Seq": "0", "Producer-Received-Seq": str(producer.seq)}
                    return Appended("seq_gap", tail, False, gap)
                return Appended("epoch_seq", tail, False)
        else:
            assert last is not None
            if producer.seq <= last:
                headers = {"Producer-Epoch": str(epoch), "Producer-Seq": str(last)}
                return Appended("duplicate", tail, False, headers)
            if producer.seq != last + 1:
                gap = {"Producer-Expected-Seq": str(last + 1), "Producer-Received-Seq": str(producer.seq)}
                return Appended("seq_gap", tail, False, gap)
        producers[producer.id] = {keys.OS_PRODUCER_EPOCH: producer.epoch, keys.OS_PRODUCER_SEQ: producer.seq}
        updates[keys.OS_PRODUCERS] = producers
        headers = {"Producer-Epoch": str(producer.epoch), "Producer-Seq": str(producer.seq)}
    if stream_seq is not None:
        last_seq = head.get(keys.OS_SEQ)
        if last_seq is not None and stream_seq.encode() <= str(last_seq).encode():
            return Appended("seq_conflict", tail, False)
        updates[keys.OS_SEQ] = stream_seq
    if close:
        updates[keys.OS_CLOSED] = True
        if producer is not None:
            updates[keys.OS_CLOSER] = producer.tuple_key
    return updates, headers
