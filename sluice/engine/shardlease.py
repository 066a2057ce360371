"""Leasing from one lane of a group on one shard: the acks recorded on the lane folded in, due
redeliveries, then a scan of fresh batch items inside the lane's range, then one conditional commit of
the lane (`commit.StateCommit`).

A lane whose range is read claims the next one from the cursor first (`sluice.engine.lanes`): lane 0
in its own commit, another lane with a write on lane 0's item that cannot overshoot HEAD `next`. A lost
race decides again from the winner's lane and the items already read (they never change), so a retry
costs one conditional write and the race window stays small. Gaps older than the wait are sealed on the
way (`gaps`); messages stamped before the group's start are skipped; exhausted messages go to the dead
letter sink in the same commit that drops them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from sluice.codec import StoredMessage
from sluice.engine import deadletter, gaps
from sluice.engine.budget import ByteBudget
from sluice.engine.clock import Clock
from sluice.engine.commit import LaneView, StateCommit
from sluice.engine.deadletter import DeadLetterSink
from sluice.engine.groupstate import Pending
from sluice.engine.lanes import Cursor, claim_size, drop_below, may_claim
from sluice.engine.leasebook import Fresh, LeaseBook
from sluice.engine.publish import message_id_at
from sluice.engine.store import BatchItem, ClaimRefused, Head, ShardStore
from sluice.leases import Lease, LeaseSigner
from sluice.models import AckResult, Delivery, Queue

_ITEMS_PER_QUERY = 32  # at most this many batch items per Query page
PULL_ATTEMPTS = 3  # commits a pull tries on one lane before it looks elsewhere (and the lanes widen)
_QUERIES_PER_PULL = 6  # Query pages per lane and pull (1, then sized from the messages per item seen)
DEAD_LETTERS_PER_PULL = 50  # bounds the BatchGetItem of one pull (≤ 100 keys with the redeliveries)

Loaded = dict[int, tuple[int, Sequence[StoredMessage]]]  # first seq -> (timestamp, messages)
LaneKey = tuple[str, int, int]  # (group, shard, lane)


@dataclass
class CarriedAcks:
    """Acks riding on a pull: verified leases by (group, shard, lane) until applied, and the outcome."""

    ops: dict[LaneKey, list[Lease]] = field(default_factory=dict)
    acked: Counter[str] = field(default_factory=Counter)  # by group
    warnings: list[str] = field(default_factory=list)
    surveyed: bool = False  # the region being pulled was surveyed: acks applied from now on were counted
    late: Counter[str] = field(
        default_factory=Counter
    )  # acks applied after the survey counted them, by group

    def result(self) -> AckResult:
        return AckResult(ack_count=self.acked.total(), retry_count=0, warnings=self.warnings)


@dataclass
class Tally:
    """What one `take` met: its lost races, and whether it gave up on the lane. Per call, not per
    process: a threaded host (`sluice local`) serves many pulls with one engine, and another pull's
    lost race says nothing about this one's lane."""

    lost_races: int = 0
    contended: bool = False


@dataclass
class _Take:
    """One attempt at leasing from one lane: what to take, and the deliveries taken so far."""

    queue: Queue
    view: LaneView
    want: int
    vis: int  # lease length (ms)
    now: int
    budget: ByteBudget | None
    batch: int  # the pull's batch size (`want` is what it still lacks)
    out: list[Delivery] = field(default_factory=list)

    @property
    def book(self) -> LeaseBook:
        return LeaseBook(self.view.state, ordered=self.queue.settings.ordered)


