"""Where a pull looks, in which order, and what it can prove.

1. The lane this container leased from last (its affinity): one read of that lane (and lane 0's cursor);
   of a live stream's stripes, up to MAX_HOLDS it keeps to, one read each while the batch has room.
   Containers keep to their lanes, so under load each lane has about one puller and commits rarely race;
   a container that loses a race, or finds its lane empty, lets go of it (a stripe: only a lost race).
2. Otherwise, or when that left room in the batch: every shard of the region, HEAD + each group's lane 0
   (one BatchGetItem per 50 shards). Unclaimed messages anywhere are claimed by a lane of that shard
   (not lane 0 while there are others: it shares the shard's partition with the HEAD).
3. Still room and nothing claimable: the other lanes of the shards whose cursor says they may hold
   work, but those this container read held lately (their pullers read each block as it comes). After
   this read the pull knows every shard's every lane at one moment; if it then leases nothing, and left
   no lane unread, nothing was deliverable in the region (an exact empty answer, and an exact backlog).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sluice import errors
from sluice.engine.backend import Backend
from sluice.engine.commit import LaneView
from sluice.engine.lanes import MAX_STRIPES, Figures, may_claim
from sluice.engine.regions import by_region
from sluice.engine.shardstate import ShardRead, ShardStateReader
from sluice.engine.store import ShardAddress, ShardStore

if TYPE_CHECKING:
    from sluice.engine.shardlease import CarriedAcks
from sluice.models import MAX_SHARDS, Queue, Shard

OTHER_REGION_FIRST = 0.25  # the share of pulls that read another region before their own


@dataclass(frozen=True)
class Affinity:
    shard: int
    lane: int


BUSY_MS = 200  # a lane committed this recently has a puller: others look elsewhere first
# While a long-poll has time left, a lane committed this recently is left to its puller altogether: a live
# stream's new messages are seen by every waiting puller at once, and a herd of them mostly loses the
# race (twin, 100 pullers on 32 shards at 30,000 msg/s: 49-57 % of lane writes lost, 16-35 % leaving them).
PATIENT_BUSY_MS = 100
# A stripe lane is its puller's while it polls (it keeps to it, empty or not): for this long after its
# last commit a patient poll leaves it alone (twin, 100 pullers at 30,000 msg/s on 32 shards: 2.4-4.8 %
# of lane writes lost, against 15-22 % with lanes anyone takes).
HELD_MS = 1_000
# A holder whose stripe has nothing for it walks the other lanes (a patient poll), and is back on its
# stripe this long before its hold may lapse (HELD_MS after its last commit there): others take the
# stripe's next block from then on. Walks reading other shards' stripes one by one took 0.6 s and more,
# its next block landed meanwhile, and a herd raced for it (twin, 500 pullers on 16 shards: a third of
# the stripes' lost races, 18.6-34.6 % of lane writes lost in all; docs/performance.md "Stop 50").
WALK_MS = 300
# A holder whose walk leased from a stripe nobody kept to keeps to that one too, up to this many stripes:
# moving to it left its own stripe to a herd of pollers (twin, 500 pullers on 16 shards: 27-39 moves a
# second), and helping it once left it to them as well; where stripes outnumber pullers, each must keep
# to more than one (100 pullers on 32 shards, 5 stripes a shard).
MAX_HOLDS = 2
# A hold read is left alone about this long (`Busy.trusted_until`; drawn from half to one and a half
# times, so pullers that read at one moment do not all come back at one moment), or until it may lapse
# if later. Holders renew theirs every block, about twice a second on a live stream: a puller without a
# stripe that read a shard again at each lapse found it held again, and read every stripe of every
# shard twice a second (twin, 500 pullers on 16 shards: 2.3-2.6 RRU a message, four fifths of it by the
# pullers holding no stripe; 1.0-1.3 in six of seven runs with this; docs/performance.md "Stop 53").
# The price: such a puller finds a stripe whose holder left, or that fell behind, up to that much later
# (3 s, fixed, left stripes behind in "Stop 46"; the proxy there keeps up with this).
HOLD_TRUST_MS = 2_000
# Lanes a container remembers held (`saw_held`) leave when looked up after their trust; past this many,
# the lapsed ones are dropped at once. Twice the most that can be held at a time (256 shards x 16
# stripes), so the drop is rare and a long-lived container's entries stay bounded as shards retire.
HELD_LANES_PRUNE_AT = 2 * MAX_SHARDS * MAX_STRIPES
BEHIND_BLOCKS = 2  # ... unless it holds this many blocks unread (`_behind`)
RATE_WINDOW_MS = 250  # a shard's send rate is measured over HEAD reads at least this far apart


@dataclass(frozen=True)
class Busy:
    """Which lanes have another puller on them: committed in the last `ms`, and not last by this
    container (`mine`: (shard, lane, version) of its own latest commits; a lone consumer must not wait
    for itself)."""

    ms: int = BUSY_MS
    mine: frozenset[tuple[int, int, int]] = frozenset()
    held_ms: int = BUSY_MS  # the same for a stripe lane (its puller keeps to it)
    trust_ms: int = 0  # a hold read is left alone about this long (`trusted_until`)

    def __call__(self, view: LaneView, now_ms: int) -> bool:
        return self.held(view, now_ms) or (now_ms - view.last_ms < self.ms and not self._own(view))

    def held(self, view: LaneView, now_ms: int) -> bool:
        """A stripe lane its puller holds: no poll takes it, not even as the last resort (the deadline's
        poll of 1,000 long-polls raced its holder for every block)."""
        recent = self.recent(view.last_ms, now_ms)
        return view.on_stripe and recent and not _behind(view) and not self._own(view)

    def recent(self, last_ms: int, now_ms: int) -> bool:
        """Whether a lane last committed at `last_ms` may still be held (a lane never committed is not)."""
        return last_ms > 0 and now_ms - last_ms < self.held_ms

    def trusted_until(self, lapse_ms: int, now_ms: int, trust_ms: int | None = None) -> int:
        """Until when a poll leaves alone a hold it read at `now_ms` that may lapse at `lapse_ms`;
        `trust_ms`: one `trust()` drawn for lanes read together."""
        return max(lapse_ms, now_ms + (self.trust() if trust_ms is None else trust_ms))

    def trust(self) -> int:
        """How long a hold read now is left alone: from half to one and a half times `trust_ms`."""
        return round(self.trust_ms * random.uniform(0.5, 1.5))

    def _own(self, view: LaneView) -> bool:
        return (view.address.id, view.lane, view.state.version) in self.mine


def _behind(view: LaneView) -> bool:
    """Whether a stripe lane holds BEHIND_BLOCKS blocks unread: its puller falls behind (the stripes
    were cut for a lower rate), and any puller may help as on other lanes."""
    cursor, head = view.cursor, view.head
    if cursor is None or head is None:
        return False
    return cursor.striped(view.lane, view.state.read, head.next) >= BEHIND_BLOCKS * cursor.stripe


@dataclass(frozen=True)
class LaneHold:
    """A stripe lane read held by another puller: until when this container leaves it unread, and the
    lane's figures then (what a poll that leaves it unread counts for it)."""

    until_ms: int
    figures: Figures


