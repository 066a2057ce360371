"""S3 segments, the engine's side: the index of a shard's segments in the control table and storing
segment objects through the backend. The format itself (key, NDJSON lines, covering) is
`sluice.segmentformat`, shared with the Glue jobs; docs/design.md "Segments" has the contract.

- Index: control-table items `pk = keys.segment_index_pk(...)` (`SEG#<queue>#<incarnation>#<shard>`),
  `sk = <first seq 16d>` with
  `last`, `key`, `count`, `bytes`, `min_ts`, `max_ts`, `level`. A compacted segment replaces the
  ones it covers; readers tolerate a moment where both are listed (`covering` skips overlaps).
- Regions: a shard's segment objects are in its own region's bucket (the shard function of that region
  writes them); `region` names it (None: a single-region deployment, or the home region). The index
  entries stay in the control table with every other conditional write (the home region's).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sluice import offsets
from sluice.adapters.dynamo import ConditionFailed
from sluice.engine import keys
from sluice.engine.backend import Backend
from sluice.models import Queue
from sluice.segmentformat import (
    Record,
    covering,
    decode_segment,
    encode_segment,
    read_records,
    segment_key,
    text_size,
)

LEGACY_TEXT_RATIO = 10  # uncompressed per compressed byte assumed for an entry without `text_bytes`


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
    region: str | None = None  # whose bucket holds the object (not stored: the shard's region)
    text_bytes: int = 0  # its NDJSON uncompressed (0: an entry written before it was recorded)

    @property
    def text_size(self) -> int:
        """The uncompressed size, what decoding it costs in memory and CPU (the compressed size says
        little: JSON bodies compress 3-30x); an older entry's is taken as LEGACY_TEXT_RATIO x `bytes`."""
        return self.text_bytes or self.bytes * LEGACY_TEXT_RATIO

    def index_item(self) -> dict[str, Any]:
        return {
            keys.PK: keys.segment_index_pk(self.queue, self.incarnation, self.shard),
            keys.SK: offsets.seq_key(self.first),
            keys.SEGMENT_LAST: self.last,
            keys.SEGMENT_KEY: self.key,
            "count": self.count,
            "bytes": self.bytes,
            "min_ts": self.min_ts,
            "max_ts": self.max_ts,
            "level": self.level,
            "text_bytes": self.text_bytes,
        }

    @classmethod
    def from_item(
        cls, queue: str, incarnation: str, shard: int, item: dict[str, Any], region: str | None = None
    ) -> SegmentRef:
        return cls(
            queue=queue,
            incarnation=incarnation,
            shard=shard,
            first=int(item[keys.SK]),
            last=item[keys.SEGMENT_LAST],
            key=item[keys.SEGMENT_KEY],
            count=item["count"],
            bytes=item["bytes"],
            min_ts=item["min_ts"],
            max_ts=item["max_ts"],
            level=item.get("level", 0),
            region=region,
            text_bytes=item.get("text_bytes", 0),
        )


def list_segments(
    backend: Backend, queue: Queue, shard: int, from_seq: int = 0, *, region: str | None = None
) -> list[SegmentRef]:
    """Index entries of one shard (of `region`) ending at or after `from_seq`, by first sequence."""
    pk = keys.segment_index_pk(queue.name, queue.incarnation, shard)
    refs = [
        SegmentRef.from_item(queue.name, queue.incarnation, shard, item, region)
        for item in backend.control.query(pk, consistent=True)
    ]
    return [r for r in refs if r.last >= from_seq]


def read_segment(backend: Backend, ref: SegmentRef, from_seq: int = 0) -> Iterator[Record]:
    """The records of one segment with seq >= `from_seq`. Raises SegmentGone when the object was
    replaced by a compaction since the index was read (list again and retry)."""
    data = backend.bucket_in(ref.region).get(ref.key)
    if data is None:
        raise SegmentGone(ref.key)
    yield from read_records(data, lo=from_seq)


def write_segment(
    backend: Backend,
    queue: Queue,
    shard: int,
    records: Sequence[Record],
    first: int,
    last: int,
    level: int,
    *,
    region: str | None = None,
) -> SegmentRef:
    """Store the object for sequences [first, last] (records may be fewer: gaps) in the bucket of the
    shard's `region` and return its entry. The index is not touched: `put_index` makes it visible."""
    data = encode_segment(records)
    key = segment_key(queue.name, queue.incarnation, shard, first, last)
    backend.bucket_in(region).put(key, data)
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
        region=region,
        text_bytes=text_size(data),
    )


def put_index(backend: Backend, ref: SegmentRef, *, replacing: SegmentRef | None = None) -> bool:
    """Make `ref` visible. New ranges only if absent; a compaction replaces the entry that starts where
    it starts only if that entry is still `replacing`. False when another worker got there first."""
    try:
        if replacing is None:
            backend.control.put(ref.index_item(), condition=keys.NEW_ITEM)
        else:
            backend.control.put(
                ref.index_item(),
                condition="#k = :k",
                names={"#k": keys.SEGMENT_KEY},
                values={":k": replacing.key},
            )
    except ConditionFailed:
        return False
    return True


def delete_index(backend: Backend, ref: SegmentRef) -> None:
    """Remove `ref` from the index, unless the entry at its first sequence is now another segment."""
    with contextlib.suppress(ConditionFailed):
        backend.control.delete(
            keys.segment_index_pk(ref.queue, ref.incarnation, ref.shard),
            offsets.seq_key(ref.first),
            condition="#k = :k",
            names={"#k": keys.SEGMENT_KEY},
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
    "list_segments",
    "put_index",
    "read_segment",
    "segment_key",
    "write_segment",
]