class ShardLeaser:
    def __init__(
        self, store: ShardStore, clock: Clock, signer: LeaseSigner, dead_letters: DeadLetterSink
    ) -> None:
        self.store = store
        self.clock = clock
        self.signer = signer
        self.dead_letters = dead_letters
        self.commit = StateCommit(store, clock)

    def take(
        self,
        queue: Queue,
        view: LaneView,
        want: int,
        vis: int,
        budget: ByteBudget | None,
        carried: CarriedAcks | None = None,
        tally: Tally | None = None,
        batch: int = 0,
    ) -> list[Delivery]:
        """Lease up to `want` from the lane in at most PULL_ATTEMPTS commits; `tally`, when the caller
        wants them, counts this call's lost races and whether it gave the lane up as contended.
        `batch`: the pull's batch size, when it already holds some (claims are cut to it)."""
        tally = tally if tally is not None else Tally()
        fetched: list[BatchItem] = []
        mark = budget.mark() if budget else None
        for attempt in range(PULL_ATTEMPTS):
            self.commit.backoff(attempt)
            now = self.clock()
            old_version = view.state.version
            view.redelivered = False
            view.fold()  # acks recorded on the item: an acked message is not redelivered
            acked = drop_acked(view, carried)
            take = _Take(queue, view, want, vis, now, budget, batch or want)
            self._take_due(take)
            if len(take.out) < want and not take.book.full and not (budget and budget.full):
                self._take_fresh(take, fetched)
            if not view.dirty:
                record_carried(carried, view, acked)
                return []
            if not self.commit.save(view, old_version):
                tally.lost_races += 1
                if budget and mark:
                    budget.reset(mark)
                continue
            record_carried(carried, view, acked)
            return take.out
        tally.contended = True
        return []  # the lane is contended: the caller looks elsewhere

    def _take_due(self, take: _Take) -> None:
        """Redeliver pending messages whose lease or delay ran out; dead-letter those out of deliveries."""
        queue, view, book = take.queue, take.view, take.book
        state = view.state
        if not state.due(take.now):
            return
        due = book.due(take.now, max(1, queue.settings.max_retries), DEAD_LETTERS_PER_PULL)
        if queue.settings.ordered and not due.exhausted and not due.redeliver:
            return  # only messages waiting behind their key's lease: nothing changes
        redeliver = due.redeliver[: take.want]
        loaded = self.load(view, {state.pending[s].item for s in due.exhausted + redeliver}, take.now)
        if due.exhausted:
            self.dead_letter(queue, view, book, due.exhausted, loaded, take.now)
        # Gone past retention (SQS deletes a message then, in flight or not): dropped, not redelivered.
        book.drop([seq for seq in redeliver if state.pending[seq].item not in loaded])
        for seq in (seq for seq in redeliver if seq in state.pending):
            offered = book.redelivery(seq, take.now, take.vis)
            delivery = self.delivery(queue, view, seq, offered, loaded)
            if take.budget is not None and not take.budget.admit(delivery):
                break  # the response is full: the rest stay due, unleased, for the next pull
            book.lease(seq, offered)
            take.out.append(delivery)
            view.redelivered = True
        view.dirty = True

    # --- fresh messages -----------------------------------------------------------------------------------

    def head(self, view: LaneView) -> Head:
        """The HEAD, read once per pull when the lane needs it (a claim, the one lane's end, a stalled
        tail)."""
        if view.head is None:
            view.head = self.store.head(view.address)
            view.floor = view.head.floor
            view.dirty = drop_below(view.state, view.floor) or view.dirty
        return view.head

    def _cursor(self, view: LaneView) -> None:
        """Read lane 0's cursor (and the HEAD) for a lane read without them, whose range is read."""
        read = self.store.read_lanes(view.address, view.group, [], head=view.head is None)
        view.cursor, view.cursor_known = read.cursor, True
        if read.head is not None:
            view.head, view.floor = read.head, read.head.floor
            view.dirty = drop_below(view.state, view.floor) or view.dirty

    def _range(self, take: _Take) -> tuple[int, int] | None:
        """[start, end) of fresh sequences this lane reads now (claiming its next range when its own is
        read); None when it has none."""
        view = take.view
        if view.on_stripe and view.cursor is not None:
            return self._stripe(view, view.cursor)
        bounds = view.bounds
        if (
            bounds is not None
            and max(view.state.read, bounds[0]) < bounds[1]
            and (view.cursor or view.state.end)
        ):
            lo, hi = bounds  # inside its claimed range: no HEAD, no cursor needed
        else:
            if not view.cursor_known:
                self._cursor(view)
            if view.cursor is None:  # one lane: everything up to HEAD next
                if view.lane:
                    return None  # the lanes were merged back into lane 0: this one reads nothing new
                head = self.head(view)
                return max(view.state.read, head.floor), head.next
            if view.on_stripe:
                return self._stripe(view, view.cursor)
            lo, hi = view.cursor.range_of(view.lane)
            if max(view.state.read, lo) >= hi:
                claimed = self._claim(take, view.cursor)
                if claimed is None:
                    return None
                lo, hi = claimed
        self._enter(view, max(lo, view.floor), hi)
        return view.state.read, hi

    def _stripe(self, view: LaneView, cursor: Cursor) -> tuple[int, int] | None:
        """[start, end) a striped lane reads now: the block of its stripe at its read level, up to HEAD
        `next` (a block may reach past what was allocated: it is never read, or sealed, beyond that)."""
        if view.retired >= cursor.epoch:
            return None  # its epoch was merged after this cursor was read: lane 0 reads on
        head = self.head(view)
        lo, hi = cursor.block(view.lane, max(view.state.read, view.floor))
        if lo >= head.next:
            return None
        self._enter(view, max(lo, view.floor), min(hi, head.next))
        return view.state.read, view.state.end

    def _enter(self, view: LaneView, lo: int, hi: int) -> None:
        """Move the lane's read level into its range [lo, hi): the scan starts at the item holding `lo`
        (found by one backward Query; a claim's first sequence may fall inside an item of another lane)."""
        if view.state.read >= lo:
            if view.state.end != hi:
                view.state.end, view.dirty = hi, True
            return
        before = self.store.item_before(view.address, lo)
        view.enter(lo, hi, before.first if before is not None and before.end > lo else lo)

    def _claim(self, take: _Take, cursor: Cursor) -> tuple[int, int] | None:
        view = take.view
        if not may_claim(view.lane, cursor):
            # It drains what it holds and takes nothing more (a retired lane; lane 0 of a split shard:
            # in a drain's tail 1,000 empty pulls kept the HEAD's partition saturated, and the acks of
            # lane 0's last leases were throttled for seconds).
            return None
        head = self.head(view)
        unclaimed = head.next - max(cursor.next, head.floor)
        if unclaimed <= 0:
            return None
        count = claim_size(unclaimed, cursor.lanes, take.want, take.batch)
        seen = cursor.ranges.get(view.lane)
        try:
            lo, hi = self.store.claim(
                view.address,
                view.group,
                view.lane,
                count,
                limit=head.next - count,
                seen_hi=seen[1] if seen else None,
            )
        except ClaimRefused as exc:
            view.cursor = exc.cursor
            if exc.cursor is None:
                return None
            mine = exc.cursor.range_of(view.lane)
            return mine if max(view.state.read, mine[0]) < mine[1] else None  # another puller claimed for us
        view.cursor = replace(cursor, next=hi, ranges={**cursor.ranges, view.lane: (lo, hi)})
        return lo, hi

    def _take_fresh(self, take: _Take, fetched: list[BatchItem]) -> None:
        """Scan batch items from the read level to the end of the lane's range. Messages published before
        the group's start are skipped; a scan that only skipped goes on (a few queries per pull) instead of
        answering empty."""
        queue, view, now = take.queue, take.view, take.now
        book = take.book
        state = view.state
        span = self._range(take)
        if span is None:
            return
        end = span[1]
        start_ms = queue.groups.get(view.group, 0)
        if start_ms and view.cursor is None and state.version == 0 and not state.pending:
            self._seek(view, start_ms, end)
        # Query pages are paid by the size of every item read, so read as few batch items as the batch
        # needs: one first, then as many as the messages per item seen so far say are missing.
        limit, seen_items, seen_messages = 1, 0, 0
        reached_end = False  # a fresh Query showed nothing past the read level: only then seal the tail
        for _ in range(_QUERIES_PER_PULL):
            if state.read >= end or len(take.out) >= take.want or book.full:
                break
            read_before = state.read
            if seen_items:
                per_item = max(1, seen_messages // seen_items)
                limit = min(_ITEMS_PER_QUERY, max(2 * limit, -(-(take.want - len(take.out)) // per_item)))
            # Items read by an attempt that lost the state race are reused (batch items never change) —
            # but only if they start where the state does: the winner may have read items written after
            # ours were fetched, and a read level inside an item we never saw must not look like a gap
            # (sealing there would tombstone sequences of a real item).
            items = [it for it in fetched if it.end > state.read]
            at_boundary = state.read == state.read_item
            queried = not items or not (at_boundary or items[0].first <= state.read_item)
            if queried:
                items = list(self.store.scan(view.address, state.read_item, limit=limit))
                fetched[:] = items
            seen_items += len(items)
            seen_messages += sum(i.count for i in items)
            if not self._read_items(take, items, start_ms, end):
                return
            if state.read >= end:
                return
            if queried and len(items) < limit:
                reached_end = True  # every item there was is read: the read level is an item boundary
                break
            if state.read == read_before:
                break  # nothing written past the read level yet
        # A tail allocated long ago and never written: seal it so readers move on.
        if reached_end and state.read < end:
            head = self.head(view)
            if gaps.gap_is_stale(now, head.ts) and self.store.seal_gap(view.address, state.read, end, now):
                book.skip_to(end)
                view.dirty = True

    def _read_items(self, take: _Take, items: list[BatchItem], start_ms: int, end: int) -> bool:
        """Lease from `items` in order, up to `end`; False when the scan must stop here (a young gap, a
        full batch)."""
        view, now, book = take.view, take.now, take.book
        state = view.state
        for item in items:
            if item.end <= state.read:
                continue
            if item.first >= end:
                return True
            if item.first > state.read:  # allocated but never written: wait, then seal
                hole_end = min(item.first, end)
                if not gaps.gap_is_stale(now, item.ts) or not self.store.seal_gap(
                    view.address, state.read, hole_end, now
                ):
                    return False
                book.skip_to(hole_end)
                view.dirty = True
                if hole_end >= end:
                    return True
            # A sealed gap, past retention (TTL), or wholly before the group's start (timestamps >= start)
            if item.gap or item.expired(now) or item.ts < start_ms:
                book.skip_to(min(item.end, end))
                if item.end > end:
                    state.read_item = item.first
                view.dirty = True
                continue
            state.read_item = item.first
            stored = self.store.messages(view.address, item)
            for seq in range(state.read, min(item.end, end)):
                if len(take.out) >= take.want or book.full:
                    return False
                msg = stored[seq - item.first]
                entry = book.first_lease(item.first, now, take.vis)
                delivery = None
                if msg.visible_at_ms <= now:
                    delivery = self.delivery(take.queue, view, seq, entry, {item.first: (item.ts, stored)})
                    if take.budget is not None and not take.budget.admit(delivery):
                        return False  # the response is full: this message stays unread for the next pull
                view.dirty = True
                fresh = book.read_fresh(seq, item.first, msg.visible_at_ms, msg.partition_key, now, entry)
                if fresh is Fresh.LEASED and delivery is not None:
                    take.out.append(delivery)
            if item.end <= end:
                state.read_item = item.end
        return True

    def _seek(self, view: LaneView, start_ms: int, end: int) -> None:
        """Move a new group state past the batch items stamped before `start_ms`: a binary search over
        sequences (item timestamps grow with sequence), O(log n) small queries instead of a scan."""
        state = view.state
        lo, hi = state.read, end
        while hi - lo > 1:
            mid = (lo + hi) // 2
            probe = next((i for i in self.store.scan(view.address, mid, limit=2) if not i.gap), None)
            if probe is None or probe.ts >= start_ms:
                hi = mid
            else:  # everything up to the end of this item predates the start
                lo = probe.end
                if lo > state.read:
                    state.read = state.read_item = lo
                    view.dirty = True

    # --- messages -----------------------------------------------------------------------------------------

    def load(self, view: LaneView, item_starts: set[int], now_ms: int) -> Loaded:
        """The batch items starting at `item_starts` that still hold their messages: {first seq:
        (timestamp, messages)}. An item left out is gone: past its expiry (DynamoDB deletes expired
        items lazily), or deleted by TTL. Read eventually consistently (half the units: an item never
        changes once written), and what that read did not find read again consistently, since an
        eventually consistent read may miss an item written moments ago."""
        if not item_starts:
            return {}
        found = self.store.items(view.address, item_starts, consistent=False)
        if missed := item_starts - found.keys():
            found |= self.store.items(view.address, missed)
        return {
            first: (item.ts, self.store.messages(view.address, item))
            for first, item in found.items()
            if not item.gap and not item.expired(now_ms)
        }

    def message(
        self, view: LaneView, seq: int, entry: Pending, loaded: Loaded
    ) -> tuple[int, StoredMessage] | None:
        found = loaded.get(entry.item)
        if found is None:
            return None
        timestamp, stored = found
        msg = stored[seq - entry.item]
        if msg.overflow_key:
            msg = StoredMessage(
                **{**msg.__dict__, "body": self.store.body(view.address, msg), "overflow_key": None}
            )
        return timestamp, msg

    def delivery(self, queue: Queue, view: LaneView, seq: int, entry: Pending, loaded: Loaded) -> Delivery:
        """The delivery of `seq`, whose item `loaded` holds (the caller left out what is gone)."""
        found = self.message(view, seq, entry, loaded)
        if found is None:
            raise AssertionError(f"no item loaded for sequence {seq}: a gone message must not be delivered")
        timestamp, msg = found
        shard = view.address.id
        lease = Lease(shard=shard, seq=seq, attempt=entry.attempts, group=view.group, lane=view.lane)
        return Delivery(
            id=message_id_at(view.address, seq),
            body=msg.body,
            content_type=msg.content_type,
            timestamp_ms=timestamp,
            attempts=entry.attempts,
            lease_id=self.signer.sign(queue.lease_key, lease),
            partition_key=msg.partition_key,
            attributes=msg.attributes,
            shard=shard,
            seq=seq,
        )

    def dead_letter(
        self, queue: Queue, view: LaneView, book: LeaseBook, seqs: list[int], loaded: Loaded, now: int
    ) -> None:
        """Publish exhausted messages to the DLQ, then drop them from pending (the caller commits).
        Publish first: a crash before the state commit leaves the message pending, so it is moved
        again — at most a duplicate in the DLQ, never a loss. A missing DLQ keeps them pending."""
        state = view.state
        found = [self.message(view, seq, state.pending[seq], loaded) for seq in seqs]
        if self.dead_letters.send(queue, [msg for _, msg in filter(None, found)]):
            book.drop(seqs)
        else:
            book.postpone(seqs, now + deadletter.RETRY_MS)


def lane_key(view: LaneView) -> LaneKey:
    return view.group, view.address.id, view.lane


def drop_acked(view: LaneView, carried: CarriedAcks | None) -> tuple[int, list[str]]:
    """Apply this lane's carried acks to the view's state (as `ack` does: acks are permissive about
    which delivery they name). Returns (acked, warnings); the caller commits."""
    done, warnings = 0, []
    book = LeaseBook(view.state)
    for lease in carried.ops.get(lane_key(view), []) if carried else []:
        if book.ack(lease.seq):
            done += 1
        else:
            warnings.append(gone(view, lease.seq))
    view.dirty = view.dirty or bool(done)
    return done, warnings


def record_carried(carried: CarriedAcks | None, view: LaneView, acked: tuple[int, list[str]]) -> None:
    """Record a lane's carried acks as applied, once its state is committed (or had nothing to write)."""
    if carried and carried.ops.pop(lane_key(view), None) is not None:
        carried.acked[view.group] += acked[0]
        carried.warnings += acked[1]
        if carried.surveyed:
            carried.late[view.group] += acked[0]


def gone(view: LaneView, seq: int) -> str:
    return f"message {message_id_at(view.address, seq)} is already acked or gone; ignored"
