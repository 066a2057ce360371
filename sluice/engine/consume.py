"""Pull consumers: leases, acks, retries, lease extension, dead letters and gap repair.

A pull reads the group's state and the head of a sample of shards in one BatchGetItem, scans fresh
batch items on the shards with work, and commits each shard's new state with a conditional write on
its version: concurrent pullers never lease the same message, the loser re-reads and tries again.
The cost is per batch, not per message.

Multi-region (docs/design.md "Multi-region"): a pull reads its own region's shards first and other
regions' when its batch has room (and first on a share of pulls, so no region waits behind a busy
one); acks, retries and extends go to the lease's shard's region. A region that cannot be reached is
skipped for a cool-down (`sluice.engine.regions.RegionBreaker`): pulls answer from the others, acks
for its shards fail retryably, and its messages are delivered once it is back.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from sluice import errors, faults
from sluice.adapters import aws
from sluice.adapters.dynamo import ConditionFailed, Table, batch_get_across
from sluice.codec import StoredMessage, decode_batch
from sluice.engine import gaps, keys, ordering
from sluice.engine.backend import Backend
from sluice.engine.budget import ByteBudget
from sluice.engine.groupstate import GroupState, Pending
from sluice.engine.publish import Publisher, message_id, request_batches
from sluice.engine.queues import QueueDirectory
from sluice.engine.regions import RegionBreaker, by_region, region_key
from sluice.engine.shardstate import ShardRead, ShardStateReader, apply_floor, state_from
from sluice.engine.streams import expired
from sluice.leases import Lease, LeaseSigner
from sluice.models import AckResult, Delivery, LeasedBatch, OutgoingMessage, Queue, Shard

SHARDS_PER_PULL = 8  # shards sampled per pull: one BatchGetItem of 2 items each
MAX_PENDING = 5_000  # leased + delayed messages per shard and group: bounds the state item
GAP_WAIT_MS = gaps.GAP_WAIT_MS
_ITEMS_PER_QUERY = 32  # at most this many batch items per Query page
_QUERIES_PER_PULL = 6  # Query pages per shard and pull (1, then sized from the messages per item seen)
_DEAD_LETTERS_PER_PULL = 50  # bounds the BatchGetItem of one pull (≤ 100 keys with the redeliveries)
LONG_POLL_MAX_INTERVAL = 0.25  # seconds between the polls of a long-poll pull: ≤ 250 ms late, 1 read each
OTHER_REGION_FIRST = 0.25  # the share of pulls that read another region before their own
_MAX_COMMIT_ATTEMPTS = 30


class Op(Enum):
    """What an ack-path request does to a pending message."""

    ACK = "ack"
    RETRY = "retry"  # back to the queue after a delay (or to the DLQ when out of deliveries)
    EXTEND = "extend"  # push the lease deadline out


@dataclass
class RetryRequest:
    lease_id: str
    delay_seconds: int | None = None


@dataclass
class _ShardView:
    shard: Shard
    table: Table
    pk: str
    state: GroupState
    head_next: int
    head_ts: int
    dirty: bool = False  # the state changed and must be committed
    floor: int = 0  # the shard's purge floor (HEAD `floor`)

    @classmethod
    def of(cls, read: ShardRead, group: str) -> _ShardView:
        head = read.head
        state = read.states[group]
        return cls(
            read.shard, read.table, read.pk, state, head.next, head.ts, group in read.floored, head.floor
        )

    @property
    def work(self) -> int:
        return self.head_next - self.state.read + len(self.state.pending)


@dataclass
class _Take:
    """One attempt at leasing from one shard: what to take, and the deliveries taken so far."""

    queue: Queue
    view: _ShardView
    group: str
    want: int
    vis: int  # lease length (ms)
    now: int
    budget: ByteBudget | None
    out: list[Delivery] = field(default_factory=list)

    def fields(
        self,
    ) -> tuple[Queue, _ShardView, str, int, int, int, list[Delivery], ByteBudget | None]:
        return self.queue, self.view, self.group, self.want, self.vis, self.now, self.out, self.budget


class Consumer:
    def __init__(
        self,
        backend: Backend,
        directory: QueueDirectory,
        publisher: Publisher,
        signer: LeaseSigner,
        breaker: RegionBreaker | None = None,
    ) -> None:
        self.backend = backend
        self.directory = directory
        self.publisher = publisher
        self.signer = signer
        self.shard_states = ShardStateReader(backend)
        self.breaker = breaker or RegionBreaker()

    # --- pull ---------------------------------------------------------------------------------------------

    def pull(
        self,
        queue_name: str,
        *,
        group: str,
        batch_size: int,
        visibility_ms: int | None = None,
        wait_ms: int = 0,
        size_of: Callable[[Delivery], int] | None = None,
        max_bytes: int = 0,
        acks: Sequence[str] | None = None,
    ) -> LeasedBatch:
        """Lease up to `batch_size` messages; with `wait_ms`, wait for the first ones to arrive. With
        `size_of`, only as many as add up to `max_bytes` in the caller's encoding (see engine/budget.py):
        the rest are not leased. `acks` (lease ids) are applied as `ack` would, in the same state write
        as the pull's on the shards it touches: one write instead of two (`result.ack` tells how)."""
        deadline = time.monotonic() + wait_ms / 1000
        # Every region is read once; after that, while the pull waits, another region's read starts only
        # if it ends (REMOTE_CALL_SECONDS at worst) before the deadline: a long pull against a region
        # that hangs still answers on time.
        remote_until = float("inf")
        delay = 0.05
        carried = None if acks is None else self._carry(self.directory.get(queue_name), acks)
        acked = None
        while True:
            budget = ByteBudget(max_bytes, size_of) if size_of else None
            result = self._pull_once(
                queue_name, group, batch_size, visibility_ms, budget, carried, remote_until
            )
            remote_until = deadline
            if carried is not None:
                acked, carried = carried.result(), None  # applied once: the polls that follow only pull
            result.ack = acked
            if result.messages or time.monotonic() >= deadline:
                return result
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, LONG_POLL_MAX_INTERVAL)

    def _pull_once(
        self,
        queue_name: str,
        group: str,
        batch_size: int,
        visibility_ms: int | None,
        budget: ByteBudget | None,
        carried: _CarriedAcks | None = None,
        remote_until: float = float("inf"),
    ) -> LeasedBatch:
        queue = self.directory.get(queue_name)
        if queue.paused or group not in queue.groups:
            # The cached document may lag a resume or a new group: confirm with the control item (rare).
            queue = self.directory.registry.get(queue_name)
        if queue.paused:
            raise errors.QueuePaused(f"queue {queue_name!r} is paused; resume it to pull")
        if group not in queue.groups:
            raise errors.ConsumerGroupNotFound(f"consumer group {group!r} not found on queue {queue_name!r}")
        vis = visibility_ms or queue.settings.visibility_timeout_ms
        deliveries: list[Delivery] = []
        backlog = answered = skipped = 0
        for index, (region, shards) in enumerate(self._regions_in_pull_order(queue)):
            if index and (len(deliveries) >= batch_size or (budget and budget.full)):
                continue  # a later region is read only when the batch has room (carried acks: _ack_rest)
            if not self.breaker.allows(region):
                skipped += 1
                continue
            remote = region not in (None, self.backend.region)
            if remote and time.monotonic() + aws.REMOTE_CALL_SECONDS > remote_until:
                continue  # too late for another region's worst case: the pull answers on time without it
            try:
                got, work = self._pull_region(
                    queue, shards, group, batch_size - len(deliveries), vis, budget, carried
                )
            except errors.DependencyUnavailable:
                if region is None:
                    raise  # a single region: nothing else to answer from
                self.breaker.trip(region)
                skipped += 1
                continue
            answered += 1
            deliveries += got
            backlog += work
        if skipped and not answered:
            raise errors.DependencyUnavailable(
                f"no region of queue {queue_name!r} can be reached; retry shortly"
            )
        if carried:
            self._ack_rest(queue, carried)
            backlog = max(0, backlog - carried.acked[group])  # read before the acks were applied
        return LeasedBatch(messages=deliveries, message_backlog_count=backlog)  # unacked, in flight included

    def _regions_in_pull_order(self, queue: Queue) -> list[tuple[str | None, list[Shard]]]:
        """The readable shards by region, this region's first; on a share of pulls another region's
        first, so a consumer whose own region always fills its batch still drains the others."""
        ordered = by_region(self.backend, queue.readable_shards)
        if len(ordered) > 1 and random.random() < OTHER_REGION_FIRST:
            ordered.insert(0, ordered.pop(random.randrange(1, len(ordered))))
        return ordered

    def _pull_region(
        self,
        queue: Queue,
        shards: list[Shard],
        group: str,
        want: int,
        vis: int,
        budget: ByteBudget | None,
        carried: _CarriedAcks | None,
    ) -> tuple[list[Delivery], int]:
        """Lease up to `want` from a sample of `shards` (one region's): (deliveries, estimated backlog)."""
        sample = random.sample(shards, min(SHARDS_PER_PULL, len(shards)))
        if carried:  # read the shards the acks are for too, so their acks share the pull's write
            sample += [s for s in shards if (group, s.id) in carried.ops and s not in sample]
        views = self._read_views(queue, sample, group)
        backlog = sum(v.work for v in views)
        if self.directory.get(queue.name).paused:  # a HEAD just said so (the stamp of a pause)
            return [], backlog
        if len(sample) < len(shards) and sample:
            backlog = backlog * len(shards) // len(sample)  # an estimate when not every shard was read
        deliveries: list[Delivery] = []
        random.shuffle(views)  # not fullest-first: every puller would pick the same shard (bench/twin)
        for view in (v for v in views if v.work > 0):
            if len(deliveries) >= want or (budget and budget.full):
                break
            try:
                left = want - len(deliveries)
                deliveries += self._pull_shard(queue, view, group, left, vis, budget, carried)
            except errors.DependencyUnavailable:
                region = region_key(self.backend, view.shard)
                if region is None or not deliveries:
                    raise
                self.breaker.trip(region)
                break  # keep what was leased (committed): the rest of the region waits for its return
        return deliveries, backlog

    def _read_views(self, queue: Queue, shards: Sequence[Shard], group: str) -> list[_ShardView]:
        reads = self.shard_states.read(queue, shards, [group])
        for read in reads:  # a HEAD stamped with a newer map: the next pull reads the new shards too
            self.directory.observe_stamp(queue, read.shard, read.head.map_version, read.head.map_route)
        return [_ShardView.of(read, group) for read in reads]

    def _pull_shard(
        self,
        queue: Queue,
        view: _ShardView,
        group: str,
        want: int,
        vis: int,
        budget: ByteBudget | None,
        carried: _CarriedAcks | None = None,
    ) -> list[Delivery]:
        """Lease from one shard. A lost race retries from the winner's state and the items already read
        (they never change), so a retry costs one conditional write: the race window stays small."""
        fetched: list[dict[str, Any]] = []
        mark = budget.mark() if budget else None
        for attempt in range(_MAX_COMMIT_ATTEMPTS):
            if attempt:
                _backoff(attempt)
            now = self.backend.clock()
            state = view.state
            old_version = state.version
            acked = _drop_acked(queue, view, group, carried)  # first: an acked message is not redelivered
            take = _Take(queue, view, group, want, vis, now, budget)
            deliveries = take.out
            self._take_due(take)
            if len(deliveries) < want and len(state.pending) < MAX_PENDING and not (budget and budget.full):
                self._take_fresh(take, fetched)
            if not view.dirty:
                _record_carried(carried, group, view, acked)
                return []
            try:
                self._commit(view, group, old_version)
            except ConditionFailed as exc:
                view = _lost_race(view, exc)
                if budget and mark:
                    budget.reset(mark)
                continue
            _record_carried(carried, group, view, acked)
            return deliveries
        raise errors.Throttled("too many consumers are pulling this shard at once; retry shortly")

    def _take_due(self, take: _Take) -> None:
        """Redeliver pending messages whose lease or delay ran out; dead-letter those out of deliveries."""
        queue, view, group, want, vis, now, out, budget = take.fields()
        state = view.state
        due = state.due(now)
        if not due:
            return
        max_deliveries = max(1, queue.settings.max_retries)
        exhausted_all = [
            s for s in due if state.pending[s].leased and state.pending[s].attempts >= max_deliveries
        ]
        exhausted = exhausted_all[:_DEAD_LETTERS_PER_PULL]
        redeliver = [s for s in due if s not in set(exhausted_all)]
        if queue.settings.ordered:
            redeliver = ordering.deliverable(state, redeliver)
            if not exhausted and not redeliver:
                return  # only messages waiting behind their key's lease: nothing changes
        redeliver = redeliver[:want]
        messages = self._load(view, {state.pending[s].item for s in exhausted + redeliver})
        if exhausted:
            self._dead_letter(queue, view, exhausted, messages)
        for seq in redeliver:
            entry = state.pending[seq]
            offered = Pending(item=entry.item, due_ms=now + vis, attempts=entry.attempts + 1, leased=True)
            delivery = self._delivery(queue, view, group, seq, offered, messages)
            if budget is not None and not budget.admit(delivery):
                break  # the response is full: the rest stay due, unleased, for the next pull
            state.pending[seq] = offered
            out.append(delivery)
        view.dirty = True

    def _take_fresh(self, take: _Take, fetched: list[dict[str, Any]]) -> None:
        """Scan batch items from the read level. Messages published before the group's start are
        skipped; a scan that only skipped goes on (a few queries per pull) instead of answering empty."""
        queue, view, group, want, vis, now, out, budget = take.fields()
        state = view.state
        start_ms = queue.groups.get(group, 0)
        if start_ms and state.version == 0 and not state.pending:
            self._seek(view, start_ms)
        # Query pages are paid by the size of every item read, so read as few batch items as the batch
        # needs: one first, then as many as the messages per item seen so far say are missing.
        limit, seen_items, seen_messages = 1, 0, 0
        reached_end = False  # a fresh Query showed nothing past the read level: only then seal the tail
        for _ in range(_QUERIES_PER_PULL):
            if state.read >= view.head_next or len(out) >= want or len(state.pending) >= MAX_PENDING:
                break
            read_before = state.read
            if seen_items:
                per_item = max(1, seen_messages // seen_items)
                limit = min(_ITEMS_PER_QUERY, max(2 * limit, -(-(want - len(out)) // per_item)))
            # Items read by an attempt that lost the state race are reused (batch items never change) —
            # but only if they start where the state does: the winner may have read items written after
            # ours were fetched, and a read level inside an item we never saw must not look like a gap
            # (sealing there would tombstone sequences of a real item).
            items = [it for it in fetched if keys.seq_of(it[keys.SK]) + it[keys.ITEM_COUNT] > state.read]
            at_boundary = state.read == state.read_item
            queried = not items or not (at_boundary or keys.seq_of(items[0][keys.SK]) <= state.read_item)
            if queried:
                items = list(
                    view.table.query(
                        view.pk, sk_from=keys.msg_sk(state.read_item), sk_to=keys.MSG_SK_END, limit=limit
                    )
                )
                fetched[:] = items
            seen_items += len(items)
            seen_messages += sum(i[keys.ITEM_COUNT] for i in items)
            for item in items:
                first, count = keys.seq_of(item[keys.SK]), item[keys.ITEM_COUNT]
                if first + count <= state.read:
                    continue
                if first > state.read:  # allocated but never written: wait, then seal
                    if now - item[keys.ITEM_TS] < GAP_WAIT_MS or not self._seal_gap(view, state.read, first):
                        return
                    state.read = state.read_item = first
                    view.dirty = True
                # A sealed gap, or past retention (TTL): gone.
                if item.get(keys.ITEM_GAP) or expired(item, now):
                    state.read = state.read_item = first + count
                    view.dirty = True
                    continue
                state.read_item = first
                # The whole item predates the group's start (timestamps >= start).
                if item[keys.ITEM_TS] < start_ms:
                    state.read = state.read_item = first + count
                    view.dirty = True
                    continue
                stored = list(decode_batch(item[keys.ITEM_DATA]))
                for seq in range(state.read, first + count):
                    if len(out) >= want or len(state.pending) >= MAX_PENDING:
                        return
                    msg = stored[seq - first]
                    visible = msg.visible_at_ms <= now
                    if visible:
                        entry = Pending(item=first, due_ms=now + vis, attempts=1, leased=True)
                        delivery = self._delivery(
                            queue, view, group, seq, entry, {first: (item[keys.ITEM_TS], stored)}
                        )
                        if budget is not None and not budget.admit(delivery):
                            return  # the response is full: this message stays unread for the next pull
                    state.read = seq + 1
                    view.dirty = True
                    if not visible:  # delayed: parked in pending, it blocks nothing behind it
                        state.pending[seq] = Pending(
                            item=first, due_ms=msg.visible_at_ms, attempts=0, leased=False
                        )
                        continue
                    if queue.settings.ordered and ordering.hold_fresh(
                        state, seq, first, msg.partition_key, now
                    ):
                        continue  # an earlier message with its key is still pending
                    state.pending[seq] = entry
                    out.append(delivery)
                state.read_item = first + count
            if queried and len(items) < limit:
                reached_end = True  # every item there was is read: the read level is an item boundary
                break
            if state.read == read_before:
                break  # nothing written past the read level yet
        # A tail allocated long ago and never written: seal it so readers move on.
        tail_stalled = reached_end and state.read < view.head_next and now - view.head_ts >= GAP_WAIT_MS
        if tail_stalled and self._seal_gap(view, state.read, view.head_next):
            state.read = state.read_item = view.head_next
            view.dirty = True

    def _seek(self, view: _ShardView, start_ms: int) -> None:
        """Move a new group state past the batch items stamped before `start_ms`: a binary search over
        sequences (item timestamps grow with sequence), O(log n) small queries instead of a scan."""
        state = view.state
        lo, hi = state.read, view.head_next
        while hi - lo > 1:
            mid = (lo + hi) // 2
            probe = next(
                (
                    i
                    for i in view.table.query(
                        view.pk, sk_from=keys.msg_sk(mid), sk_to=keys.MSG_SK_END, limit=2
                    )
                    if not i.get(keys.ITEM_GAP)
                ),
                None,
            )
            if probe is None or probe[keys.ITEM_TS] >= start_ms:
                hi = mid
            else:  # everything up to the end of this item predates the start
                lo = keys.seq_of(probe[keys.SK]) + probe[keys.ITEM_COUNT]
                if lo > state.read:
                    state.read = state.read_item = lo
                    view.dirty = True

    def _seal_gap(self, view: _ShardView, start: int, end: int) -> bool:
        """Tombstone every sequence in [start, end) (see sluice.engine.gaps)."""
        return gaps.seal_gap(view.table, view.pk, start, end, self.backend.clock())

    # --- acks carried on a pull ---------------------------------------------------------------------------

    def _carry(self, queue: Queue, lease_ids: Sequence[str]) -> _CarriedAcks:
        """Verify the leases up front (the same answers as `ack` for a lease that is not valid)."""
        carried = _CarriedAcks()
        for lease_id in lease_ids:
            if lease := self._verify(queue, lease_id, carried.warnings):
                carried.ops.setdefault((lease.group, lease.shard), []).append(lease)
        self._check_reachable(queue, (shard for _, shard in carried.ops))
        return carried

    def _ack_rest(self, queue: Queue, carried: _CarriedAcks) -> None:
        """Acks the pull could not fold into its own writes (another group's leases, a shard it did
        not lease from): applied as `ack` applies them, one write per shard."""
        queue = self._confirm_leased(queue, carried.ops)
        for (group, shard_id), leases in carried.ops.items():
            with self.breaker.guard(self._region(queue, shard_id)):
                done, _, warnings = self._apply(queue, group, shard_id, [(Op.ACK, x, None) for x in leases])
            carried.acked[group] += done
            carried.warnings += warnings
        carried.ops.clear()

    # --- ack, retry, extend -----------------------------------------------------------------------------

    def ack(
        self,
        queue_name: str,
        acks: Iterable[str],
        retries: Iterable[RetryRequest] = (),
        *,
        max_retries: int | None = None,  # a push consumer's own limit instead of the queue's
    ) -> AckResult:
        """Ack messages and hand others back for redelivery (after their delay), by lease id."""
        requested = [(Op.ACK, a, None) for a in acks] + [
            (Op.RETRY, r.lease_id, r.delay_seconds) for r in retries
        ]
        acked, retried, warnings = self._settle(queue_name, requested, max_retries)
        return AckResult(ack_count=acked, retry_count=retried, warnings=warnings)

    def extend(self, queue_name: str, lease_ids: Iterable[str], visibility_ms: int) -> AckResult:
        """Push lease deadlines `visibility_ms` from now (SQS ChangeMessageVisibility)."""
        requested: list[tuple[Op, str, int | None]] = [
            (Op.EXTEND, lease_id, visibility_ms) for lease_id in lease_ids
        ]
        extended, _, warnings = self._settle(queue_name, requested, None)
        return AckResult(ack_count=extended, retry_count=0, warnings=warnings)

    def _settle(
        self, queue_name: str, requested: list[tuple[Op, str, int | None]], max_retries: int | None
    ) -> tuple[int, int, list[str]]:
        """Verify every lease id, then apply the operations shard by shard: (done, retried, warnings)."""
        queue = self.directory.get(queue_name)
        warnings: list[str] = []
        ops: dict[tuple[str, int], list[tuple[Op, Lease, int | None]]] = {}
        for op, lease_id, value in requested:
            if lease := self._verify(queue, lease_id, warnings):
                ops.setdefault((lease.group, lease.shard), []).append((op, lease, value))
        queue = self._confirm_leased(queue, ops)
        self._check_reachable(queue, (shard for _, shard in ops))
        done = retried = 0
        unreachable: set[str] = set()
        for (group, shard_id), shard_ops in ops.items():
            region = self._region(queue, shard_id)
            try:
                with self.breaker.guard(region):
                    d, r, w = self._apply(queue, group, shard_id, shard_ops, max_retries)
            except errors.DependencyUnavailable:
                if region is None:
                    raise
                unreachable.add(region)  # the other regions' shards are still settled
                continue
            done, retried = done + d, retried + r
            warnings += w
        if unreachable:
            raise errors.DependencyUnavailable(
                f"region {', '.join(sorted(unreachable))} is unreachable: its shards' acks were not "
                "applied; send them again shortly (the others were applied)"
            )
        return done, retried, warnings

    def _region(self, queue: Queue, shard_id: int) -> str | None:
        shard = queue.shard(shard_id)
        return None if shard is None else region_key(self.backend, shard)

    def _check_reachable(self, queue: Queue, shard_ids: Iterable[int]) -> None:
        """Refuse, before anything changes, acks for a shard whose region is cooling down (retryable)."""
        for region in {self._region(queue, shard_id) for shard_id in shard_ids}:
            self.breaker.check(region)

    def _verify(self, queue: Queue, lease_id: str, warnings: list[str]) -> Lease | None:
        """The lease this queue signed, or None and a warning: one answer for acks, retries, extends
        and acks carried on a pull."""
        lease = self.signer.verify(queue.lease_key, lease_id)
        if lease is None:
            warnings.append(f"lease_id {lease_id!r} is not a valid lease on queue {queue.name!r}; ignored")
        return lease

    def _apply(
        self,
        queue: Queue,
        group: str,
        shard_id: int,
        ops: list[tuple[Op, Lease, int | None]],
        max_retries: int | None = None,
    ) -> tuple[int, int, list[str]]:
        shard = queue.shard(shard_id)
        if shard is None or group not in queue.groups:
            return (
                0,
                0,
                [f"lease on shard {shard_id} of group {group!r} no longer exists; ignored"] * len(ops),
            )
        max_deliveries = max(1, queue.settings.max_retries if max_retries is None else max_retries)
        view = self._read_views(queue, [shard], group)[0]
        for attempt in range(_MAX_COMMIT_ATTEMPTS):
            if attempt:
                _backoff(attempt)
            state, now = view.state, self.backend.clock()
            old_version = state.version
            done = retried = 0
            warnings: list[str] = []
            exhausted: list[int] = []
            for op, lease, value in ops:
                entry = state.pending.get(lease.seq)
                if entry is None:
                    warnings.append(_gone(queue, shard_id, lease.seq))
                    continue
                if op is Op.ACK:
                    del state.pending[lease.seq]
                    done += 1
                elif not _is_current(entry, lease):
                    # An older delivery's lease: the message now belongs to a later puller (or waits
                    # for one). Extending or retrying it would take the message away from that puller.
                    warnings.append(
                        f"lease for message {message_id(queue, shard_id, lease.seq)} has expired; "
                        "the message was or will be delivered again"
                    )
                elif op is Op.EXTEND:
                    entry.due_ms = now + (value or 0)
                    done += 1
                else:
                    retried += 1
                    if entry.attempts >= max_deliveries:
                        exhausted.append(lease.seq)
                        continue
                    delay = queue.settings.retry_delay_seconds if value is None else value
                    entry.leased, entry.due_ms = False, now + delay * 1000
            if exhausted:
                messages = self._load(view, {state.pending[s].item for s in exhausted})
                self._dead_letter(queue, view, exhausted, messages)
            if done == retried == 0:
                return 0, 0, warnings
            try:
                self._commit(view, group, old_version)
            except ConditionFailed as exc:
                view = _lost_race(view, exc)
                continue
            return done, retried, warnings
        raise errors.Throttled("too many consumers are acking this shard at once; retry shortly")

    # --- helpers ----------------------------------------------------------------------------------------

    def _confirm_leased(self, queue: Queue, leased: Iterable[tuple[str, int]]) -> Queue:
        """The cached document may not know a group created, or a shard added, seconds ago (another
        container leased from its fresher copy): confirm with the control item before an ack, retry
        or extend is declared gone, or the message would come back after its lease."""
        known = {s.id for s in queue.shards}
        if all(group in queue.groups and shard_id in known for group, shard_id in leased):
            return queue
        return self.directory.registry.get(queue.name)

    def _commit(self, view: _ShardView, group: str, old_version: int) -> None:
        state = view.state
        item = {
            keys.PK: view.pk,
            keys.SK: keys.group_state_sk(group),
            keys.STATE_VERSION: old_version + 1,
            keys.STATE_BLOB: state.encode(),
        }
        if old_version == 0:
            view.table.put(item, condition=keys.NEW_ITEM)
        else:
            view.table.put(item, condition=f"{keys.STATE_VERSION} = :v", values={":v": old_version})
        state.version = old_version + 1

    def _load(self, view: _ShardView, item_starts: set[int]) -> dict[int, tuple[int, list[StoredMessage]]]:
        """The batch items starting at `item_starts`: {first seq: (timestamp, messages)}."""
        if not item_starts:
            return {}
        starts = sorted(item_starts)
        found: dict[tuple[str, str, str], dict[str, Any]] = {}
        for lo in range(0, len(starts), 100):  # BatchGetItem takes at most 100 keys
            found |= batch_get_across(
                {view.table: [(view.pk, keys.msg_sk(s)) for s in starts[lo : lo + 100]]}, consistent=False
            )
        return {
            keys.seq_of(item[keys.SK]): (item[keys.ITEM_TS], list(decode_batch(item[keys.ITEM_DATA])))
            for item in found.values()
            if not item.get(keys.ITEM_GAP)
        }

    def _message(
        self, view: _ShardView, seq: int, entry: Pending, messages: dict[int, tuple[int, list[StoredMessage]]]
    ) -> tuple[int, StoredMessage] | None:
        loaded = messages.get(entry.item)
        if loaded is None:
            return None
        timestamp, stored = loaded
        msg = stored[seq - entry.item]
        if msg.overflow_key:
            body = self.backend.bucket_for(view.shard).get(msg.overflow_key) or b""
            msg = StoredMessage(**{**msg.__dict__, "body": body, "overflow_key": None})
        return timestamp, msg

    def _delivery(
        self,
        queue: Queue,
        view: _ShardView,
        group: str,
        seq: int,
        entry: Pending,
        messages: dict[int, tuple[int, list[StoredMessage]]],
    ) -> Delivery:
        found = self._message(view, seq, entry, messages)
        timestamp, msg = found if found else (0, StoredMessage(body=b"null"))
        lease = Lease(shard=view.shard.id, seq=seq, attempt=entry.attempts, group=group)
        return Delivery(
            id=message_id(queue, view.shard.id, seq),
            body=msg.body,
            content_type=msg.content_type,
            timestamp_ms=timestamp,
            attempts=entry.attempts,
            lease_id=self.signer.sign(queue.lease_key, lease),
            partition_key=msg.partition_key,
            attributes=msg.attributes,
            shard=view.shard.id,
            seq=seq,
        )

    def _dead_letter(
        self,
        queue: Queue,
        view: _ShardView,
        seqs: list[int],
        messages: dict[int, tuple[int, list[StoredMessage]]],
    ) -> None:
        """Publish exhausted messages to the DLQ, then drop them from pending (the caller commits).

        Publish first: a crash before the state commit leaves the message pending, so it is moved
        again — at most a duplicate in the DLQ, never a loss.
        """
        state = view.state
        dlq = queue.settings.dead_letter_queue
        if dlq:
            outgoing = []
            for seq in seqs:
                found = self._message(view, seq, state.pending[seq], messages)
                if found is None:
                    continue
                _, msg = found
                outgoing.append(
                    OutgoingMessage(
                        body=msg.body,
                        content_type=msg.content_type,
                        partition_key=msg.partition_key,
                        attributes={**msg.attributes, "sluice-source-queue": queue.name},
                    )
                )
            for part in request_batches(outgoing):
                try:
                    self.publisher.publish(dlq, part)
                except errors.QueueNotFound:  # deleted since it was configured: created again, as at setup
                    self.directory.registry.ensure_dead_letter(dlq, queue.settings)
                    self.publisher.publish(dlq, part)
            faults.crash_point(faults.DLQ_AFTER_WRITE)
        for seq in seqs:
            del state.pending[seq]


@dataclass
class _CarriedAcks:
    """Acks riding on a pull: verified leases by (group, shard) until applied, and the outcome."""

    ops: dict[tuple[str, int], list[Lease]] = field(default_factory=dict)
    acked: Counter[str] = field(default_factory=Counter)  # by group
    warnings: list[str] = field(default_factory=list)

    def result(self) -> AckResult:
        return AckResult(ack_count=self.acked.total(), retry_count=0, warnings=self.warnings)


def _drop_acked(
    queue: Queue, view: _ShardView, group: str, carried: _CarriedAcks | None
) -> tuple[int, list[str]]:
    """Apply this shard's carried acks to the view's state (as `ack` does: acks are permissive about
    which delivery they name). Returns (acked, warnings); the caller commits."""
    done, warnings = 0, []
    for lease in carried.ops.get((group, view.shard.id), []) if carried else []:
        if view.state.pending.pop(lease.seq, None) is None:
            warnings.append(_gone(queue, view.shard.id, lease.seq))
        else:
            done += 1
    view.dirty = view.dirty or bool(done)
    return done, warnings


def _record_carried(
    carried: _CarriedAcks | None, group: str, view: _ShardView, acked: tuple[int, list[str]]
) -> None:
    """Record a shard's carried acks as applied, once its state is committed (or had nothing to write)."""
    if carried and carried.ops.pop((group, view.shard.id), None) is not None:
        carried.acked[group] += acked[0]
        carried.warnings += acked[1]


def _gone(queue: Queue, shard_id: int, seq: int) -> str:
    return f"message {message_id(queue, shard_id, seq)} is already acked or gone; ignored"


def _lost_race(view: _ShardView, exc: ConditionFailed) -> _ShardView:
    """The view with the winner's state, which the failed condition handed back: no re-read needed."""
    state = state_from(exc.item)
    return replace(view, state=state, dirty=apply_floor(state, view.floor))


def _is_current(entry: Pending, lease: Lease) -> bool:
    """Only the lease of the latest delivery may extend or retry a message (acks stay permissive)."""
    return entry.leased and entry.attempts == lease.attempt


def _backoff(attempt: int) -> None:
    time.sleep(random.uniform(0, 0.002 * min(attempt, 10)))
