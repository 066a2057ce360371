"""The S3 segment format, and only the format: standard library alone, so the engine (`sluice.segments`,
which adds the index and storage) and the Glue jobs (shipped without boto3's friends pydantic and
Powertools, stacks/glue_artifact.py) read and write segments through this one module.

- Object key: `segments/<queue>/<incarnation>/<shard>/<first seq 16d>-<last seq 16d>.ndjson.gz`
  (`first`..`last` inclusive).
- Content: gzip-compressed NDJSON, one record per line in sequence order (`Record.to_json`); gap
  tombstones are not written, so a segment may hold fewer records than its range.
- A compacted segment replaces the ones it covers, and for a moment both may be listed: `covering`
  picks the segments to read so each sequence is read once.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, Self, TypeVar

from sluice import offsets

SEGMENT_PREFIX = "segments"
SEGMENT_KEY_RE = re.compile(
    rf"\A{SEGMENT_PREFIX}/(?P<queue>[^/]+)/(?P<incarnation>[^/]+)/(?P<shard>\d+)/"
    r"(?P<first>\d{16})-(?P<last>\d{16})\.ndjson\.gz\Z"
)
NO_END = 2**63  # an exclusive upper sequence bound past every real sequence


def segment_key(queue: str, incarnation: str, shard: int, first: int, last: int) -> str:
    return (
        f"{SEGMENT_PREFIX}/{queue}/{incarnation}/{shard}/"
        f"{offsets.seq_key(first)}-{offsets.seq_key(last)}.ndjson.gz"
    )


def queue_prefix(queue: str, incarnation: str | None = None) -> str:
    """The key prefix of a queue's segments (of one incarnation when given), for listing."""
    return f"{SEGMENT_PREFIX}/{queue}/" + (f"{incarnation}/" if incarnation else "")


@dataclass(frozen=True)
class SegmentName:
    """What a segment object's key says: whose records it holds, sequences [first, last]."""

    key: str
    queue: str
    incarnation: str
    shard: int
    first: int
    last: int

    @classmethod
    def parse(cls, key: str) -> Self | None:
        """None for a key that is not a segment object's (a stray file under the prefix)."""
        match = SEGMENT_KEY_RE.match(key)
        if match is None:
            return None
        return cls(
            key=key,
            queue=match["queue"],
            incarnation=match["incarnation"],
            shard=int(match["shard"]),
            first=int(match["first"]),
            last=int(match["last"]),
        )


@dataclass
class Record:
    """One stored message as readers see it: where it is (shard, seq, offset) and what it holds."""

    shard: int
    seq: int
    id: str
    timestamp_ms: int
    content_type: str
    body: bytes
    partition_key: str | None = None
    attributes: dict[str, str] = field(default_factory=dict)

    @property
    def offset(self) -> str:
        return offsets.encode(self.timestamp_ms, self.seq)

    def to_json(self) -> dict[str, Any]:
        """The NDJSON line of the segment contract."""
        return self._line(base64.b64encode(self.body).decode())

    def line_size(self) -> int:
        """The bytes this record's line takes in a segment's NDJSON text, without encoding its body (base64:
        4 bytes per 3): what bounds a flush's segment, so one shard of large bodies fits the function."""
        return len(_dumps(self._line(""))) + 4 * ((len(self.body) + 2) // 3)

    def _line(self, body_b64: str) -> dict[str, Any]:
        return {
            "offset": self.offset,
            "shard": self.shard,
            "seq": self.seq,
            "id": self.id,
            "timestamp_ms": self.timestamp_ms,
            "content_type": self.content_type,
            "body_b64": body_b64,
            "partition_key": self.partition_key,
            "attributes": self.attributes,
        }

    @classmethod
    def from_json(cls, line: dict[str, Any]) -> Record:
        return cls(
            shard=line["shard"],
            seq=line["seq"],
            id=line["id"],
            timestamp_ms=line["timestamp_ms"],
            content_type=line["content_type"],
            body=base64.b64decode(line["body_b64"]),
            partition_key=line.get("partition_key"),
            attributes=line.get("attributes") or {},
        )

    def body_text(self) -> str:
        """The body as text: JSON and text bodies as stored (JSON text is kept compact), bytes as base64."""
        if self.content_type == "bytes":
            return base64.b64encode(self.body).decode()
        return self.body.decode()


def encode_segment(records: Iterable[Record]) -> bytes:
    """Gzip-compressed NDJSON (deterministic: the same records give the same bytes), compressed line by
    line: the text joined first held two copies of it (several times the object) beside the records."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=6, mtime=0) as text:
        for r in records:
            text.write(_dumps(r.to_json()))
    return out.getvalue()


def _dumps(line: dict[str, Any]) -> bytes:
    """One NDJSON line of a segment, newline included."""
    return (json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


def text_size(data: bytes) -> int:
    """A segment object's NDJSON size uncompressed, from its gzip trailer (ISIZE: the input's size mod
    2**32; a segment is far smaller)."""
    return int.from_bytes(data[-4:], "little")


def decode_segment(data: bytes) -> Iterator[dict[str, Any]]:
    """The NDJSON lines of a segment object, as dicts (`Record.from_json` turns one into a Record).
    Decompressed line by line: the whole text at once, and its lines split from it, held two copies of
    it (several times the object) on top of what the caller keeps."""
    with gzip.GzipFile(fileobj=io.BytesIO(data)) as text:
        for line in text:
            if line.strip():
                yield json.loads(line)


def read_records(
    data: bytes,
    lo: int = 0,
    hi: int = NO_END,
    start_ms: int | None = None,
    end_ms: int | None = None,
) -> Iterator[Record]:
    """The records of a segment object with lo <= seq < hi and, when given, start_ms <= timestamp_ms <
    end_ms."""
    for line in decode_segment(data):
        seq, ts = line["seq"], line["timestamp_ms"]
        if seq < lo or seq >= hi:
            continue
        if (start_ms is not None and ts < start_ms) or (end_ms is not None and ts >= end_ms):
            continue
        yield Record.from_json(line)


class Span(Protocol):
    """Anything naming a segment's sequence range (an index entry, a listed object)."""

    @property
    def first(self) -> int: ...

    @property
    def last(self) -> int: ...


S = TypeVar("S", bound=Span)


def covering(spans: Iterable[S], from_seq: int = 0) -> list[S]:
    """The segments of ONE shard to read, in order, for sequences from `from_seq`: an entry inside one
    already chosen (seen while a compaction swaps the index) is skipped, preferring the one that reaches
    further. A partial overlap stays: `read_ranges` trims it."""
    chosen: list[S] = []
    need = from_seq
    for span in sorted(spans, key=lambda s: (s.first, -s.last)):
        if span.last < need:
            continue
        chosen.append(span)
        need = span.last + 1
    return chosen


def read_ranges(spans: Iterable[S], lo: int = 0, hi: int = NO_END) -> list[tuple[S, int, int]]:
    """(segment, lo, hi) per segment of ONE shard to read for sequences [lo, hi), each sequence in exactly
    one of them (a partial overlap is trimmed from the later segment)."""
    reads: list[tuple[S, int, int]] = []
    need = lo
    for span in covering(spans, lo):
        if span.first >= hi:
            break
        start, end = max(need, span.first), min(hi, span.last + 1)
        if start < end:
            reads.append((span, start, end))
        need = span.last + 1
    return reads