@dataclass(frozen=True)
class ShardHold:
    """One held shard as a survey found it: until when it is left out, and its backlog then."""

    until_ms: int
    figures: Figures


@dataclass(frozen=True)
class Holds:
    """Striped shards whose every stripe a puller holds (`Busy.held`) and whose lane 0 has nothing unread
    and no lease due, as this container last surveyed them (`shards`): its polls leave each out until
    its `until_ms` (`Busy.trusted_until`, or a lease of lane 0 coming due), and answer an estimate (its
    `figures`: its backlog then). A puller
    without a stripe surveying them again at every poll only read (twin, 125 pullers at 12,500 msg/s on
    4 shards: 2.8 RRU a message, 30,000 lane reads) and, at its long-poll's deadline, raced their
    holders. Per shard, and updated by every poll's full reads (`updated`): kept only from a poll that
    left no shard out, and ended for all at the earliest lapse, they left the shards not held at that
    survey to be read at every poll, found held or not (twin, 500 pullers on 16 shards: 2.24-2.83 RRU a
    message over six runs, against 1.99-2.48 over three; docs/performance.md "Stop 52")."""

    shards: Mapping[int, ShardHold] = field(default_factory=dict)
    read: frozenset[int] = frozenset()  # the shards whose every lane the survey behind these read or trusted

    def active(self, now_ms: int) -> frozenset[int]:
        """The shards to leave out now."""
        return frozenset(shard for shard, hold in self.shards.items() if now_ms < hold.until_ms)

    def backlog(self, shards: Iterable[int]) -> int:
        """The backlog of `shards` (held ones) as last surveyed."""
        return sum(self.shards[shard].figures.backlog for shard in shards)

    def updated(self, found: Holds, now_ms: int) -> Holds:
        """These holds after a poll that found `found`: the shards it read in full as it found them, the
        others as before (left out, or not read in full); lapsed ones dropped (at most one entry per
        readable shard, 256, whatever shards a long-lived container saw retire)."""
        kept = {s: h for s, h in self.shards.items() if s not in found.read and now_ms < h.until_ms}
        return Holds(kept | dict(found.shards))

    @staticmethod
    def of(
        reads: Sequence[ShardRead],
        group: str,
        now_ms: int,
        taken: Busy,
        known: Mapping[tuple[int, int], LaneHold] | None = None,
    ) -> Holds:
        """The holds `reads` show; a lane they leave out counts as read held when `known` holds it
        (the holds this container read and trusts still, by (shard, lane): `survey_lanes` skips those)."""
        known = known or {}
        held_shards: dict[int, ShardHold] = {}
        read_in_full: set[int] = set()
        for read in reads:
            lanes = read.groups[group]
            cursor = lanes.cursor
            unread = [(read.shard.id, lane) for lane in lanes.not_read()]
            if any(key not in known for key in unread):
                continue  # not every lane read or trusted held
            trusted = [known[key] for key in unread]
            untils = [hold.until_ms for hold in trusted]
            read_in_full.add(read.shard.id)
            if cursor is None or not cursor.stripe:
                continue  # not striped
            held = [ls for lane, ls in lanes.lanes.items() if lane]
            if not all(taken.recent(ls.last_ms, now_ms) for ls in held):
                continue  # a stripe its puller left (or never took): no view built (256 shards: 4,352)
            zero = lanes.lane0
            if lanes.unread(0, read.head.next):
                continue  # lane 0 keeps what it held at the cut
            due = [p.due_ms for seq, p in zero.state.pending.items() if seq not in zero.acked_seqs]
            if any(due_ms <= now_ms for due_ms in due):
                continue  # a lease there came due
            stripes = [LaneView.of(read.address, group, ls, cursor, read.head) for ls in held]
            if (stripes or trusted) and all(taken.held(view, now_ms) for view in stripes):
                if stripes:
                    lapse = min(view.last_ms for view in stripes) + taken.held_ms
                    untils.append(taken.trusted_until(lapse, now_ms))
                until_ms = min([*untils, *due])  # lane 0's leases from before the cut: until one comes due
                figures = read.figures(group, now_ms)
                for hold in trusted:
                    figures.add(hold.figures)
                held_shards[read.shard.id] = ShardHold(until_ms, figures)
        return Holds(held_shards, frozenset(read_in_full))


