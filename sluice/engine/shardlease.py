"""Leasing from one shard for one group: due redeliveries first, then a scan of fresh batch items from
the read level, then one conditional commit of the new state (`commit.StateCommit`).

A lost race decides again from the winner's state and the items already read (they never change),
so a retry costs one conditional write and the race window stays small. Gaps older than the wait are
sealed on the way (`gaps`); messages stamped before the group's start are skipped; exhausted messages
go to the dead letter sink in the same commit that drops them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from sluice.codec import StoredMessage
from sluice.engine import deadletter, gaps
from sluice.engine.budget import ByteBudget
from sluice.engine.clock import Clock
from sluice.engine.commit import MAX_COMMIT_ATTEMPTS, GroupView, StateCommit
from sluice.engine.deadletter import DeadLetterSink
from sluice.engine.groupstate import Pending
from sluice.engine.leasebook import Fresh, LeaseBook
from sluice.engine.publish import message_id_at
from sluice.engine.store import BatchItem, ShardStore
from sluice.leases import Lease, LeaseSigner
from sluice.models import AckResult, Delivery, Queue

_ITEMS_PER_QUERY = 32  # at most this many batch items per Query page
_QUERIES_PER_PULL = 6  # Query pages per shard and pull (1, then sized from the messages per item seen)
DEAD_LETTERS_PER_PULL = 50  # bounds the BatchGetItem of one pull (≤ 100 keys with the redeliveries)

Loaded = dict[int, tuple[int, Sequence[StoredMessage]]]  # first seq -> (timestamp, messages)


@dataclass
class CarriedAcks:
    """Acks riding on a pull: verified leases by (group, shard) until applied, and the outcome."""

    ops: dict[tuple[str, int], list[Lease]] = field(default_factory=dict)
    acked: Counter[str] = field(default_factory=Counter)  # by group
    warnings: list[str] = field(default_factory=list)

    def result(self) -> AckResult:
        return AckResult(ack_count=self.acked.total(), retry_count=0, warnings=self.warnings)


@dataclass
class _Take:
    """One attempt at leasing from one shard: what to take, and the deliveries taken so far."""

    queue: Queue
    view: GroupView
    group: str
    want: int
    vis: int  # lease length (ms)
    now: int
    budget: ByteBudget | None
    out: list[Delivery] = field(default_factory=list)

    @property
    def book(self) -> LeaseBook:
        return LeaseBook(self.view.state, ordered=self.queue.settings.ordered)

    @property
    def stop(self) -> bool:
        return len(self.out) >= self.want or (self.budget is not None and self.budget.full)


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
        view: GroupView,
        group: str,
        want: int,
        vis: int,
        budget: ByteBudget | None,
        carried: CarriedAcks | None = None,
    ) -> list[Delivery]:
        fetched: list[BatchItem] = []
        mark = budget.mark() if budget else None
        for attempt in range(MAX_COMMIT_ATTEMPTS):
            self.commit.backoff(attempt)
            now = self.clock()
            old_version = view.state.version
            acked = drop_acked(queue, view, group, carried)  # first: an acked message is not redelivered
            take = _Take(queue, view, group, want, vis, now, budget)
            self._take_due(take)
            book = take.book
            if len(take.out) < want and not book.full and not (budget and budget.full):
                self._take_fresh(take, fetched)
            if not view.dirty:
                record_carried(carried, group, view, acked)
                return []
            if not self.commit.save(view, group, old_version):
                if budget and mark:
                    budget.reset(mark)
                continue
            record_carried(carried, group, view, acked)
            return take.out
        raise self.commit.exhausted("pulling")

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
        loaded = self.load(view, {state.pending[s].item for s in due.exhausted + redeliver})
        if due.exhausted:
            self.dead_letter(queue, view, book, due.exhausted, loaded, take.now)
        for seq in redeliver:
            offered = book.redelivery(seq, take.now, take.vis)
            delivery = self.delivery(queue, view, take.group, seq, offered, loaded)
            if take.budget is not None and not take.budget.admit(delivery):
                break  # the response is full: the rest stay due, unleased, for the next pull
            book.lease(seq, offered)
            take.out.append(delivery)
        view.dirty = True

    def _take_fresh(self, take: _Take, fetched: list[BatchItem]) -> None:
        """Scan batch items from the read level. Messages published before the group's start are
        skipped; a scan that only skipped goes on (a few queries per pull) instead of answering empty."""
        queue, view, group, now = take.queue, take.view, take.group, take.now
        book = take.book
        state = view.state
        start_ms = queue.groups.get(group, 0)
        if start_ms and state.version == 0 and not state.pending:
            self._seek(view, start_ms)
        # Query pages are paid by the size of every item read, so read as few batch items as the batch
        # needs: one first, then as many as the messages per item seen so far say are missing.
        limit, seen_items, seen_messages = 1, 0, 0
        reached_end = False  # a fresh Query showed nothing past the read level: only then seal the tail
        for _ in range(_QUERIES_PER_PULL):
            if state.read >= view.head.next or len(take.out) >= take.want or book.full:
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
            if not self._read_items(take, items, start_ms):
                return
            if queried and len(items) < limit:
                reached_end = True  # every item there was is read: the read level is an item boundary
                break
            if state.read == read_before:
                break  # nothing written past the read level yet
        # A tail allocated long ago and never written: seal it so readers move on.
        head = view.head
        tail_stalled = reached_end and state.read < head.next and gaps.gap_is_stale(now, head.ts)
        if tail_stalled and self.store.seal_gap(view.address, state.read, head.next, now):
            book.skip_to(head.next)
            view.dirty = True

    def _read_items(self, take: _Take, items: list[BatchItem], start_ms: int) -> bool:
        """Lease from `items` in order; False when the scan must stop here (a young gap, a full batch)."""
        view, now, book = take.view, take.now, take.book
        state = view.state
        for item in items:
            if item.end <= state.read:
                continue
            if item.first > state.read:  # allocated but never written: wait, then seal
                if not gaps.gap_is_stale(now, item.ts) or not self.store.seal_gap(
                    view.address, state.read, item.first, now
                ):
                    return False
                book.skip_to(item.first)
                view.dirty = True
            # A sealed gap, past retention (TTL), or wholly before the group's start (timestamps >= start)
            if item.gap or item.expired(now) or item.ts < start_ms:
                book.skip_to(item.end)
                view.dirty = True
                continue
            state.read_item = item.first
            stored = self.store.messages(view.address, item)
            for seq in range(state.read, item.end):
                if len(take.out) >= take.want or book.full:
                    return False
                msg = stored[seq - item.first]
                entry = book.first_lease(item.first, now, take.vis)
                delivery = None
                if msg.visible_at_ms <= now:
                    delivery = self.delivery(
                        take.queue, view, take.group, seq, entry, {item.first: (item.ts, stored)}
                    )
                    if take.budget is not None and not take.budget.admit(delivery):
                        return False  # the response is full: this message stays unread for the next pull
                view.dirty = True
                fresh = book.read_fresh(seq, item.first, msg.visible_at_ms, msg.partition_key, now, entry)
                if fresh is Fresh.LEASED and delivery is not None:
                    take.out.append(delivery)
            state.read_item = item.end
        return True

    def _seek(self, view: GroupView, start_ms: int) -> None:
        """Move a new group state past the batch items stamped before `start_ms`: a binary search over
        sequences (item timestamps grow with sequence), O(log n) small queries instead of a scan."""
        state = view.state
        lo, hi = state.read, view.head.next
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

    def load(self, view: GroupView, item_starts: set[int]) -> Loaded:
        """The batch items starting at `item_starts`: {first seq: (timestamp, messages)}."""
        if not item_starts:
            return {}
        found = self.store.items(view.address, item_starts, consistent=False)
        return {
            first: (item.ts, self.store.messages(view.address, item))
            for first, item in found.items()
            if not item.gap
        }

    def message(
        self, view: GroupView, seq: int, entry: Pending, loaded: Loaded
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

    def delivery(
        self, queue: Queue, view: GroupView, group: str, seq: int, entry: Pending, loaded: Loaded
    ) -> Delivery:
        found = self.message(view, seq, entry, loaded)
        timestamp, msg = found if found else (0, StoredMessage(body=b"null"))
        shard = view.address.id
        lease = Lease(shard=shard, seq=seq, attempt=entry.attempts, group=group)
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
        self, queue: Queue, view: GroupView, book: LeaseBook, seqs: list[int], loaded: Loaded, now: int
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


def drop_acked(
    queue: Queue, view: GroupView, group: str, carried: CarriedAcks | None
) -> tuple[int, list[str]]:
    """Apply this shard's carried acks to the view's state (as `ack` does: acks are permissive about
    which delivery they name). Returns (acked, warnings); the caller commits."""
    done, warnings = 0, []
    book = LeaseBook(view.state)
    for lease in carried.ops.get((group, view.address.id), []) if carried else []:
        if book.ack(lease.seq):
            done += 1
        else:
            warnings.append(gone(view, lease.seq))
    view.dirty = view.dirty or bool(done)
    return done, warnings


def record_carried(
    carried: CarriedAcks | None, group: str, view: GroupView, acked: tuple[int, list[str]]
) -> None:
    """Record a shard's carried acks as applied, once its state is committed (or had nothing to write)."""
    if carried and carried.ops.pop((group, view.address.id), None) is not None:
        carried.acked[group] += acked[0]
        carried.warnings += acked[1]


def gone(view: GroupView, seq: int) -> str:
    return f"message {message_id_at(view.address, seq)} is already acked or gone; ignored"
