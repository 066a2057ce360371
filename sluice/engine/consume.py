"""Pull consumers: the engine's face for pulls, acks, retries and lease extensions.

The parts, each its own module: the layout of a group's state on a shard in lanes (`lanes`, pure),
where a pull looks and what it can prove (`pullplan`), leasing from one lane (`shardlease`: acks
folded in, due redeliveries, a scan of fresh items, claims, gap sealing, one conditional commit,
`commit`), the rules of a lease (`leasebook`, pure) and the dead letter queue (`deadletter`). This
module holds the request flow: long-polls, acks carried on a pull, acks, retries and extends,
verifying lease ids, widening the lanes under contention, and the regions a request may touch.

Multi-region (docs/design.md "Multi-region"): a pull reads its own region's shards first and other
regions' when its batch has room (and first on a share of pulls, so no region waits behind a busy
one); acks, retries and extends go to the lease's shard's region. A region that cannot be reached is
skipped for a cool-down (`sluice.engine.regions.RegionBreaker`): pulls answer from the others, acks
for its shards fail retryably, and its messages are delivered once it is back.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from sluice import errors
from sluice.adapters import aws
from sluice.engine.backend import Backend
from sluice.engine.budget import ByteBudget
from sluice.engine.commit import MAX_COMMIT_ATTEMPTS, LaneView, StateCommit
from sluice.engine.deadletter import DeadLetterSink
from sluice.engine.groupstate import GroupState
from sluice.engine.lanes import (
    STRIPE_BLOCK,
    Figures,
    GroupLanes,
    ack_records,
    acked_seqs,
    stripes_for,
    wider,
)
from sluice.engine.leasebook import LeaseBook, Op, Outcome
from sluice.engine.longpoll import Watch
from sluice.engine.publish import Publisher, message_id
from sluice.engine.pullplan import BUSY_MS, HELD_MS, MAX_HOLDS, WALK_MS, Busy, Holds, PullPlanner, shares_lane
from sluice.engine.queues import QueueDirectory
from sluice.engine.regions import RegionBreaker, region_key
from sluice.engine.shardlease import CarriedAcks, LaneKey, ShardLeaser, Tally, gone
from sluice.engine.shardstate import ShardRead, ShardStateReader
from sluice.engine.store import Head, ShardAddress
from sluice.leases import Lease, LeaseSigner
from sluice.models import AckResult, BacklogFigures, Delivery, LeasedBatch, Queue, Shard

LONG_POLL_MAX_INTERVAL = 0.25  # seconds between the polls of a long-poll pull: a publish seen ≤ 250 ms late
# Every poll reads every shard's HEAD (eventually consistent, `longpoll.Watch`; the shards that moved are
# surveyed): past this many shards the interval grows with them, so an idle long-poll reads at most
# ~4 x 32 HEADs a second (docs/design.md "A long-poll between its surveys").
LONG_POLL_SHARDS = 32


@dataclass
class RetryRequest:
    lease_id: str
    delay_seconds: int | None = None


# A container keeping to no lane that found holds surveys the shards not held at most this often: with
# the held ones left out, every such puller surveyed the few others at each poll interval (50-400 ms),
# and raced for a stripe whose holder left (twin, 500 pullers on 16 shards: 16.7-18.1 % of lane writes
# lost and 271-633 throttled calls in two of four runs; docs/performance.md "Stop 53").
HERD_S = HELD_MS / 1000
# A place read longer ago than this is read again before a take. A poll that reads many lanes one by one
# (throttled reads retry for seconds) took, 1.9 s after its survey, lane 0 of shards cut into stripes
# since, on the survey's view, and lost every such race (twin, 1,000 pullers on 32 shards at 100,000
# msg/s: 1,272 of the 1,508 lane writes that failed in a second; docs/performance.md "Stop 56").
STALE_VIEW_MS = 500


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
        self.store = backend.store
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
        """Lease up to `batch_size` messages; with `wait_ms`, wait for the first ones to arrive (between
        surveys, `_wait` watches HEADs and lanes in flight cheaply; an empty answer is a survey's). With
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
        queue = self.directory.get(queue_name)
        carried = None if acks is None else self._carry(queue, acks)
        longest = LONG_POLL_MAX_INTERVAL * max(1.0, len(queue.readable_shards) / LONG_POLL_SHARDS)
        acked = None
        watch: Watch | None = None
        moved: frozenset[int] | None = None  # survey only these shards (None: every shard)
        while True:
            final = clock.monotonic() >= deadline
            if final:
                moved = None  # the answer at the end of the wait is a survey of every shard ...
            holds = self.planner.holds(queue_name, group)
            held = holds.active(clock())
            if held:  # ... but those whose stripes are held (an estimate)
                every = frozenset(s.id for s in self.directory.get(queue_name).readable_shards)
                moved = (every if moved is None else moved) - held
            budget = ByteBudget(max_bytes, size_of) if size_of else None
            patient = clock.monotonic() + BUSY_MS / 1000 < deadline  # a later poll can take busy lanes
            result, watch, found = self._pull_once(
                queue_name,
                group,
                batch_size,
                visibility_ms,
                budget,
                carried,
                remote_until,
                watch,
                moved,
                patient,
            )
            self.planner.found_holds(queue_name, group, holds.updated(found, clock()))
            if held:
                result.message_backlog_count += holds.backlog(held)  # as last surveyed
            remote_until = deadline
            if carried is not None:
                acked, carried = carried.result(), None  # applied once: the polls that follow only pull
            result.ack = acked
            if result.messages or final:
                return result
            delay, moved = self._wait(queue_name, group, watch, deadline, delay, longest)

    def _wait(
        self,
        queue_name: str,
        group: str,
        watch: Watch | None,
        deadline: float,
        delay: float,
        longest: float,
    ) -> tuple[float, frozenset[int] | None]:
        """Sleep until the next survey: one poll interval, or, with a `watch` (the shards' last surveys
        found nothing available), until shards move, with one cheap read a poll interval (and at the
        earliest due time); while every shard's stripes are held (`Holds`), until a hold may lapse; for
        a container keeping to no lane while some are held, HELD_MS at least (`HERD_S`).
        (The next interval, the shards to survey: None for every shard.)"""
        clock = self.clock
        since = clock.monotonic()
        while True:
            pause = min(delay, max(0.0, deadline - clock.monotonic()))
            if watch is not None:
                pause = min(pause, max(0.0, (watch.next_due_ms + 1 - clock()) / 1000))  # just past due
            clock.sleep(pause)
            delay = min(delay * 2, longest)
            if clock.monotonic() >= deadline:
                return delay, None
            if watch is None:
                queue = self.directory.get(queue_name)
                held = self.planner.holds(queue_name, group).active(clock())
                if {s.id for s in queue.readable_shards} <= held:
                    continue  # nothing to take before a hold lapses
                if (
                    held
                    and not self.planner.keeps_lane(queue_name, group)
                    and clock.monotonic() < since + HERD_S
                ):
                    continue  # the shards not held were surveyed moments ago (see HERD_S)
                return delay, None
            moved = self._moved(queue_name, watch, deadline)
            if moved is None or moved == watch.shards:
                return delay, None
            if moved:
                return delay, moved

    def _moved(self, queue_name: str, watch: Watch, deadline: float) -> frozenset[int] | None:
        """`watch.moved`, or None (survey every shard) when the queue's document changed or a read
        failed; another region's shards are left out when its worst case would end past the deadline
        (as a survey leaves them out)."""
        queue = self.directory.get(queue_name)
        if queue.paused or {s.id for s in queue.readable_shards} != watch.shards:
            return None  # the document changed meanwhile: survey what it says now
        skip: frozenset[int] = frozenset()
        if self.clock.monotonic() + aws.REMOTE_CALL_SECONDS > deadline:
            local = (None, self.backend.region)
            skip = frozenset(s.id for s in queue.readable_shards if region_key(self.backend, s) not in local)
        try:
            return watch.moved(self.store, self.clock(), skip=skip)
        except (errors.DependencyUnavailable, errors.Throttled):
            return None  # the survey decides (its breaker skips a region out of reach)

    def _pull_once(
        self,
        queue_name: str,
        group: str,
        batch_size: int,
        visibility_ms: int | None,
        budget: ByteBudget | None,
        carried: CarriedAcks | None = None,
        remote_until: float = float("inf"),
        watch: Watch | None = None,
        moved: frozenset[int] | None = None,
        patient: bool = False,
    ) -> tuple[LeasedBatch, Watch | None, Holds]:
        """One poll of every readable shard, or of the `moved` ones only (those `watch` saw move, or
        those without held stripes; the answer is then an estimate, the other shards' figures as `watch`
        saw them). The answer, what to watch until the next poll when every shard's last survey found
        nothing available, and the shards whose stripes its surveys found held.
        `patient`: a long-poll's poll with time left, which leaves lanes with a puller on them alone."""
        queue = self.directory.get(queue_name)
        if queue.paused or group not in queue.groups:
            # The cached document may lag a resume or a new group: confirm with the control item (rare).
            queue = self.directory.registry.get(queue_name)
        if queue.paused:
            raise errors.QueuePaused(f"queue {queue_name!r} is paused; resume it to pull")
        if group not in queue.groups:
            raise errors.ConsumerGroupNotFound(f"consumer group {group!r} not found on queue {queue_name!r}")
        pull = _Pull(
            queue,
            group,
            batch_size,
            visibility_ms or queue.settings.visibility_timeout_ms,
            budget,
            carried,
            patient=patient,
            taken=self.planner.busy(queue, group, self.clock(), patient=patient),
        )
        answered = skipped = 0
        for index, (region, every) in enumerate(self.planner.regions(queue)):
            shards = every if moved is None else [s for s in every if s.id in moved]
            if not shards:
                continue
            if pull.paused:
                break
            if index and pull.full:
                pull.exact = False  # a later region is read only when the batch has room
                continue
            if not self.breaker.allows(region):
                skipped += 1
                continue
            remote = region not in (None, self.backend.region)
            if remote and self.clock.monotonic() + aws.REMOTE_CALL_SECONDS > remote_until:
                pull.exact = False
                continue  # too late for another region's worst case: the pull answers on time without it
            try:
                self._pull_region(pull, shards)
            except errors.DependencyUnavailable:
                if region is None:
                    raise  # a single region: nothing else to answer from
                self.breaker.trip(region)
                skipped += 1
                continue
            except errors.Throttled:
                if not pull.out:
                    raise
                # A read throttled after leases were committed (a survey on a saturated partition):
                # answer them; raising would leave them to their visibility timeout, held by nobody.
                pull.exact = False
                answered += 1
                break
            answered += 1
        if skipped and not answered:
            raise errors.DependencyUnavailable(
                f"no region of queue {queue_name!r} can be reached; retry shortly"
            )
        exact = pull.exact and not skipped
        self.planner.came_back(queue, group, empty=not pull.out)
        if carried:
            self._ack_rest(queue, carried)
        if pull.paused and not pull.out:
            # A HEAD's stamp said the queue was paused: answer as a container that knew it does (its
            # carried acks applied first), whichever container this pull reached.
            raise errors.QueuePaused(f"queue {queue_name!r} is paused; resume it to pull")
        if carried:
            # acks the survey counted as in flight (applied after it, or now)
            pull.figures.in_flight = max(0, pull.figures.in_flight - carried.late[group])
        figures = pull.figures
        following = self._next_watch(queue, pull, exact, watch, moved)
        if moved is not None:
            exact = False  # the other shards as surveyed before: an estimate
            if watch is not None:
                figures.add(watch.figures(self.clock(), without=moved))
        return (
            LeasedBatch(
                messages=pull.out,
                message_backlog_count=figures.backlog,  # unacked, in flight included
                backlog_exact=exact,
                backlog=BacklogFigures(
                    available=figures.available, in_flight=figures.in_flight, delayed=figures.delayed
                )
                if exact
                else None,
            ),
            following,
            Holds.of(
                list(pull.surveyed.values()),
                group,
                self.clock(),
                pull.taken,
                self.planner.trusted_holds(queue_name, group, self.clock()),
            ),
        )

    @staticmethod
    def _next_watch(
        queue: Queue, pull: _Pull, exact: bool, watch: Watch | None, moved: frozenset[int] | None
    ) -> Watch | None:
        """What to watch after this poll: every readable shard's latest survey, when each found nothing
        available (this poll's surveys, exact, and for the shards it did not read `watch`'s)."""
        if not exact or pull.out or pull.figures.available:
            return None
        if moved is None:
            every = pull.surveyed.keys() == {s.id for s in queue.readable_shards}
            return Watch.of(pull.surveyed, pull.group) if every else None
        if watch is None or not moved <= pull.surveyed.keys():
            return None
        return watch.updated(pull.surveyed)

    def _pull_region(self, pull: _Pull, shards: list[Shard]) -> None:
        """Lease from one region's `shards`, as `pullplan` orders the places to look; the region's figures
        are exact when the pull surveyed every lane there."""
        queue, group = pull.queue, pull.group
        tried: set[tuple[int, int]] = set()
        if pull.carried:
            pull.carried.surveyed = False
        held: list[LaneView] = []  # the stripes this container keeps to, as read now
        for nth in range(MAX_HOLDS):
            sticky = self.planner.sticky(queue, group, shards, nth)
            if sticky is None:
                break
            if sticky.head is not None:
                self._observe(pull, [(sticky.address.shard, sticky.head)])
                if pull.paused:
                    return
            self._lease(pull, sticky, tried, own=True)
            if pull.full:
                pull.estimate(sticky, len(shards))
                return
            if not self.planner.holds_stripe(sticky):
                break  # a lane it let go of, or one that is not a stripe: its only one
            held.append(sticky)
        pull.holding = bool(held)
        if pull.patient and not pull.out and held:
            lapse = min(view.last_ms for view in held) + HELD_MS  # when others may take a next block
            if self.clock() < lapse:
                pull.home_by_ms = lapse - WALK_MS  # back on its stripes before then
        self._walk(pull, shards, tried)
        pull.home_by_ms, pull.holding = None, False

    def _walk(self, pull: _Pull, shards: list[Shard], tried: set[tuple[int, int]]) -> None:
        """Lease from the region's other lanes: a sample of its shards under load, then a survey of
        every shard (its lanes as `pullplan` orders them)."""
        queue, group = pull.queue, pull.group
        if self._from_sample(pull, shards, tried):
            return
        reads = self._survey(pull, shards)  # HEAD + lane 0 per shard
        if pull.paused:
            return
        # No lanes split anywhere (a queue at rest): lane 0 is every lane, this read is the whole survey.
        whole = not any(r.groups[group].high > 1 for r in reads)
        idle: list[_Idle] = []
        # The figures at the moment of the survey (leasing changes the states read, in place).
        surveyed_at, leased_before = self.clock(), len(pull.out)
        survey_ms = surveyed_at  # when HEAD and lane 0 were read, as every place below holds them
        figures = PullPlanner.figures(reads, group, surveyed_at)
        if whole and pull.carried:
            pull.carried.surveyed = True
        places = self.planner.places(reads, group, surveyed_at, tried, busy=False, taken=pull.taken)
        self._lease_from(pull, places, tried, busy=False, read_ms=survey_ms)
        if not whole:
            if pull.full or (pull.patient and not pull.exact):
                # Claimed from the unclaimed backlog: enough, without reading every lane. Or a patient
                # poll that left lanes to their pullers: its answer is an estimate already, and it would
                # lease nothing of what the other lanes' read finds (`_last_resort`).
                pull.exact = False
                pull.figures.add(figures)
                return
            reads = self._surveyed(pull, *self.planner.survey_lanes(queue, group, reads, self.clock()))
            if any(read.groups[group].not_read() for read in reads):
                pull.exact = False  # lanes read held lately were left to their pullers
            self.planner.saw_holds(reads, group, pull.taken, self.clock(), pull.trust)
            surveyed_at, leased_before = self.clock(), len(pull.out)
            figures = PullPlanner.figures(reads, group, surveyed_at)
            figures.add(self.planner.unread_figures(queue.name, group, reads, surveyed_at))
            idle = self._idle(reads, group, surveyed_at)
            if pull.carried:
                pull.carried.surveyed = True
        if not pull.full:
            places = self.planner.places(reads, group, surveyed_at, tried, busy=True, taken=pull.taken)
            self._lease_from(pull, self._last_resort(pull, places), tried, busy=True, read_ms=survey_ms)
        figures.leased(len(pull.out) - leased_before)  # what this pull leased since: in flight now
        pull.figures.add(figures)
        if not pull.out:
            for merge in idle:
                self._merge(group, merge)

    def _survey(self, pull: _Pull, shards: Sequence[Shard]) -> list[ShardRead]:
        """`planner.survey`, observing the HEADs' map stamps: a HEAD stamped with a newer map makes the
        next pull read the new shards too, and one stamped with a pause stops this pull (`pull.paused`:
        nothing leased, no exact answer)."""
        reads = self._surveyed(pull, *self.planner.survey(pull.queue, shards, pull.group))
        self._observe(pull, [(read.address.shard, read.head) for read in reads])
        return reads

    @staticmethod
    def _surveyed(pull: _Pull, reads: list[ShardRead], unread: list[Shard]) -> list[ShardRead]:
        """Keep a survey's reads as the pull's latest of each shard; shards it could not read make the
        answer an estimate (no proof for them)."""
        if unread:
            pull.exact = False
        pull.surveyed.update((read.shard.id, read) for read in reads)
        return reads

    def _observe(self, pull: _Pull, heads: list[tuple[Shard, Head]]) -> None:
        queue, now = pull.queue, self.clock()
        for shard, head in heads:
            self.directory.observe_stamp(queue, shard, head.map_version, head.map_route)
            self.planner.saw_head(queue.name, shard.id, head.next, now)
        if self.directory.get(queue.name).paused:  # a HEAD just said so (the stamp of a pause)
            pull.paused, pull.exact = True, False

    def _from_sample(self, pull: _Pull, shards: list[Shard], tried: set[tuple[int, int]]) -> bool:
        """Under load, a pull fills from a sample of the shards (as many reads as before the exact
        answers): True when it did, or when a holder walking is due back on its stripe (`_Pull.away`);
        its figures are then an estimate. A container whose last pull of the group came back empty (an
        idle queue) goes straight to the survey of every shard."""
        queue, group = pull.queue, pull.group
        sample = self.planner.sample(queue, group, shards, pull.carried)
        if sample is None:
            return False
        reads = self._survey(pull, sample)
        if pull.paused:
            return True
        read_ms = self.clock()
        figures = PullPlanner.figures(reads, group, read_ms)
        for busy in (False, True):
            if not pull.full:
                places = self.planner.places(reads, group, self.clock(), tried, busy=busy, taken=pull.taken)
                places = self._last_resort(pull, places) if busy else places
                self._lease_from(pull, places, tried, busy=busy, read_ms=read_ms)
        if not pull.full and not pull.away(self.clock()):
            return False  # the survey of every shard follows (the sample's lanes are not tried again)
        pull.exact = False
        pull.figures.add(figures.scaled(len(shards) / len(sample)))
        return True

    def _last_resort(
        self, pull: _Pull, places: list[LaneView | tuple[Shard, int]]
    ) -> list[LaneView | tuple[Shard, int]]:
        """The last resort's `places` (lanes with a puller on them among them), or none for a patient
        poll: it leaves them to their pullers, a later poll tries them (the one at the deadline at the
        latest), and its answer proves nothing about them. No poll takes a held stripe (`Busy.held`)."""
        now = self.clock()
        kept = [] if pull.patient else [p for p in places if not _held(pull, p, now)]
        if len(kept) < len(places):
            pull.exact = False
        return kept

    @staticmethod
    def _idle(reads: list[ShardRead], group: str, now: int) -> list[_Idle]:
        """Shards (as just surveyed, before any leasing) whose split lanes hold nothing and have nothing
        unclaimed: an empty pull merges them back to one lane (`store.merge`, one write each; a striped
        split's lanes are retired in the same transaction), so an idle queue's polls read one lane item
        per shard and group."""
        out = []
        for read in reads:
            lanes, head = read.groups[group], read.head
            if lanes.cursor is None or len(lanes.lanes) < lanes.high:
                continue
            if lanes.unclaimed(head.next, head.floor) or lanes.figures(head.next, now, head.floor).backlog:
                continue
            if lanes.cursor.stripe and now - max(ls.last_ms for ls in lanes.lanes.values()) < HELD_MS:
                continue  # a stripe's puller may be waiting on it: a live stream's pause, not its end
            # Nothing unclaimed: cur >= HEAD next (>= the floor), an item boundary where lane 0 reads on.
            out.append(_Idle(read.address, lanes))
        return out

    def _merge(self, group: str, idle: _Idle) -> None:
        """Merge an idle split shard back into lane 0. Lane 0 reads on from the cursor of claims; from
        HEAD `next` of stripes, read again here: the survey read the HEAD before the stripe lanes, and a
        stripe may have read past it meanwhile (the versions the survey read then hold for the merge,
        so every stripe read up to the HEAD read after them, and no further)."""
        cursor, level, stripes = idle.lanes.cursor, 0, {}
        assert cursor is not None
        with contextlib.suppress(errors.Throttled):  # a later empty pull merges it
            if cursor.stripe:
                # One read of HEAD and lane 0 (their partition): another empty pull may have merged it
                # (a failed transaction costs two write units a lane).
                fresh = self.store.read_lanes(idle.address, group, [], head=True)
                head, zero = fresh.head, fresh.lanes[0].state
                if head is None or fresh.cursor != cursor or zero.version != idle.lanes.lane0.state.version:
                    return
                if any(idle.lanes.unread(lane, head.next) for lane in idle.lanes.lanes):
                    return
                level = head.next
                stripes = {lane: ls.state for lane, ls in idle.lanes.lanes.items() if lane}
            else:
                level = cursor.next
            lane0 = GroupState(read=level, read_item=level)
            self.store.merge(idle.address, group, lane0, idle.lanes.lane0.state.version, cursor, stripes)

    def _lease_from(
        self,
        pull: _Pull,
        places: list[LaneView | tuple[Shard, int]],
        tried: set[tuple[int, int]],
        *,
        busy: bool,
        read_ms: int,
    ) -> None:
        """Lease from `places` (read at `read_ms`) in order until the batch is full; a lane not read yet
        is read first, and passed over when another puller is on it (`pull.taken`, unless `busy`); so is
        one read more than STALE_VIEW_MS ago."""
        for place in places:
            if pull.full:
                return
            if pull.away(self.clock()):
                pull.exact = False  # a holder due back on its stripe: the places left are others'
                return
            if isinstance(place, LaneView) and self.clock() - read_ms > STALE_VIEW_MS:
                place = (place.address.shard, place.lane)
            if isinstance(place, LaneView):
                view = place
            elif (place[0].id, place[1]) not in tried:
                if self.planner.known_held(pull.queue.name, pull.group, place[0].id, place[1], self.clock()):
                    pull.exact = False  # read held moments ago: its puller reads each block as it comes
                    continue
                shard, seen, fail_fast = place[0], pull.surveyed.get(place[0].id), bool(pull.out)
                glanced = self.planner.glance_stripe(pull.queue, shard, pull.group, place[1], seen, fail_fast)
                if glanced is not None and self._read_held(pull, glanced):
                    continue  # the glance shows it held: no consistent read
                if glanced is not None and not glanced.figures(self.clock()).available:
                    # Nothing to take moments ago: no consistent read either. The survey of every lane
                    # after the walk decides (a later poll's, for a patient one whose answer is an
                    # estimate already). A walk over a striped queue at rest read each lane twice.
                    continue
                view = self.planner.lane(
                    pull.queue, shard, pull.group, place[1], fail_fast=fail_fast, seen=seen
                )
                if self._read_held(pull, view):
                    continue
                if not busy and pull.taken(view, self.clock()):
                    continue  # its puller is on it: look elsewhere first (a survey comes back to it)
            else:
                continue
            if (view.address.id, view.lane) not in tried:
                self._lease(pull, view, tried)

    def _read_held(self, pull: _Pull, view: LaneView) -> bool:
        """Whether a lane just read is a stripe another puller holds: if so it is remembered as read held
        (`saw_held`, one trust a shard) and the pull's answer is an estimate (its puller reads each
        block as it comes)."""
        now = self.clock()
        if not pull.taken.held(view, now):
            return False
        self.planner.saw_held(view, pull.taken, now, pull.trust(view.address.id))
        pull.exact = False
        return True

    def _lease(self, pull: _Pull, view: LaneView, tried: set[tuple[int, int]], *, own: bool = False) -> None:
        """Lease what `pull` still wants from one lane; keep to the lane when it gave something. A race
        lost on the lane this container keeps to means more pullers than lanes there: widen them (a
        newcomer's lost race only means it picked a taken lane: it looks elsewhere)."""
        tried.add((view.address.id, view.lane))
        read_ms = view.last_ms  # the lane's last commit before this pull's
        tally = Tally()
        try:
            got = self.leaser.take(
                pull.queue, view, pull.want, pull.vis, pull.budget, pull.carried, tally, pull.size
            )
        except errors.DependencyUnavailable:
            region = region_key(self.backend, view.address.shard)
            if region is None or not pull.out:
                raise
            self.breaker.trip(region)
            pull.exact = False
            return
        except errors.Throttled:
            # The leases taken from other lanes are committed: answer them (raising would leave them
            # to their visibility timeout, 30 s by default, and stall a drain's tail).
            if not pull.out:
                raise
            pull.exact = False
            return
        pull.out += got
        now = self.clock()
        before = self.planner.last_commit(view, now)
        last = self.planner.last_commit_ms(pull.queue.name, pull.group, now)
        over = view.state.version - 1  # the version this pull's commit replaced (when it got some)
        if got:
            self.planner.committed(view, now)
        if tally.contended or (tally.lost_races and not got):
            # A lane with work was left to its puller, or the winner moved it past what the survey saw
            # (it split the shard: the backlog this lane had is now the other lanes' to claim): no proof
            # of emptiness here.
            pull.exact = False
        lost = tally.lost_races > 0
        cut = False
        if view.lane == 0 and view.cursor is None and (lost or (got and last is not None)):
            # A container that committed nothing lately (a walker) has no cycle of its own, but its lost
            # race proves the lane shared: it cuts for a cycle of HELD_MS. Left to containers with a
            # recent commit, a lane a herd of walkers raced stayed one lane (twin, 500 pullers on 16
            # shards: one went 2.1 s without a commit while ~5,000 messages arrived, then a herd took
            # them 100 a win, each win costing the others a lost race, until a container with a
            # recent commit came and cut it).
            cycle_s = (now - last) / 1000 if last is not None else HELD_MS / 1000
            shared = lost or (last is not None and shares_lane(before, over, read_ms, last))
            cut = self._stripe(pull, view, cycle_s, shared=shared)
        if lost and own and not cut:
            self._widen(pull, view)
        # Two pullers on one lane: each lost race sends the loser away with even odds (both leaving at
        # once would send them all to the same few lanes they see next). A stripe lane is kept empty too:
        # its puller waits for its next block there, and others leave it alone (`Busy.held_ms`).
        holds = got or (own and not lost and view.on_stripe)
        if holds and (not lost or random.random() < 0.5):
            self.planner.keep(view, also=pull.holding and view.on_stripe)
        else:
            self.planner.let_go(view)

    def _widen(self, pull: _Pull, view: LaneView) -> None:
        """A lost race: more lanes for this group on this shard (as many as the unclaimed backlog can
        feed, up to the ceiling the coordinator set, `lanes.wider`), unless the queue is ordered (a
        key's order needs one lane)."""
        cursor, head = view.cursor, view.head
        if pull.queue.settings.ordered or head is None or not view.cursor_known:
            return
        if cursor is None:
            lanes = wider(1, head.next - view.state.read, pull.want)
            if view.lane == 0 and lanes > 1:
                self.store.split(view.address, view.group, lanes)
            return
        if cursor.stripe:
            return  # stripes are cut once an epoch, for the send rate: more come after a merge
        lanes = wider(cursor.lanes, head.next - cursor.next, pull.want, cursor.ceiling)
        if lanes > cursor.lanes:
            self.store.set_lanes(view.address, view.group, lanes, max(cursor.high, lanes), cursor)

    def _stripe(self, pull: _Pull, view: LaneView, cycle_s: float, *, shared: bool) -> bool:
        """Cut lane 0 of a shard that one lane reads into stripes when its puller, back after `cycle_s`,
        shares it with others (a lost race, or others' commits since its own) and the send rate needs
        more than one puller (`lanes.stripes_for`); True when it did. Each stripe's puller keeps to it
        and reads each new block of it as it comes, without claims: a live stream's pullers neither race
        nor claim."""
        head = view.head
        if pull.queue.settings.ordered or head is None or not view.cursor_known:
            return False
        rate = self.planner.send_rate(pull.queue.name, view.address.id)
        stripes = stripes_for(rate, head.next - view.state.read, pull.size, cycle_s, shared=shared)
        return bool(stripes) and self.store.split(view.address, view.group, stripes + 1, stripe=STRIPE_BLOCK)

    # --- acks carried on a pull ---------------------------------------------------------------------------

    def _carry(self, queue: Queue, lease_ids: Sequence[str]) -> CarriedAcks:
        """Verify the leases up front (the same answers as `ack` for a lease that is not valid)."""
        carried = CarriedAcks()
        for lease_id in lease_ids:
            if lease := self._verify(queue, lease_id, carried.warnings):
                carried.ops.setdefault((lease.group, lease.shard, lease.lane), []).append(lease)
        self._check_reachable(queue, (shard for _, shard, _ in carried.ops))
        return carried

    def _ack_rest(self, queue: Queue, carried: CarriedAcks) -> None:
        """Acks the pull could not fold into its own writes (another group's leases, a lane it did not
        lease from): applied as `ack` applies them, one write per lane."""
        queue = self._confirm_leased(queue, carried.ops)
        for (group, shard_id, lane), leases in carried.ops.items():
            with self.breaker.guard(self._region(queue, shard_id)):
                done, _, warnings = self._apply(
                    queue, group, shard_id, lane, [(Op.ACK, x, None) for x in leases]
                )
            carried.acked[group] += done
            carried.late[group] += done
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
        """Verify every lease id, then apply the operations lane by lane: (done, retried, warnings)."""
        queue = self.directory.get(queue_name)
        warnings: list[str] = []
        ops: dict[LaneKey, list[tuple[Op, Lease, int | None]]] = {}
        for op, lease_id, value in requested:
            if lease := self._verify(queue, lease_id, warnings):
                ops.setdefault((lease.group, lease.shard, lease.lane), []).append((op, lease, value))
        queue = self._confirm_leased(queue, ops)
        self._check_reachable(queue, (shard for _, shard, _ in ops))
        done = retried = 0
        unreachable: set[str] = set()
        for (group, shard_id, lane), lane_ops in ops.items():
            region = self._region(queue, shard_id)
            try:
                with self.breaker.guard(region):
                    d, r, w = self._apply(queue, group, shard_id, lane, lane_ops, max_retries)
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
        lane: int,
        ops: list[tuple[Op, Lease, int | None]],
        max_retries: int | None = None,
    ) -> tuple[int, int, list[str]]:
        """One lane's operations. Acks alone are recorded by an ADD on the lane's item, which never fails
        a condition (the lane's puller folds them in at its next commit); a retry or an extend changes
        the lane's state: a read-change-commit like a pull's."""
        shard = queue.shard(shard_id)
        if shard is None or group not in queue.groups:
            return (
                0,
                0,
                [f"lease on shard {shard_id} of group {group!r} no longer exists; ignored"] * len(ops),
            )
        if all(op is Op.ACK for op, _, _ in ops):
            leases = [lease for _, lease, _ in ops]
            try:
                return self._record_acks(self.planner.lane(queue, shard, group, lane, fail_fast=True), leases)
            except errors.Throttled:
                return self._record_unread(ShardAddress.of(queue, shard), group, lane, leases)
        view = self.planner.lane(queue, shard, group, lane)
        max_deliveries = max(1, queue.settings.max_retries if max_retries is None else max_retries)
        for attempt in range(MAX_COMMIT_ATTEMPTS):
            self.commit.backoff(attempt)
            now = self.clock()
            old_version = view.state.version
            view.fold()
            book = LeaseBook(view.state)
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
                loaded = self.leaser.load(view, {view.state.pending[s].item for s in exhausted}, now)
                self.leaser.dead_letter(queue, view, book, exhausted, loaded, now)
            if done == retried == 0:
                return 0, 0, warnings
            if not self.commit.save(view, old_version):
                continue
            return done, retried, warnings
        raise self.commit.exhausted("acking")

    def _record_acks(self, view: LaneView, leases: list[Lease]) -> tuple[int, int, list[str]]:
        """Acks by one ADD: the ones still pending (and not recorded yet) count; the others are
        answered as gone, as a commit would answer them."""
        open_pending = set(view.state.pending) - acked_seqs(view.acked)
        seqs = {lease.seq for lease in leases if lease.seq in open_pending}
        warnings = [gone(view, lease.seq) for lease in leases if lease.seq not in seqs]
        if seqs:
            self.store.record_acks(view.address, view.group, view.lane, ack_records(seqs))
        return len(seqs), 0, warnings

    def _record_unread(
        self, at: ShardAddress, group: str, lane: int, leases: list[Lease]
    ) -> tuple[int, int, list[str]]:
        """Acks whose lane could not be read in one call (its partition saturated: in a drain's tail the
        reads of 1,000 pullers' surveys): the same ADD, without checking that each is still pending,
        rather than a 429 that keeps the messages leased for another round. A record of a message
        already done changes nothing (the lane's next commit drops it); only the answer differs: every
        lease counts, and none is reported gone."""
        seqs = {lease.seq for lease in leases}
        self.store.record_acks(at, group, lane, ack_records(seqs))
        return len(seqs), 0, []

    # --- helpers ----------------------------------------------------------------------------------------

    def _confirm_leased(self, queue: Queue, leased: Iterable[LaneKey]) -> Queue:
        """The cached document may not know a group created, or a shard added, seconds ago (another
        container leased from its fresher copy): confirm with the control item before an ack, retry
        or extend is declared gone, or the message would come back after its lease."""
        known = {s.id for s in queue.shards}
        if all(group in queue.groups and shard_id in known for group, shard_id, _ in leased):
            return queue
        return self.directory.registry.get(queue.name)