def shares_lane(mine: tuple[int, int] | None, replaced: int, lane_last_ms: int, last_ms: int) -> bool:
    """Whether others commit on a lane this container just committed (a stripe cut's evidence): another
    commit since this container's own last one there (`mine`: (version, when), against the version its
    commit `replaced`), or, for a newcomer to it, a commit there since its last commit anywhere
    (`last_ms`, a cycle ago; `lane_last_ms`: the lane's last commit as read). So a lane that a herd of
    rotating pullers shares is cut by whichever of them wins it, not only by one that comes back to it
    (docs/performance.md "Stop 45": in the runs there, lost races stayed within their spread before)."""
    if mine is not None:
        return replaced != mine[0]
    return lane_last_ms >= last_ms


SAMPLE_SHARDS = 8  # under load, a pull first looks at this many random shards (HEAD + lane 0 each)


class PullPlanner:
    def __init__(self, backend: Backend, states: ShardStateReader) -> None:
        self.backend = backend
        self.store: ShardStore = backend.store
        self.states = states
        self._local = threading.local()  # one Lambda container serves one request at a time
        self._split: dict[
            tuple[str, str, int], bool
        ] = {}  # (queue, group, shard): lanes split when last seen

    def regions(self, queue: Queue) -> list[tuple[str | None, list[Shard]]]:
        """The readable shards by region, this region's first; on a share of pulls another region's
        first, so a consumer whose own region always fills its batch still drains the others."""
        ordered = by_region(self.backend, queue.readable_shards)
        if len(ordered) > 1 and random.random() < OTHER_REGION_FIRST:
            ordered.insert(0, ordered.pop(random.randrange(1, len(ordered))))
        return ordered

    # --- affinity -----------------------------------------------------------------------------------------

    def _affinity(self) -> dict[tuple[str, str], tuple[Affinity, ...]]:
        found: dict[tuple[str, str], tuple[Affinity, ...]] | None = getattr(self._local, "affinity", None)
        if found is None:
            found = self._local.affinity = {}
        return found

    def _kept(self, queue: str, group: str) -> tuple[Affinity, ...]:
        """The lanes this container keeps to, its first one first (more than one: stripes only)."""
        return self._affinity().get((queue, group), ())

    def sticky(self, queue: Queue, group: str, shards: Sequence[Shard], nth: int = 0) -> LaneView | None:
        """The `nth` lane this container keeps to, read fresh (in one call), if it is in `shards`."""
        kept = self._kept(queue.name, group)
        mine = kept[nth] if nth < len(kept) else None
        shard = next((s for s in shards if mine and s.id == mine.shard), None)
        if mine is None or shard is None:
            return None
        try:
            return self.lane(queue, shard, group, mine.lane, head=True, fail_fast=True)
        except errors.Throttled:
            return None  # its partition is saturated: the survey goes on with what it can read

    def sample(
        self, queue: Queue, group: str, shards: Sequence[Shard], carried: CarriedAcks | None
    ) -> list[Shard] | None:
        """Random shards to look at first, plus those of the acks the pull carries (so they share its
        write); None when every shard is read anyway: few shards, or this container's last pull of the
        group came back empty (an idle queue: the exact survey at once)."""
        empty: dict[tuple[str, str], bool] = self._local.__dict__.setdefault("empty", {})
        if len(shards) <= SAMPLE_SHARDS or empty.get((queue.name, group), False):
            return None
        chosen = random.sample(list(shards), SAMPLE_SHARDS)
        if carried:
            acked = {shard for g, shard, _lane in carried.ops if g == group}
            chosen += [s for s in shards if s.id in acked and s not in chosen]
        return chosen

    def came_back(self, queue: Queue, group: str, *, empty: bool) -> None:
        """Whether this container's last pull of the group was empty (see `sample`)."""
        self._local.__dict__.setdefault("empty", {})[(queue.name, group)] = empty

    def _recent(self, queue: str, group: str, now_ms: int) -> dict[tuple[int, int], tuple[int, int]]:
        """This container's commits of the last HELD_MS, (shard, lane) -> (version, when): an
        older one cannot make a lane busy, so they are dropped (a long-lived container has committed
        up to shards x lanes of them)."""
        mine: dict[tuple[str, str], dict[tuple[int, int], tuple[int, int]]]
        mine = self._local.__dict__.setdefault("mine", {})
        recent = {k: (v, at) for k, (v, at) in mine.get((queue, group), {}).items() if now_ms - at < HELD_MS}
        mine[(queue, group)] = recent
        return recent

    def last_commit(self, view: LaneView, now_ms: int) -> tuple[int, int] | None:
        """This container's last commit of `view`'s lane within HELD_MS: (the version it wrote, when in
        ms); None when there was none."""
        return self._recent(view.address.queue, view.group, now_ms).get((view.address.id, view.lane))

    def last_commit_ms(self, queue: str, group: str, now_ms: int) -> int | None:
        """When this container last committed any lane of the group within HELD_MS (None: not lately)."""
        return max((at for _v, at in self._recent(queue, group, now_ms).values()), default=None)

    def committed(self, view: LaneView, now_ms: int) -> None:
        """This container's commit is `view`'s lane's latest (see `Busy`)."""
        recent = self._recent(view.address.queue, view.group, now_ms)
        recent[(view.address.id, view.lane)] = (view.state.version, now_ms)

    def busy(self, queue: Queue, group: str, now_ms: int, *, patient: bool) -> Busy:
        """How a poll tells lanes with another puller on them: those committed by another container in
        the last BUSY_MS (PATIENT_BUSY_MS for a patient poll), or HELD_MS for a stripe lane."""
        recent = self._recent(queue.name, group, now_ms)
        mine = frozenset((shard, lane, v) for (shard, lane), (v, _at) in recent.items())
        return Busy(PATIENT_BUSY_MS if patient else BUSY_MS, mine, HELD_MS, HOLD_TRUST_MS)

    def saw_head(self, queue: str, shard: int, head_next: int, now_ms: int) -> None:
        """A HEAD this container read: its shard's send rate is HEAD `next`'s growth between two reads at
        least RATE_WINDOW_MS apart (in sequences a second)."""
        seen: dict[tuple[str, int], tuple[int, int, float | None]]
        seen = self._local.__dict__.setdefault("sends", {})
        first, at, rate = seen.get((queue, shard), (head_next, now_ms, None))
        if (queue, shard) not in seen or now_ms - at >= RATE_WINDOW_MS:
            if (queue, shard) in seen:
                rate = (head_next - first) * 1000 / (now_ms - at)
            seen[(queue, shard)] = (head_next, now_ms, rate)

    def send_rate(self, queue: str, shard: int) -> float | None:
        """The shard's send rate as this container last measured it (None: not measured yet)."""
        seen: dict[tuple[str, int], tuple[int, int, float | None]] = self._local.__dict__.get("sends", {})
        return seen.get((queue, shard), (0, 0, None))[2]

    def holds(self, queue: str, group: str) -> Holds:
        """The holds this container's polls found, each shard's as its latest full read found it."""
        found: dict[tuple[str, str], Holds] = self._local.__dict__.get("holds", {})
        return found.get((queue, group), Holds())

    def found_holds(self, queue: str, group: str, holds: Holds) -> None:
        self._local.__dict__.setdefault("holds", {})[(queue, group)] = holds

    def _held_lanes(self, queue: str, group: str) -> dict[tuple[int, int], LaneHold]:
        found: dict[tuple[str, str], dict[tuple[int, int], LaneHold]]
        found = self._local.__dict__.setdefault("held", {})
        return found.setdefault((queue, group), {})

    def saw_held(self, view: LaneView, taken: Busy, now_ms: int, trust_ms: int | None = None) -> None:
        """A stripe lane another puller holds (`Busy.held`), as read at `now_ms`: left alone until
        `Busy.trusted_until` (`trust_ms` as there)."""
        held = self._held_lanes(view.address.queue, view.group)
        if len(held) >= HELD_LANES_PRUNE_AT:  # lanes of shards since retired are never looked up again
            for key in [key for key, hold in held.items() if hold.until_ms <= now_ms]:
                del held[key]
        until = taken.trusted_until(view.last_ms + taken.held_ms, now_ms, trust_ms)
        held[(view.address.id, view.lane)] = LaneHold(until, view.figures(now_ms))

    def saw_holds(
        self, reads: Iterable[ShardRead], group: str, taken: Busy, now_ms: int, trust: Callable[[int], int]
    ) -> None:
        """`saw_held` for every stripe lane of `reads` another puller holds: the next survey leaves
        them unread (`survey_lanes`). One trust a shard (`trust(shard id)`): drawn for each lane, the
        shard's earliest lapse came about half as late, and the hold of the whole shard (`Holds`) with
        it."""
        for read in reads:
            lanes = read.groups[group]
            if lanes.cursor is None or not lanes.cursor.stripe:
                continue
            for ls in [ls for lane, ls in lanes.lanes.items() if lane]:
                view = LaneView.of(read.address, group, ls, lanes.cursor, read.head)
                if taken.held(view, now_ms):
                    self.saw_held(view, taken, now_ms, trust(read.shard.id))

    def known_held(self, queue: str, group: str, shard: int, lane: int, now_ms: int) -> bool:
        """Whether this container read the lane held by another puller, and the hold cannot have lapsed
        since: a poll passes over it without reading it again."""
        held = self._held_lanes(queue, group)
        hold = held.get((shard, lane))
        if hold is not None and hold.until_ms <= now_ms:
            del held[(shard, lane)]
        return hold is not None and now_ms < hold.until_ms

    def keep(self, view: LaneView, *, also: bool = False) -> None:
        """Keep to `view`'s lane from now on; `also`: a stripe leased on a holder's walk, kept beside the
        stripes it keeps to (up to MAX_HOLDS; beyond, it is helped once and left to others)."""
        kept = self._kept(view.address.queue, view.group)
        mine = Affinity(view.address.id, view.lane)
        if mine in kept or (also and len(kept) >= MAX_HOLDS):
            return
        self._affinity()[(view.address.queue, view.group)] = (*kept, mine) if also else (mine,)

    def keeps_lane(self, queue: str, group: str) -> bool:
        """Whether this container keeps to a lane of the group (a holder waits for its stripe's blocks)."""
        return bool(self._kept(queue, group))

    def _keeps(self, view: LaneView) -> bool:
        """Whether `view`'s lane is one this container keeps to."""
        return Affinity(view.address.id, view.lane) in self._kept(view.address.queue, view.group)

    def holds_stripe(self, view: LaneView) -> bool:
        """Whether `view` is a stripe lane this container keeps to."""
        return view.on_stripe and self._keeps(view)

    def let_go(self, view: LaneView) -> None:
        """Stop keeping to `view`'s lane (if it is one this container keeps to)."""
        key = (view.address.queue, view.group)
        mine = Affinity(view.address.id, view.lane)
        kept = tuple(k for k in self._kept(*key) if k != mine)
        if kept:
            self._affinity()[key] = kept
        else:
            self._affinity().pop(key, None)

    def lane(
        self,
        queue: Queue,
        shard: Shard,
        group: str,
        lane: int,
        *,
        head: bool = False,
        fail_fast: bool = False,
        seen: ShardRead | None = None,
    ) -> LaneView:
        """One lane, read alone when the group's lanes on this shard were split when last seen (a lane
        inside its claimed range needs neither the cursor nor the HEAD; the leaser reads them when its
        range is read); with lane 0's cursor and the HEAD otherwise (one lane reads up to HEAD next).
        `head`: the HEAD in any case (a pull observes its map stamps: a pause stops it). `seen`: the
        pull's survey of the shard; when it found nothing unclaimed, its cursor and HEAD stand in for
        lane 0's (a lane whose range is read has nothing to claim: no read of the shard's partition,
        which a drain's empty pulls kept saturated with those reads). Exact all the same: a range
        claimed since holds only sequences sent after the survey."""
        at = ShardAddress.of(queue, shard)
        split = self._split.get((queue.name, group, shard.id), False)
        if seen is not None and not head:
            lanes = seen.groups[group]
            if lanes.cursor is not None and not lanes.unclaimed(seen.head.next, seen.head.floor):
                alone = self.store.read_lanes(
                    at, group, [lane], head=False, cursor=False, fail_fast=fail_fast
                )
                return LaneView.of(at, group, alone.lanes[lane], lanes.cursor, seen.head)
        read = self.store.read_lanes(
            at, group, [lane], head=head or not split, cursor=not split, fail_fast=fail_fast
        )
        if not split:
            self._split[(queue.name, group, shard.id)] = read.cursor is not None
        return LaneView.of(at, group, read.lanes[lane], read.cursor, read.head, cursor_known=not split)

    def glance_stripe(
        self, queue: Queue, shard: Shard, group: str, lane: int, seen: ShardRead | None, fail_fast: bool
    ) -> LaneView | None:
        """A stripe lane of a shard the pull surveyed (`seen`: its cursor and HEAD stand in), read alone
        eventually consistent: half a read unit, where nearly every such lane a puller without a stripe
        reads is held; None for a lane that is not a stripe of `seen`. A state moments old only
        understates a hold (a later one has a later commit and has read further), so a lane it shows
        held (`Busy.held`, against the survey's HEAD, as the consistent read of it does) was held; one it
        shows free with something to take is read again, consistently, before anything is taken from it
        or proved by it (one with nothing is left to the survey of every lane)."""
        cursor = seen.groups[group].cursor if seen is not None else None
        if seen is None or cursor is None or not cursor.stripe or lane == 0:
            return None
        at = ShardAddress.of(queue, shard)
        alone = self.store.read_lanes(
            at, group, [lane], head=False, cursor=False, fail_fast=fail_fast, consistent=False
        )
        return LaneView.of(at, group, alone.lanes[lane], cursor, seen.head)

    # --- the region's shards ------------------------------------------------------------------------------

    def survey(
        self, queue: Queue, shards: Sequence[Shard], group: str
    ) -> tuple[list[ShardRead], list[Shard]]:
        """The shards' HEADs and the group's lane 0 (with the cursor; `survey_lanes` reads the other
        lanes), and the shards left unread, in one call: the shards
        it could read are enough to go on with (the answer is then an estimate). The others' partitions
        are saturated, and asking them again (unprocessed-key rounds, up to seconds) is what kept them
        saturated when 1,000 pullers of a drain's tail did it at once, with the acks of the last leases
        waiting behind them. A call that read nothing raises `Throttled` (a 429: the client comes back
        after its Retry-After)."""
        reads, unread = self.states.read_available(queue, shards, [group], every_lane=False, fail_fast=True)
        return self._seen(queue, group, reads, unread)

    def survey_lanes(
        self, queue: Queue, group: str, reads: Sequence[ShardRead], now_ms: int
    ) -> tuple[list[ShardRead], list[Shard]]:
        """The survey's second step: every other lane of the shards `reads` found split, with their HEAD
        and lane 0 as `reads` holds them (read moments ago: the shard's partition, which every pull
        reads, is not read twice). Exact all the same: a message only moves forward (unclaimed →
        a lane's range → pending → done), so one that was deliverable when lane 0 was read and is not
        in its lane now was leased meanwhile. Lanes this container read held by another puller, whose
        hold it trusts still (`known_held`), are left unread (absent from the reads: no proof for them);
        under load a puller without a stripe read them again at every poll, 98 % of its lane reads there
        (twin, 500 pullers on 16 shards: 0.34-0.60 RRU a message; docs/performance.md "Stop 55")."""
        ids = {read.shard.id: read.address.pk for read in reads}
        trusted = self.trusted_holds(queue.name, group, now_ms)
        skip = {(ids[shard], group, lane) for shard, lane in trusted if shard in ids}
        more, unread = self.states.read_other_lanes(reads, fail_fast=True, skip=skip)
        return self._seen(queue, group, more, unread)

    def trusted_holds(self, queue: str, group: str, now_ms: int) -> dict[tuple[int, int], LaneHold]:
        """The lanes this container read held and trusts still, by (shard, lane)."""
        held = self._held_lanes(queue, group)
        return {key: hold for key, hold in held.items() if now_ms < hold.until_ms}

    def unread_figures(self, queue: str, group: str, reads: Iterable[ShardRead], now_ms: int) -> Figures:
        """What the lanes `reads` left unread count, as this container last read them held."""
        trusted, out = self.trusted_holds(queue, group, now_ms), Figures()
        for read in reads:
            for lane in read.groups[group].not_read():
                if (hold := trusted.get((read.shard.id, lane))) is not None:
                    out.add(hold.figures)
        return out

    def _seen(
        self, queue: Queue, group: str, reads: list[ShardRead], unread: list[Shard]
    ) -> tuple[list[ShardRead], list[Shard]]:
        if unread and not reads:
            raise errors.Throttled("every shard's partition is saturated; retry shortly")
        for read in reads:
            self._split[(queue.name, group, read.shard.id)] = read.groups[group].cursor is not None
        return reads, unread

    @staticmethod
    def deliverable(
        reads: list[ShardRead], group: str, now_ms: int, exclude: set[tuple[int, int]]
    ) -> list[LaneView]:
        """Every lane read that holds something deliverable now: unread in its range, or pending and due
        (random order: not fullest-first, every puller would pick the same lane). One lane, unbounded
        (no cursor), counts here too: its range is the whole shard."""
        out = []
        for read in reads:
            lanes = read.groups[group]
            for lane, ls in lanes.lanes.items():
                if (read.shard.id, lane) in exclude:
                    continue
                done = ls.acked_seqs
                due = any(p.due_ms <= now_ms for s, p in ls.state.pending.items() if s not in done)
                if due or lanes.unread(lane, read.head.next):
                    view = LaneView.of(read.address, group, ls, lanes.cursor, read.head)
                    view.dirty = lane in read.floored.get(group, set())
                    out.append(view)
        random.shuffle(out)
        return out

    @staticmethod
    def places(
        reads: list[ShardRead],
        group: str,
        now_ms: int,
        exclude: set[tuple[int, int]],
        *,
        busy: bool,
        taken: Busy = Busy(),
    ) -> list[LaneView | tuple[Shard, int]]:
        """Where to lease from, in order. First, in random order (not fullest-first: every puller would
        pick the same lane): the lanes read in full with work and nobody else committing them lately
        (`taken`), and every lane of the shards whose lanes are split that was not read (the caller reads
        each before using it, and skips a busy one: lane 0 alone is read by a survey without
        `survey_lanes`, and must not be the only place newcomers see). Then (`busy`) lanes with work that
        have a puller on them (a newcomer there would mostly lose races: the last resort)."""
        ready = PullPlanner.deliverable(reads, group, now_ms, exclude)
        free: list[LaneView | tuple[Shard, int]] = [v for v in ready if not taken(v, now_ms)]
        for read in reads:
            lanes = read.groups[group]
            if lanes.cursor is None:
                continue
            high = max(lanes.cursor.lanes, lanes.cursor.high)
            free += [
                (read.shard, lane)
                for lane in range(high)
                if lane not in lanes.lanes and (read.shard.id, lane) not in exclude
            ]
            if lanes.unclaimed(read.head.next, read.head.floor):
                free += PullPlanner._claimer(read, group, now_ms, exclude, ready, busy=busy, taken=taken)
        random.shuffle(free)
        others = [v for v in ready if taken(v, now_ms)] if busy else []
        return [*free, *others]

    @staticmethod
    def _claimer(
        read: ShardRead,
        group: str,
        now_ms: int,
        exclude: set[tuple[int, int]],
        ready: list[LaneView],
        *,
        busy: bool,
        taken: Busy,
    ) -> list[LaneView]:
        """One read lane of a split shard with nothing to read and nobody on it (unless `busy`: the last
        resort, as for lanes with work), to claim from the unclaimed backlog (one that may claim:
        `lanes.may_claim`). Without the last resort a pull that found every claiming lane busy answered
        empty, and exact, while the shard held an unclaimed backlog."""
        lanes = read.groups[group]
        cursor = lanes.cursor
        assert cursor is not None
        working = {v.lane for v in ready if v.address.id == read.shard.id}
        idle = [
            LaneView.of(read.address, group, state, cursor, read.head)
            for lane, state in lanes.lanes.items()
            if may_claim(lane, cursor) and lane not in working and (read.shard.id, lane) not in exclude
        ]
        idle = [view for view in idle if busy or not taken(view, now_ms)]
        return [random.choice(idle)] if idle else []

    @staticmethod
    def figures(reads: list[ShardRead], group: str, now_ms: int) -> Figures:
        total = Figures()
        for read in reads:
            total.add(read.figures(group, now_ms))
        return total
