"""The open Durable Streams protocol's request headers parsed into engine values (TTL, expiry, offsets,
idempotent producers, forks) and its response headers computed (ETag, Stream-Cursor): the wire side
of sluice/engine/openstreams.py and sluice/engine/openforks.py."""

from __future__ import annotations

import random
import re
from datetime import datetime

from sluice import errors
from sluice.engine.openforks import ForkRequest
from sluice.engine.openstreams import Producer, ReadResult

MAX_SAFE_INTEGER = 2**53 - 1
_OFFSET_RE = re.compile(r"^\d{16}$")
_TTL_RE = re.compile(r"^(0|[1-9]\d*)$")
_INT_RE = re.compile(r"^(0|[1-9]\d*)$")
BEGINNING, NOW = "-1", "now"
# Cursors: 20-second intervals since 2024-10-09T00:00:00Z, as PROTOCOL.md section 10.1 describes.
CURSOR_EPOCH_MS = 1_728_432_000_000
CURSOR_INTERVAL_MS = 20_000
_OWN_OFFSET = re.compile(r"^\d{16}$")
# The reference server's `<16 digits>_<16 digits>` shape, which clients (and the conformance suite)
# also send as a fork offset: read as one 32-digit number, so all zeros is the start and anything
# past this server's tails is refused as beyond the source.
_PAIR_OFFSET = re.compile(r"^(\d{16})_(\d{16})$")
_SUB_OFFSET = re.compile(r"^(0|[1-9]\d*)$")


def parse_ttl(raw: str | None) -> int | None:
    if raw is None:
        return None
    if not _TTL_RE.match(raw.strip()):
        raise errors.InvalidRequest("Stream-TTL must be a non-negative integer without sign or leading zeros")
    return int(raw.strip())


def parse_expires_at(raw: str | None) -> int | None:
    """Milliseconds of an RFC 3339 timestamp (a timezone is required)."""
    if raw is None:
        return None
    text = raw.strip()
    if not re.match(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$", text):
        raise errors.InvalidRequest("Stream-Expires-At must be an RFC 3339 timestamp with a timezone")
    try:
        moment = datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError as exc:
        raise errors.InvalidRequest("Stream-Expires-At is not a valid RFC 3339 timestamp") from exc
    return int(moment.timestamp() * 1000)


def parse_offset(raw: str | None) -> str | int:
    """`-1` or absent → 0, `now` → NOW, else the sequence a 16-digit offset names."""
    if raw is None or raw == BEGINNING:
        return 0
    if raw == NOW:
        return NOW
    if not _OFFSET_RE.match(raw):
        raise errors.InvalidOffset(f"offset {raw!r} is not an offset this server returned, -1 or now")
    return int(raw)


def parse_producer(pid: str | None, epoch: str | None, seq: str | None) -> Producer | None:
    given = [v is not None for v in (pid, epoch, seq)]
    if not any(given):
        return None
    if not all(given):
        raise errors.InvalidRequest("Producer-Id, Producer-Epoch and Producer-Seq go together")
    assert pid is not None and epoch is not None and seq is not None
    if not pid.strip():
        raise errors.InvalidRequest("Producer-Id must not be empty")
    values = []
    for name, raw in (("Producer-Epoch", epoch), ("Producer-Seq", seq)):
        if not _INT_RE.match(raw.strip()) or int(raw.strip()) > MAX_SAFE_INTEGER:
            raise errors.InvalidRequest(f"{name} must be an integer from 0 to 2^53-1")
        values.append(int(raw.strip()))
    return Producer(pid, values[0], values[1])


def parse_fork(source: str | None, offset: str | None, sub_offset: str | None) -> ForkRequest | None:
    if source is None:
        if offset is not None or sub_offset is not None:
            raise errors.InvalidRequest("Stream-Fork-Offset and Stream-Fork-Sub-Offset need a source")
        return None
    sub = 0
    if sub_offset is not None:
        if not _SUB_OFFSET.match(sub_offset.strip()):
            raise errors.InvalidRequest("Stream-Fork-Sub-Offset must be a non-negative integer")
        sub = int(sub_offset.strip())
    if sub and offset is None:
        raise errors.InvalidRequest("Stream-Fork-Sub-Offset past 0 needs a Stream-Fork-Offset")
    return ForkRequest(source.strip(), parse_fork_offset(offset), sub)


def parse_fork_offset(raw: str | None) -> int | None:
    if raw is None:
        return None
    text = raw.strip()
    if text == "-1":
        return 0
    if _OWN_OFFSET.match(text):
        return int(text)
    pair = _PAIR_OFFSET.match(text)
    if pair:
        return int(pair.group(1) + pair.group(2))
    raise errors.InvalidOffset(f"Stream-Fork-Offset {raw!r} is not an offset this server returned")


def next_cursor(now_ms: int, client_cursor: str | None) -> str:
    """The current interval; strictly past the client's echo when it is not behind (jitter 1-3600 s)."""
    interval = (now_ms - CURSOR_EPOCH_MS) // CURSOR_INTERVAL_MS
    if client_cursor and _INT_RE.match(client_cursor) and int(client_cursor) >= interval:
        interval = int(client_cursor) + random.randint(1, 3600 // (CURSOR_INTERVAL_MS // 1000))
    return str(interval)


def etag(result: ReadResult) -> str:
    """A read's ETag: the stream's incarnation and the range read (`:c`: a closed stream read to its end)."""
    closed = ":c" if result.at_end else ""
    return f'"{result.info.queue.incarnation}:{result.start}:{result.next}{closed}"'