def _held(pull: _Pull, place: LaneView | tuple[Shard, int], now_ms: int) -> bool:
    return isinstance(place, LaneView) and pull.taken.held(place, now_ms)


@dataclass(frozen=True)
class _Idle:
    """A split shard an empty pull found with nothing to read, its lanes as surveyed."""

    address: ShardAddress
    lanes: GroupLanes


@dataclass
class _Pull:
    """One pull across regions: what it wants, what it leased, and the backlog it saw."""

    queue: Queue
    group: str
    size: int
    vis: int
    budget: ByteBudget | None
    carried: CarriedAcks | None
    out: list[Delivery] = field(default_factory=list)
    figures: Figures = field(default_factory=Figures)
    exact: bool = True
    paused: bool = False  # a HEAD's stamp said the queue was paused meanwhile: lease nothing more
    patient: bool = False  # a long-poll's poll with time left: lanes with a puller on them are left to it
    taken: Busy = field(default_factory=Busy)  # which lanes have another puller on them
    surveyed: dict[int, ShardRead] = field(default_factory=dict)  # the latest read of each shard, by id
    home_by_ms: int | None = None  # a holder's walk beyond its stripe ends then (`WALK_MS`)
    holding: bool = False  # a holder's walk: a stripe it leases from is kept beside its own (`MAX_HOLDS`)
    trusts: dict[int, int] = field(default_factory=dict)  # `trust`'s draws, by shard id

    def trust(self, shard: int) -> int:
        """How long the holds this pull reads on `shard` are left alone (`Busy.trust`): one draw a
        shard, so a shard's lanes read held in one pull lapse together, and are read again together."""
        if shard not in self.trusts:
            self.trusts[shard] = self.taken.trust()
        return self.trusts[shard]

    def away(self, now_ms: int) -> bool:
        """Whether a holder walking beyond its stripe is due back on it."""
        return self.home_by_ms is not None and now_ms >= self.home_by_ms

    @property
    def want(self) -> int:
        return self.size - len(self.out)

    @property
    def full(self) -> bool:
        return len(self.out) >= self.size or (self.budget is not None and self.budget.full)

    def estimate(self, view: LaneView, shards: int) -> None:
        """The batch filled from the lane this container keeps to: no survey, an estimate (that lane's
        backlog, times the lanes and shards like it)."""
        self.exact = False
        lanes = 1 if view.cursor is None else view.cursor.lanes
        own = len(view.state.pending)
        if view.bounds is not None:
            own += max(0, view.bounds[1] - view.state.read)
        self.figures.unread += own * lanes * shards
