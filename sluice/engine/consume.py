"""Pull consumers: the engine's face for pulls, acks, retries and lease extensions.

The parts, each its own module: which shards a pull reads (`pullplan`), leasing from one shard
(`shardlease`: due redeliveries, a scan of fresh items, gap sealing, one conditional commit of the
group's state, `commit`), the rules of a lease (`leasebook`, pure) and the dead letter queue
(`deadletter`). This module holds the request flow: long-polls, acks carried on a pull, verifying
lease ids, and the regions a request may touch.

Multi-region (docs/design.md "Multi-region"): a pull reads its own region's shards first and other
regions' when its batch has room (and first on a share of pulls, so no region waits behind a busy
one); acks, retries and extends go to the lease's shard's region. A region that cannot be reached is
skipped for a cool-down (`sluice.engine.regions.RegionBreaker`): pulls answer from the others, acks
for its shards fail retryably, and its messages are delivered once it is back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from sluice import errors
from sluice.adapters import aws
from sluice.engine.backend import Backend
from sluice.engine.budget import ByteBudget
from sluice.engine.commit import MAX_COMMIT_ATTEMPTS, StateCommit
from sluice.engine.deadletter import DeadLetterSink
from sluice.engine.leasebook import LeaseBook, Op, Outcome
from sluice.engine.publish import Publisher, message_id
from sluice.engine.pullplan import PullPlanner
from sluice.engine.queues import QueueDirectory
from sluice.engine.regions import RegionBreaker, region_key
from sluice.engine.shardlease import CarriedAcks, ShardLeaser, gone
from sluice.engine.shardstate import ShardStateReader
from sluice.leases import Lease, LeaseSigner
from sluice.models import AckResult, Delivery, LeasedBatch, Queue, Shard

LONG_POLL_MAX_INTERVAL = 0.25  # seconds between the polls of a long-poll pull: ≤ 250 ms late, 1 read each


@dataclass
class RetryRequest:
    lease_id: str
    delay_seconds: int | None = None


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
        self.clock = backend.clock
        self.shard_states = ShardStateReader(backend.store)
        self.planner = PullPlanner(backend, self.shard_states)
        self.leaser = ShardLeaser(backend.store, backend.clock, signer, DeadLetterSink(publisher))
        self.commit = StateCommit(backend.store, backend.clock)
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
        clock = self.clock
        deadline = clock.monotonic() + wait_ms / 1000
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
            if result.messages or clock.monotonic() >= deadline:
                return result
            clock.sleep(min(delay, max(0.0, deadline - clock.monotonic())))
            delay = min(delay * 2, LONG_POLL_MAX_INTERVAL)

    def _pull_once(
        self,
        queue_name: str,
        group: str,
        batch_size: int,
        visibility_ms: int | None,
        budget: ByteBudget | None,
        carried: CarriedAcks | None = None,
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
        for index, (region, shards) in enumerate(self.planner.regions(queue)):
            if index and (len(deliveries) >= batch_size or (budget and budget.full)):
                continue  # a later region is read only when the batch has room (carried acks: _ack_rest)
            if not self.breaker.allows(region):
                skipped += 1
                continue
            remote = region not in (None, self.backend.region)
            if remote and self.clock.monotonic() + aws.REMOTE_CALL_SECONDS > remote_until:
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

    def _pull_region(
        self,
        queue: Queue,
        shards: list[Shard],
        group: str,
        want: int,
        vis: int,
        budget: ByteBudget | None,
        carried: CarriedAcks | None,
    ) -> tuple[list[Delivery], int]:
        """Lease up to `want` from one region's `shards`: (deliveries, its backlog as the pull saw it)."""
        views, backlog = self.planner.views(queue, shards, group, carried)
        for view in views:  # a HEAD stamped with a newer map: the next pull reads the new shards too
            head = view.head
            self.directory.observe_stamp(queue, view.address.shard, head.map_version, head.map_route)
        if self.directory.get(queue.name).paused:  # a HEAD just said so (the stamp of a pause)
            return [], backlog
        deliveries: list[Delivery] = []
        for view in (v for v in views if v.work > 0):
            if len(deliveries) >= want or (budget and budget.full):
                break
            try:
                left = want - len(deliveries)
                deliveries += self.leaser.take(queue, view, group, left, vis, budget, carried)
            except errors.DependencyUnavailable:
                region = region_key(self.backend, view.address.shard)
                if region is None or not deliveries:
                    raise
                self.breaker.trip(region)
                break  # keep what was leased (committed): the rest of the region waits for its return
        return deliveries, backlog

    # --- acks carried on a pull ---------------------------------------------------------------------------

    def _carry(self, queue: Queue, lease_ids: Sequence[str]) -> CarriedAcks:
        """Verify the leases up front (the same answers as `ack` for a lease that is not valid)."""
        carried = CarriedAcks()
        for lease_id in lease_ids:
            if lease := self._verify(queue, lease_id, carried.warnings):
                carried.ops.setdefault((lease.group, lease.shard), []).append(lease)
        self._check_reachable(queue, (shard for _, shard in carried.ops))
        return carried

    def _ack_rest(self, queue: Queue, carried: CarriedAcks) -> None:
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
        view = self.planner.read(queue, [shard], group)[0]
        for attempt in range(MAX_COMMIT_ATTEMPTS):
            self.commit.backoff(attempt)
            now = self.clock()
            book = LeaseBook(view.state)
            old_version = view.state.version
            done = retried = 0
            warnings: list[str] = []
            exhausted: list[int] = []
            for op, lease, value in ops:
                if op is Op.RETRY:
                    delay = queue.settings.retry_delay_seconds if value is None else value
                    value_ms = delay * 1000
                else:
                    value_ms = value or 0
                outcome = book.settle(
                    op, lease.seq, lease.attempt, now, value_ms=value_ms, max_deliveries=max_deliveries
                )
                if outcome is Outcome.GONE:
                    warnings.append(gone(view, lease.seq))
                elif outcome is Outcome.STALE:
                    warnings.append(
                        f"lease for message {message_id(queue, shard_id, lease.seq)} has expired; "
                        "the message was or will be delivered again"
                    )
                elif outcome is Outcome.DONE:
                    done += 1
                else:
                    retried += 1
                    if outcome is Outcome.EXHAUSTED:
                        exhausted.append(lease.seq)
            if exhausted:
                loaded = self.leaser.load(view, {view.state.pending[s].item for s in exhausted})
                self.leaser.dead_letter(queue, view, book, exhausted, loaded, now)
            if done == retried == 0:
                return 0, 0, warnings
            if not self.commit.save(view, group, old_version):
                continue
            return done, retried, warnings
        raise self.commit.exhausted("acking")

    # --- helpers ----------------------------------------------------------------------------------------

    def _confirm_leased(self, queue: Queue, leased: Iterable[tuple[str, int]]) -> Queue:
        """The cached document may not know a group created, or a shard added, seconds ago (another
        container leased from its fresher copy): confirm with the control item before an ack, retry
        or extend is declared gone, or the message would come back after its lease."""
        known = {s.id for s in queue.shards}
        if all(group in queue.groups and shard_id in known for group, shard_id in leased):
            return queue
        return self.directory.registry.get(queue.name)
