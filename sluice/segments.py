"""S3 segments: the cold tier of every shard, in the format shared by the shard worker, stream reads
and the Spark jobs (the contract is in docs/design.md, "Segments").

- Object key: `segments/<queue>/<incarnation>/<shard>/<first seq 16d>-<last seq 16d>.ndjson.gz`.
- Content: gzip-compressed NDJSON, one record per line in sequence order (`Record.to_json`); gap
  tombstones are not written, so a segment's `count` may be smaller than its range.
- Index: control-table items `pk = SEG#<queue>#<incarnation>#<shard>`, `sk = <first seq 16d>` with
  `last`, `key`, `count`, `bytes`, `min_ts`, `max_ts`, `level`. A compacted segment replaces the
  ones it covers; readers tolerate a moment where both are listed (`covering` skips overlaps).

Public API (stable; other engineers code against it):
`segment_key`, `index_pk`, `encode_segment(records) -> bytes`, `decode_segment(bytes) -> Iterator[dict]`,
`list_segments(backend, queue, shard, from_seq=0) -> list[SegmentRef]`, `covering(refs, from_seq)`,
`read_segment(backend, ref, from_seq=0) -> Iterator[Record]`, `write_segment(...) -> SegmentRef`,
`put_index`, `delete_index`.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sluice import offsets
from sluice.adapters.dynamo import ConditionFailed
from sluice.engine.backend import Backend
from sluice.models import Queue

SEGMENT_PREFIX = "segments"
INDEX_PK_PREFIX = "SEG#"


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
        return {
            "offset": self.offset,
            "shard": self.shard,
            "seq": self.seq,
            "id": self.id,
            "timestamp_ms": self.timestamp_ms,
            "content_type": self.content_type,
            "body_b64": base64.b64encode(self.body).decode(),
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


@dataclass(frozen=True)
class SegmentRef:
    """One index entry: segment object `key` holds the records of sequences [first, last] of a shard."""

    queue: str
    incarnation: str
    shard: int
    first: int
    last: int
    key: str
    count: int
    bytes: int
    min_ts: int
    max_ts: int
    level: int = 0

    def index_item(self) -> dict[str, Any]:
        return {
            "pk": index_pk(self.queue, self.incarnation, self.shard),
            "sk": offsets.seq_key(self.first),
            "last": self.last,
            "key": self.key,
            "count": self.count,
            "bytes": self.bytes,
            "min_ts": self.min_ts,
            "max_ts": self.max_ts,
            "level": self.level,
        }

    @classmethod
    def from_item(cls, queue: str, incarnation: str, shard: int, item: dict[str, Any]) -> SegmentRef:
        return cls(
            queue=queue,
            incarnation=incarnation,
            shard=shard,
            first=int(item["sk"]),
            last=item["last"],
            key=item["key"],
            count=item["count"],
            bytes=item["bytes"],
            min_ts=item["min_ts"],
            max_ts=item["max_ts"],
            level=item.get("level", 0),
        )


def segment_key(queue: str, incarnation: str, shard: int, first: int, last: int) -> str:
    return (
        f"{SEGMENT_PREFIX}/{queue}/{incarnation}/{shard}/"
        f"{offsets.seq_key(first)}-{offsets.seq_key(last)}.ndjson.gz"
    )


def index_pk(queue: str, incarnation: str, shard: int) -> str:
    return f"{INDEX_PK_PREFIX}{queue}#{incarnation}#{shard}"


def encode_segment(records: Iterable[Record]) -> bytes:
    """Gzip-compressed NDJSON (deterministic: the same records give the same bytes)."""
    lines = "".join(
        json.dumps(r.to_json(), separators=(",", ":"), ensure_ascii=False) + "\n" for r in records
    )
    return gzip.compress(lines.encode(), compresslevel=6, mtime=0)


def decode_segment(data: bytes) -> Iterator[dict[str, Any]]:
    """The NDJSON lines of a segment object, as dicts (`Record.from_json` turns one into a Record)."""
    for line in gzip.decompress(data).splitlines():
        if line.strip():
            yield json.loads(line)


def list_segments(backend: Backend, queue: Queue, shard: int, from_seq: int = 0) -> list[SegmentRef]:
    """Index entries of one shard ending at or after `from_seq`, ordered by first sequence."""
    pk = index_pk(queue.name, queue.incarnation, shard)
    refs = [
        SegmentRef.from_item(queue.name, queue.incarnation, shard, item)
        for item in backend.control.query(pk, consistent=True)
    ]
    return [r for r in refs if r.last >= from_seq]


def covering(refs: Sequence[SegmentRef], from_seq: int) -> list[SegmentRef]:
    """The segments to read, in order, for sequences from `from_seq`: overlapping entries (seen while a
    compaction swaps the index) are skipped, preferring the one that reaches further."""
    chosen: list[SegmentRef] = []
    need = from_seq
    for ref in sorted(refs, key=lambda r: (r.first, -r.last)):
        if ref.last < need:
            continue
        chosen.append(ref)
        need = ref.last + 1
    return chosen


def read_segment(backend: Backend, ref: SegmentRef, from_seq: int = 0) -> Iterator[Record]:
    """The records of one segment with seq >= `from_seq`. Raises SegmentGone when the object was
    replaced by a compaction since the index was read (list again and retry)."""
    data = backend.bucket.get(ref.key)
    if data is None:
        raise SegmentGone(ref.key)
    for line in decode_segment(data):
        if line["seq"] >= from_seq:
            yield Record.from_json(line)


def write_segment(
    backend: Backend, queue: Queue, shard: int, records: Sequence[Record], first: int, last: int, level: int
) -> SegmentRef:
    """Store the object for sequences [first, last] (records may be fewer: gaps) and return its entry.
    The index is not touched: `put_index` makes it visible."""
    data = encode_segment(records)
    key = segment_key(queue.name, queue.incarnation, shard, first, last)
    backend.bucket.put(key, data)
    stamps = [r.timestamp_ms for r in records] or [0]
    return SegmentRef(
        queue=queue.name,
        incarnation=queue.incarnation,
        shard=shard,
        first=first,
        last=last,
        key=key,
        count=len(records),
        bytes=len(data),
        min_ts=min(stamps),
        max_ts=max(stamps),
        level=level,
    )


def put_index(backend: Backend, ref: SegmentRef, *, replacing: SegmentRef | None = None) -> bool:
    """Make `ref` visible. New ranges only if absent; a compaction replaces the entry that starts where
    it starts only if that entry is still `replacing`. False when another worker got there first."""
    try:
        if replacing is None:
            backend.control.put(ref.index_item(), condition="attribute_not_exists(pk)")
        else:
            backend.control.put(
                ref.index_item(), condition="#k = :k", names={"#k": "key"}, values={":k": replacing.key}
            )
    except ConditionFailed:
        return False
    return True


def delete_index(backend: Backend, ref: SegmentRef) -> None:
    """Remove `ref` from the index, unless the entry at its first sequence is now another segment."""
    with contextlib.suppress(ConditionFailed):
        backend.control.delete(
            index_pk(ref.queue, ref.incarnation, ref.shard),
            offsets.seq_key(ref.first),
            condition="#k = :k",
            names={"#k": "key"},
            values={":k": ref.key},
        )


class SegmentGone(Exception):
    """A listed segment object no longer exists (a compaction or retention removed it)."""


__all__ = [
    "Record",
    "SegmentGone",
    "SegmentRef",
    "covering",
    "decode_segment",
    "delete_index",
    "encode_segment",
    "index_pk",
    "list_segments",
    "put_index",
    "read_segment",
    "segment_key",
    "write_segment",
]
