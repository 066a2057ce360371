"""The shard worker (`lambdas/shard`): flush the hot tier to S3 segments, compact them, expire what
was flushed, apply retention, and seal gaps a dead broker left.

State lives on each shard's HEAD item, next to `next`:
- `flushed`: the first sequence not yet in a segment (everything below it is in S3, a sealed gap, or
  gone by retention). Moved only by a conditional update (`flushed = :old`), after the segment
  object and its index entry exist, so a crash at any point loses nothing and a retry redoes the work.
- `ttl_set`: the first sequence whose items have not had their `exp` set after a flush (bottomless
  queues only; on other queues `exp` is set at publish). A crash between the flush and the TTL
  updates is repaired by the next flush.

Policies (see docs/design.md, "Shard work"):
- Every queue is flushed, bottomless or not, so stream reads go past the hot tier on any queue.
- Bottomless queues: items have no `exp` until they are in S3; then `exp = ts + hot retention`
  (`retention_seconds`, at most 14 days) — pull consumers keep the same window as on other queues.
  Segments are kept forever.
- Other queues: `exp = ts + retention_seconds` from publish (SQS semantics: retention bounds unacked
  messages too); segments whose newest record is older than the retention are deleted.
- Compaction is tiered (Durable Streams' scheme): `FANOUT` adjacent segments of the same level merge
  into one of the next level while the result stays under `MAX_SEGMENT_TEXT_BYTES`, so each record is
  rewritten at most once per level: write amplification ≤ 1 + log_FANOUT(flushes).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from sluice import errors, faults
from sluice.engine import payloads
from sluice.engine.backend import Backend
from sluice.engine.budget import ByteBudget
from sluice.engine.queues import QueueRegistry
from sluice.engine.store import Head, ObjectPayload, ShardAddress
from sluice.engine.streams import scan_hot
from sluice.models import Queue, Shard
from sluice.segments import (
    Record,
    SegmentRef,
    covering,
    delete_index,
    list_segments,
    put_index,
    read_segment,
    write_segment,
)

logger = logging.getLogger(__name__)

FLUSH_MAX_RECORDS = 50_000  # per segment written by one flush
FANOUT = 4  # segments of one level merged into one of the next
# Compaction stops growing a segment past this much NDJSON uncompressed: decoding one holds ~1.4x it in
# Python objects and takes ~0.8 s of one core per 32 MiB (`python -m bench.segments`), on the shard
# function compacting it and on the consumer reading it (a 29 s API call). Bounded by the compressed size
# (64 MiB), a segment of JSON bodies compressing 13x held ~1.2 GB, past a 1,024 MB function.
MAX_SEGMENT_TEXT_BYTES = 32 * 1024 * 1024
# A flush stops at this much text too (by `Record.line_size`, before it holds the records), so FANOUT
# level-0 segments always merge: by records alone, 50,000 bodies of 128 KiB (the default largest
# message) were ~6.4 GB in one flush, and a shard that fell behind failed its flush at every try.
FLUSH_MAX_TEXT_BYTES = MAX_SEGMENT_TEXT_BYTES // FANOUT
MAX_HOT_RETENTION_SECONDS = 1_209_600  # the hot tier never holds an item longer than 14 days
ACTIONS = ("flush", "compact", "sweep", "retention", "all")


@dataclass
class WorkReport:
    """What one run did, summed over the shards it visited (returned by the Lambda)."""

    shards: int = 0
    flushed_records: int = 0
    flushed_bytes: int = 0
    segments_written: int = 0
    compactions: int = 0
    compacted_records: int = 0
    compacted_bytes: int = 0
    swept_items: int = 0
    expired_segments: int = 0
    orphans_deleted: int = 0  # payload-tier objects no batch item names
    errors: list[str] = field(default_factory=list)

    def merge(self, other: WorkReport) -> None:
        for name, value in other.__dict__.items():
            if isinstance(value, int):
                setattr(self, name, getattr(self, name) + value)
            else:
                getattr(self, name).extend(value)


class ShardWorker:
    def __init__(self, backend: Backend, registry: QueueRegistry) -> None:
        self.backend = backend
        self.registry = registry

    # --- entry point ----------------------------------------------------------------------------------

    def run(
        self,
        actions: str | Iterable[str] = "all",
        queue: str | None = None,
        shards: Iterable[int] | None = None,
    ) -> WorkReport:
        """Do `actions` on the shards of `queue` (every queue when None) listed in `shards` (all when
        None; ids no longer in the map are skipped). The shard function runs what the coordinator
        sends (`sluice.events.ShardWorkEvent`); `sweep` is for `sluice local`'s TTL emulation. Only
        this region's shards are worked on: another region's shard function works on its own."""
        wanted = {actions} if isinstance(actions, str) else set(actions)
        unknown = wanted - set(ACTIONS)
        if unknown or not wanted:
            raise errors.InvalidRequest(f"actions must be among {', '.join(ACTIONS)}, got {sorted(unknown)}")
        if "all" in wanted:
            wanted = set(ACTIONS) - {"all"}
        only = None if shards is None else set(shards)
        report = WorkReport()
        for q in [self.registry.get(queue)] if queue else self._all_queues():
            for shard in q.shards:
                if (only is not None and shard.id not in only) or not self.backend.is_local(shard):
                    continue
                try:
                    report.merge(self.work_shard(q, shard, wanted))
                except errors.SluiceError as exc:  # one shard's trouble must not stop the others
                    logger.warning("shard work failed on %s/%s: %s", q.name, shard.id, exc)
                    report.errors.append(f"{q.name}/{shard.id}: {exc}")
        return report

    def work_shard(self, queue: Queue, shard: Shard, wanted: set[str]) -> WorkReport:
        """Flush, compact, retention, sweep: in this order, those in `wanted`."""
        report = WorkReport(shards=1)
        if "flush" in wanted:
            while self.flush(queue, shard, report):
                pass
        if "compact" in wanted:
            while self.compact(queue, shard, report):
                pass
        if "retention" in wanted:
            report.expired_segments += self.apply_retention(queue, shard)
        if "sweep" in wanted:
            report.swept_items += self.sweep(queue, shard)
        return report

    def _all_queues(self) -> Iterable[Queue]:
        after = None
        while True:
            page = self.registry.list(limit=100, after=after)
            yield from page
            if len(page) < 100:
                return
            after = page[-1].name

    # --- flush ----------------------------------------------------------------------------------------

    def flush(self, queue: Queue, shard: Shard, report: WorkReport | None = None) -> int:
        """Write the next contiguous range of the hot tier as one level-0 segment, of at most
        FLUSH_MAX_RECORDS records and FLUSH_MAX_TEXT_BYTES of text (a range of only sealed gaps just
        moves the mark). Returns how many sequences `flushed` moved: 0 when there
        was nothing to flush, a young gap blocks it, or another worker flushed it first."""
        store, at = self.backend.store, ShardAddress.of(queue, shard)
        head = store.head(at)
        flushed = head.flushed
        if flushed >= head.next:
            self._set_ttl(queue, at, head)
            return 0
        now = self.backend.clock()
        segment_text = ByteBudget(FLUSH_MAX_TEXT_BYTES, Record.line_size)
        scan = scan_hot(store, at, head, flushed, FLUSH_MAX_RECORDS, now, budget=segment_text)
        end = scan.next_seq
        if end <= flushed:
            return 0  # a young gap right at the mark: wait for it
        ref = None
        if scan.records:
            ref = write_segment(
                self.backend, queue, shard.id, scan.records, flushed, end - 1, level=0, region=shard.region
            )
            faults.crash_point(faults.SEGMENT_AFTER_UPLOAD)
            if not put_index(self.backend, ref):
                return 0  # another worker flushed this range
        if not store.mark_flushed(at, flushed, end):
            return 0
        orphans = self._delete_orphans(at, flushed, end, [r.seq for r in scan.records])
        if report is not None:
            report.orphans_deleted += orphans
            report.flushed_records += len(scan.records)
            report.flushed_bytes += ref.bytes if ref else 0
            report.segments_written += 1 if ref else 0
        self._set_ttl(queue, at, replace(head, flushed=end))
        return end - flushed

    def _delete_orphans(self, at: ShardAddress, lo: int, hi: int, seqs: list[int]) -> int:
        """Payload-tier objects keyed where this flush found no record: a send that crashed between
        its object and its items (the range is a sealed gap now), or items past their expiry."""
        holes, expect = [], lo
        for seq in [*seqs, hi]:
            if seq > expect:
                holes.append((expect, seq))
            expect = seq + 1
        bucket = self.backend.bucket_for(at.shard)
        return sum(payloads.orphans_in(bucket, at.pk, a, b) for a, b in holes)

    def _set_ttl(self, queue: Queue, at: ShardAddress, head: Head) -> None:
        """Bottomless queues: give the items below `flushed` their `exp`, now that S3 holds them."""
        if not queue.settings.bottomless:
            return
        start, end = head.ttl_set, head.flushed
        if start >= end:
            return
        store = self.backend.store
        hot_seconds = min(queue.settings.retention_seconds, MAX_HOT_RETENTION_SECONDS)
        for item in store.scan(at, max(0, start - 99), to_seq=end - 1):
            if item.end <= start or item.gap:
                continue
            store.set_expiry(at, item.first, item.ts // 1000 + hot_seconds)  # False: swept meanwhile
        store.mark_ttl_set(at, end)

    # --- compaction -----------------------------------------------------------------------------------

    def compact(self, queue: Queue, shard: Shard, report: WorkReport | None = None) -> SegmentRef | None:
        """Merge the oldest run of FANOUT adjacent same-level segments into one of the next level."""
        refs = covering(list_segments(self.backend, queue, shard.id, region=shard.region), 0)
        run = _pick_run(refs)
        if not run:
            return None
        records: list[Record] = []
        for ref in run:
            records += read_segment(self.backend, ref)
        merged = write_segment(
            self.backend,
            queue,
            shard.id,
            records,
            run[0].first,
            run[-1].last,
            level=run[0].level + 1,
            region=shard.region,
        )
        if not put_index(self.backend, merged, replacing=run[0]):
            return None  # another worker compacted this range
        for ref in run[1:]:
            delete_index(self.backend, ref)
        for ref in run:
            if ref.key != merged.key:
                self.backend.bucket_for(shard).delete(ref.key)
        if report is not None:
            report.compactions += 1
            report.compacted_records += len(records)
            report.compacted_bytes += merged.bytes
        return merged

    # --- retention and TTL ----------------------------------------------------------------------------

    def apply_retention(self, queue: Queue, shard: Shard) -> int:
        """Non-bottomless queues: delete segments whose newest record is older than the retention."""
        if queue.settings.bottomless:
            return 0
        horizon = self.backend.clock() - queue.settings.retention_seconds * 1000
        removed = 0
        for ref in covering(list_segments(self.backend, queue, shard.id, region=shard.region), 0):
            if ref.max_ts >= horizon:
                break
            delete_index(self.backend, ref)
            self.backend.bucket_for(shard).delete(ref.key)
            removed += 1
        return removed

    def sweep(self, queue: Queue, shard: Shard) -> int:
        """Delete items whose `exp` has passed — DynamoDB's TTL, for the local runtime (moto never
        expires items). Deployed, DynamoDB does this itself; readers already treat them as gone.
        On bottomless queues only flushed items can carry an `exp`, so nothing unflushed goes."""
        store, at = self.backend.store, ShardAddress.of(queue, shard)
        flushed = store.head(at).flushed
        now = self.backend.clock()
        doomed: list[int] = []
        objects: set[str] = set()
        for item in store.scan(at, 0):
            if item.expired(now):
                if not queue.settings.bottomless or item.end <= flushed or item.gap:
                    doomed.append(item.first)
                    if isinstance(item.payload, ObjectPayload):
                        objects.add(item.payload.key)
            elif not item.gap:
                break  # message items expire in sequence order (exp = ts + a fixed time): done
        store.delete_items(at, doomed)
        # The payload tier's objects expire by S3 lifecycle rules deployed (a day after their items);
        # moto runs no lifecycle rules, so the local sweep removes them with their items.
        self.backend.bucket_for(at.shard).delete_many(sorted(objects))
        return len(doomed)


def _pick_run(refs: list[SegmentRef]) -> list[SegmentRef]:
    """The oldest FANOUT adjacent segments of one level whose merge stays under MAX_SEGMENT_TEXT_BYTES."""
    for i in range(len(refs) - FANOUT + 1):
        run = refs[i : i + FANOUT]
        if len({r.level for r in run}) != 1:
            continue
        if sum(r.text_size for r in run) > MAX_SEGMENT_TEXT_BYTES:
            continue
        return run  # adjacent in the index: sequences between two entries are sealed gaps
    return []
