"""Stream reads: ordered, lease-free reads of a shard by sequence or time, from the S3 segments up to
the shard's `flushed` mark and from the hot tier (DynamoDB) after it, seamlessly.

Per shard the HEAD item says where the tiers meet: `flushed` is the first sequence not yet in a
segment. Everything below it is read from segments (found through the segment index); everything
from it up to `next` from the batch items. A hole in the hot tier is a gap: younger than
`gaps.GAP_WAIT_MS` the read stops before it (a slow broker may still write it), older it is sealed
and skipped. An item past its `exp` is gone (DynamoDB deletes expired items lazily; moto never does).

Positions: a `Cursor` maps shard id → next sequence to read. For a one-shard read the public form is
the 32-digit offset of the last record (`<16-digit ms><16-digit seq>`); over several shards it is an
opaque string (`~<shard>.<seq>,...`). Shard ids are unique across the regions of a deployment, so a
cursor covers every region's shards; each shard is read in its own region (table and bucket), and
shard listings and pages name it (`region`, multi-region deployments only). A read over several shards
from a cursor skips the shards of a region that cannot be reached (`RegionBreaker`): their positions
stay where they were, so the next read resumes them once the region is back.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sluice import errors, offsets
from sluice.engine import gaps, keys
from sluice.engine.backend import Backend
from sluice.engine.budget import ByteBudget
from sluice.engine.publish import message_id_at
from sluice.engine.queues import QueueDirectory, QueueRegistry
from sluice.engine.regions import RegionBreaker, region_key
from sluice.engine.store import BatchItem, Head, ShardAddress, ShardStore
from sluice.models import MAX_BATCH_MESSAGES, Queue, Shard
from sluice.segments import Record, SegmentGone, SegmentRef, covering, list_segments, read_segment

MAX_LIMIT = 1000
MAX_TIMEOUT_MS = 20_000
_ITEMS_PER_QUERY = 16
# Decoded segments kept per process (segments are immutable), by their uncompressed size: ~1.4x it in
# Python objects, beside the one being decoded (a count of records let one segment of large bodies hold
# the whole budget of a function of 256 MB).
_CACHED_TEXT_BYTES = 32 * 1024 * 1024


@dataclass
class HotScan:
    """The result of scanning the hot tier of one shard from a sequence."""

    records: list[Record]
    next_seq: int  # the first sequence not consumed (records, sealed gaps and expired items consumed)
    blocked: bool  # stopped before a gap that is too young to seal
    retry_cold: bool = False  # saw a hole below the shard's current `flushed`: read segments instead


def scan_hot(
    store: ShardStore,
    at: ShardAddress,
    head: Head,
    from_seq: int,
    limit: int,
    now_ms: int,
    *,
    start_ms: int | None = None,
    reread_head: Callable[[], Head] | None = None,
    budget: ByteBudget | None = None,
) -> HotScan:
    """Records of sequences [from_seq, head.next) from the batch items, in order, at most `limit`, and
    with `budget` only those it admits (a record it refuses is left for the next scan).

    Seals gaps older than the wait (a sealed gap is consumed); an expired item is consumed as gone.
    Before treating a hole or an expired item as such, `reread_head` is consulted: if the flusher
    moved `flushed` past it meanwhile (and the sweeper removed items), the caller reads segments."""
    records: list[Record] = []
    seq = from_seq
    lo = max(0, seq - MAX_BATCH_MESSAGES + 1)  # an item holds at most one request: ≤ 100 messages

    def moved_past(position: int) -> bool:
        return reread_head is not None and reread_head().flushed > position

    for item in _items_from(store, at, lo):
        if item.first >= head.next or len(records) >= limit:
            break
        if item.end <= seq:
            continue
        if item.first > seq:  # allocated but never written (or swept after a flush we did not see)
            if moved_past(seq):
                return HotScan(records, seq, False, retry_cold=True)
            if not gaps.gap_is_stale(now_ms, item.ts):
                return HotScan(records, seq, True)
            if not store.seal_gap(at, seq, item.first, now_ms):
                return HotScan(records, seq, True)  # a late write landed or another reader sealed: re-read
            seq = item.first
        if item.gap:
            seq = item.end
            continue
        if item.expired(now_ms):
            if moved_past(seq):
                return HotScan(records, seq, False, retry_cold=True)
            seq = item.end  # past retention: gone
            continue
        stored = store.messages(at, item)
        for s in range(seq, item.end):
            if len(records) >= limit:
                return HotScan(records, s, False)
            seq = s + 1
            if start_ms is not None and item.ts < start_ms:
                continue
            msg = stored[s - item.first]
            record = Record(
                shard=at.id,
                seq=s,
                id=message_id_at(at, s),
                timestamp_ms=item.ts,
                content_type=msg.content_type,
                body=store.body(at, msg),
                partition_key=msg.partition_key,
                attributes=msg.attributes,
            )
            if budget is not None and not budget.admit(record):
                return HotScan(records, s, False)
            records.append(record)
    if len(records) < limit and seq < head.next:  # a tail allocated and never written
        if moved_past(seq):
            return HotScan(records, seq, False, retry_cold=True)
        if not gaps.gap_is_stale(now_ms, head.ts):
            return HotScan(records, seq, True)
        if not store.seal_gap(at, seq, head.next, now_ms):
            return HotScan(records, seq, True)
        seq = head.next
    return HotScan(records, seq, False)


def _items_from(store: ShardStore, at: ShardAddress, from_seq: int) -> Iterator[BatchItem]:
    """Batch items of a shard from `from_seq`, in pages of 2, 4, 8, 16 items (an item holds up to 100
    records and most reads want few: the first page is usually enough)."""
    start, size = from_seq, 2
    while True:
        page = list(store.scan(at, start, limit=size))
        yield from page
        if len(page) < size:
            return
        start, size = page[-1].first + 1, min(size * 2, _ITEMS_PER_QUERY)


# --- positions ------------------------------------------------------------------------------------------


@dataclass
class Position:
    """Where a read starts on every shard: a sequence, a time, or 'now' (only new records)."""

    seqs: dict[int, int] = field(default_factory=dict)  # shard → next sequence
    start_ms: int | None = None  # seek by time on shards not in `seqs`
    latest: bool = False  # shards not in `seqs` start at their head (records after the call)
    text: str | None = None  # the client's offset: returned as next_offset when a read moves nowhere


CURSOR_PREFIX = "~"
_CURSOR_RE = re.compile(
    rf"\A{re.escape(CURSOR_PREFIX)}[0-9]{{1,10}}\.[0-9]{{1,16}}(,[0-9]{{1,10}}\.[0-9]{{1,16}})*\Z"
)


def parse_position(offset: str | None, start_ms: int | None = None, shard: int | None = None) -> Position:
    """`-` (beginning), a 32-digit offset (strictly after it), a 16-digit ms prefix (records at or after
    that time), a multi-shard cursor, or None with `start_ms` / None alone (only new records)."""
    if offset is None or offset == "":
        if start_ms is not None:
            return Position(start_ms=start_ms, text=offsets.time_prefix(start_ms))
        return Position(latest=True)
    if offset == offsets.BEGINNING:
        return Position(start_ms=None)
    if offsets.OFFSET_RE.match(offset):
        _, seq = offsets.decode(offset)
        return Position(seqs={-1 if shard is None else shard: seq + 1}, text=offset)
    if offsets.TIME_PREFIX_RE.match(offset):
        return Position(start_ms=int(offset), text=offset)
    if _CURSOR_RE.match(offset):
        pairs = [p.split(".") for p in offset[1:].split(",")]
        return Position(seqs={int(s): int(q) for s, q in pairs}, text=offset)
    raise errors.InvalidOffset(
        f"offset {offset!r} is invalid: use '-', a 32-digit offset, a 16-digit millisecond time or a "
        "next_offset returned earlier"
    )


def encode_cursor(seqs: dict[int, int]) -> str:
    return CURSOR_PREFIX + ",".join(f"{s}.{q}" for s, q in sorted(seqs.items()))


@dataclass
class StreamPage:
    records: list[Record]
    next_offset: str
    positions: dict[int, int]  # shard → next sequence after this page
    regions: dict[int, str] = field(default_factory=dict)  # shard → region (multi-region deployments)


# --- the reader -----------------------------------------------------------------------------------------


class StreamReader:
    """Ordered reads over the two tiers. One per process: it caches decoded segments (immutable) and
    each shard's index listing and `flushed` mark (both only grow; a miss re-reads them)."""

    def __init__(self, backend: Backend, directory: QueueDirectory, registry: QueueRegistry) -> None:
        self.backend = backend
        self.directory = directory
        self.registry = registry
        self._lock = threading.Lock()
        self._segments: OrderedDict[str, tuple[list[int], list[Record]]] = OrderedDict()
        self._cached_text: dict[str, int] = {}  # key -> its segment's uncompressed size
        self._index: dict[str, list[SegmentRef]] = {}
        self._flushed: dict[str, int] = {}
        self.breaker = RegionBreaker()

    # --- public ---------------------------------------------------------------------------------------

    def read(
        self,
        queue_name: str,
        position: Position,
        *,
        limit: int = 10,
        shard: int | None = None,
        timeout_ms: int = 0,
        queue: Queue | None = None,
        size_of: Callable[[Record], int] | None = None,
        max_bytes: int = 0,
    ) -> StreamPage:
        """Up to `limit` records after `position`; with `timeout_ms`, wait for the first ones to arrive.
        The wait ends early, with no records, when the queue is deleted (or deleted and created again).
        With `size_of`, only as many records as add up to `max_bytes` in the caller's encoding (see
        engine/budget.py); `next_offset` then points just past the last one returned."""
        queue = queue or self.directory.get(queue_name)
        shards = self._shards(queue, shard)
        seqs = self._resolve(queue, shards, position, single=shard is not None or len(queue.shards) == 1)
        start = dict(seqs)
        clock = self.backend.clock
        deadline = clock.monotonic() + min(timeout_ms, MAX_TIMEOUT_MS) / 1000
        delay = 0.05
        while True:
            budget = ByteBudget(max_bytes, size_of) if size_of else None
            page = self._read_once(queue, shards, seqs, limit, budget)
            if not page.records and page.positions == start and position.text is not None:
                # Nothing read and nothing skipped: the client's own offset is where to go on from.
                # (Re-encoding it would lose its time part, and a future time would turn into the
                # current head: both sort before what the client sent.)
                page.next_offset = position.text
            if page.records or clock.monotonic() >= deadline:
                page.regions = self._regions(shards)
                return page
            clock.sleep(min(delay, max(0.0, deadline - clock.monotonic())))
            delay = min(delay * 2, 0.5)
            current = self._current(queue.name)
            if current is None or current.incarnation != queue.incarnation:
                page.regions = self._regions(shards)
                return page  # deleted while we waited: release the reader
            seqs = page.positions

    def shard_ranges(self, queue_name: str) -> list[dict[str, Any]]:
        """Every shard with its state, lineage and offset range (first and last available record). The
        control item, not the mirror: lineage (`created_ms`, `parents`) is left out of the mirror. A
        shard whose region cannot be reached (or cools down) is listed with `unreachable` and no offsets,
        not a failure of the whole answer."""
        queue = self.registry.get(queue_name)
        out = []
        for shard in sorted(queue.shards, key=lambda s: s.id):
            entry: dict[str, Any] = {
                "shard": shard.id,
                "state": shard.state,
                "parents": shard.parents,
                "children": [s.id for s in queue.shards if shard.id in s.parents],
                "created_ms": shard.created_ms,
                **({"region": region} if (region := self._regions([shard]).get(shard.id)) else {}),
            }
            try:
                with self.breaker.guard(region_key(self.backend, shard)):
                    head = self._head(queue, shard)
                    first = self.read(queue.name, Position(), limit=1, shard=shard.id, queue=queue).records
            except errors.DependencyUnavailable:
                if region_key(self.backend, shard) is None:
                    raise  # one region: nothing else to answer from
                # Its region is down or cooling down: the shard is listed, its offsets are not known now.
                out.append(
                    {**entry, "first_offset": None, "last_offset": None, "flushed_seq": 0, "next_seq": 0}
                    | {"unreachable": True}
                )
                continue
            last_seq = head.next - 1
            out.append(
                {
                    **entry,
                    "first_offset": first[0].offset if first else None,
                    "last_offset": offsets.encode(head.ts, last_seq) if last_seq >= 0 else None,
                    "flushed_seq": head.flushed,
                    "next_seq": head.next,
                }
            )
        return out

    def _regions(self, shards: list[Shard]) -> dict[int, str]:
        """Each shard's region in a multi-region deployment (nothing in a single-region one)."""
        if not self.backend.settings.multi_region:
            return {}
        return {s.id: region for s in shards if (region := self.backend.region_of(s))}

    # --- internals ------------------------------------------------------------------------------------

    def _current(self, name: str) -> Queue | None:
        try:
            return self.registry.get(name)
        except errors.QueueNotFound:
            return None

    @staticmethod
    def _shards(queue: Queue, shard: int | None) -> list[Shard]:
        if shard is None:
            return sorted(queue.shards, key=lambda s: s.id)
        found = queue.shard(shard)
        if found is None:
            raise errors.ShardNotFound(f"shard {shard} not found on queue {queue.name!r}; see its /shards")
        return [found]

    def _resolve(
        self, queue: Queue, shards: list[Shard], position: Position, *, single: bool
    ) -> dict[int, int]:
        seqs: dict[int, int] = {}
        given = dict(position.seqs)
        if -1 in given:  # a bare 32-digit offset: one shard's
            if not single:
                raise errors.InvalidOffset(
                    "a 32-digit offset names a position on one shard: pass shard=<id>, or use next_offset"
                )
            given = {shards[0].id: given[-1]}
        for shard in shards:
            if shard.id in given:
                head = self._head_or_skip(queue, shard, shards)
                if head is None:  # its region cannot be reached: checked once it answers again
                    seqs[shard.id] = given[shard.id]
                    continue
                head_next = head.next
                if given[shard.id] > head_next:
                    raise errors.InvalidOffset(
                        f"offset is past the end of shard {shard.id} (next sequence {head_next}): pass an "
                        "offset or next_offset this queue returned"
                    )
                seqs[shard.id] = given[shard.id]
            elif position.latest:
                seqs[shard.id] = self._head(queue, shard).next
            elif position.start_ms is not None:
                seqs[shard.id] = self._seek_time(queue, shard, position.start_ms)
            else:
                seqs[shard.id] = 0
        return seqs

    def _skippable_region(self, shard: Shard, shards: list[Shard]) -> str | None:
        """The shard's region when a read over several shards may leave it for later (multi-region);
        None: its failures are the read's."""
        return region_key(self.backend, shard) if len(shards) > 1 else None

    def _head_or_skip(self, queue: Queue, shard: Shard, shards: list[Shard]) -> Head | None:
        """The shard's HEAD, or None when its region cools down or does not answer now (skippable)."""
        region = self._skippable_region(shard, shards)
        try:
            with self.breaker.guard(region):  # raises at once while the region cools down
                return self._head(queue, shard)
        except errors.DependencyUnavailable:
            if region is None:
                raise
            return None

    def _head(self, queue: Queue, shard: Shard) -> Head:
        at = ShardAddress.of(queue, shard)
        head = self.backend.store.head(at)
        with self._lock:
            self._flushed[at.pk] = head.flushed
        # A newer map stamped on it: the next read uses it.
        self.directory.observe_stamp(queue, shard, head.map_version, head.map_route)
        return head

    def _seek_time(self, queue: Queue, shard: Shard, start_ms: int) -> int:
        """The first sequence whose record is at or after `start_ms` (timestamps never go back)."""
        refs = covering(list_segments(self.backend, queue, shard.id, region=shard.region), 0)
        seq = 0
        for ref in refs:
            if ref.max_ts >= start_ms:
                for rec in self._segment(ref)[1]:
                    if rec.timestamp_ms >= start_ms:
                        return rec.seq
            seq = ref.last + 1
        head = self._head(queue, shard)
        seq = max(seq, head.flushed)
        at = ShardAddress.of(queue, shard)
        scan = scan_hot(self.backend.store, at, head, seq, 1, self.backend.clock(), start_ms=start_ms)
        return scan.records[0].seq if scan.records else scan.next_seq

    def _read_once(
        self, queue: Queue, shards: list[Shard], seqs: dict[int, int], limit: int, budget: ByteBudget | None
    ) -> StreamPage:
        """One pass over the shards. A record the budget refuses stops the read where it is: its shard's
        position stays on it, and no body past it is fetched (a payload-tier body is an S3 read)."""
        positions = dict(seqs)
        records: list[Record] = []
        skipped: set[int] = set()  # shards of an unreachable region: their positions stay
        # Two passes: first a fair share per shard, then whatever room is left.
        share = max(1, limit // len(shards)) if shards else limit
        for pass_limit in (share, limit):
            for shard in shards:
                room = min(pass_limit, limit - len(records))
                if room <= 0 or (budget is not None and budget.full):
                    break
                region = self._skippable_region(shard, shards)
                if shard.id in skipped:
                    continue
                try:
                    with self.breaker.guard(region):  # raises at once while the region cools down
                        got, positions[shard.id] = self._read_shard(
                            queue, shard, positions[shard.id], room, budget
                        )
                except errors.DependencyUnavailable:
                    if region is None:
                        raise
                    skipped.add(shard.id)
                    continue
                records += got
        if shards and len(skipped) == len(shards):
            raise errors.DependencyUnavailable(
                f"no region of queue {queue.name!r} can be reached; retry shortly"
            )
        if len(shards) == 1:
            only = shards[0].id
            if records:
                next_offset = records[-1].offset
            elif positions[only] > 0:
                next_offset = offsets.encode(0, positions[only] - 1)
            else:
                next_offset = offsets.BEGINNING
        else:
            next_offset = encode_cursor(positions)
        return StreamPage(records=records, next_offset=next_offset, positions=positions)

    def _read_shard(
        self, queue: Queue, shard: Shard, seq: int, limit: int, budget: ByteBudget | None
    ) -> tuple[list[Record], int]:
        pk = keys.shard_pk(queue, shard.id)
        records: list[Record] = []
        for _ in range(4):
            with self._lock:
                known_flushed = self._flushed.get(pk, 0)
            if seq < known_flushed:
                got, seq = self._read_cold(queue, shard, seq, known_flushed, limit - len(records), budget)
                records += got
                if len(records) >= limit or (budget is not None and budget.full):
                    return records, seq
            head = self._head(queue, shard)
            if seq < head.flushed:
                continue  # the flusher moved on: more of it is in segments now
            scan = scan_hot(
                self.backend.store,
                ShardAddress.of(queue, shard),
                head,
                seq,
                limit - len(records),
                self.backend.clock(),
                reread_head=lambda: self._head(queue, shard),
                budget=budget,
            )
            records += scan.records
            seq = scan.next_seq
            if not scan.retry_cold:
                return records, seq
        return records, seq

    def _read_cold(
        self, queue: Queue, shard: Shard, seq: int, flushed: int, limit: int, budget: ByteBudget | None
    ) -> tuple[list[Record], int]:
        """Records from segments for sequences [seq, flushed); sequences covered by no segment below
        `flushed` are gaps or were removed by retention, and are skipped."""
        records: list[Record] = []
        for attempt in range(3):
            refs = self._listing(queue, shard, seq, flushed, fresh=attempt > 0)
            try:
                for ref in refs:
                    if ref.first >= flushed:
                        break
                    seqs, recs = self._segment(ref)
                    for rec in recs[bisect.bisect_left(seqs, seq) :]:
                        if len(records) >= limit or (budget is not None and not budget.admit(rec)):
                            return records, seq
                        records.append(rec)
                        seq = rec.seq + 1
                    seq = max(seq, ref.last + 1)
                return records, max(seq, flushed)
            except SegmentGone:
                continue
        raise errors.DependencyUnavailable("segments are being compacted; retry shortly")

    def _listing(
        self, queue: Queue, shard: Shard, seq: int, flushed: int, *, fresh: bool
    ) -> list[SegmentRef]:
        pk = keys.shard_pk(queue, shard.id)
        with self._lock:
            cached = None if fresh else self._index.get(pk)
        if cached is not None:
            refs = covering(cached, seq)
            if refs and refs[0].first <= seq and refs[-1].last >= flushed - 1:
                return refs
        listed = list_segments(self.backend, queue, shard.id, region=shard.region)
        with self._lock:
            self._index[pk] = listed
        return covering(listed, seq)

    def _segment(self, ref: SegmentRef) -> tuple[list[int], list[Record]]:
        """(sequences, records) of a segment, cached: paging inside it is a bisect, not a scan."""
        with self._lock:
            cached = self._segments.get(ref.key)
            if cached is not None:
                self._segments.move_to_end(ref.key)
                return cached
        records = list(read_segment(self.backend, ref))
        entry = ([r.seq for r in records], records)
        with self._lock:
            self._segments[ref.key] = entry
            self._cached_text[ref.key] = ref.text_size
            while sum(self._cached_text.values()) > _CACHED_TEXT_BYTES and len(self._segments) > 1:
                dropped, _ = self._segments.popitem(last=False)
                del self._cached_text[dropped]
        return entry
