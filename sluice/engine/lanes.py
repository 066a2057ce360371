"""A consumer group on one shard, in lanes: the arithmetic of the layout, pure (no storage, no clock).

At rest a group has one lane on a shard: lane 0 reads the shard from its read level up to HEAD `next`,
exactly the single group-state item of before (its item carries no cursor). Under contention the lanes
are split (`Cursor`): every sequence below the cursor's `next` has been claimed by one lane as a range
[lo, hi), and each lane reads only its own range, with its own read level and pending set, in its own
item. A lane claims its next range from the cursor (kept on lane 0's item) when its range is read;
claims never reach past HEAD `next`, so unclaimed = HEAD `next` - cursor `next`, exactly. A live stream
one puller cannot keep up with is split into stripes instead (`Cursor.stripe`, `stripes_for`): every
sequence from the cursor on belongs to one lane by its block, with no claim at all.

A message is in exactly one of these places for a group, and moves only forward:
unclaimed (>= cursor) → claimed and unread (in a lane's range, >= its read level) → pending in that
lane (leased, delayed, waiting for its key) → done (acked, dead-lettered, purged, a gap, expired).
So the backlog is a sum of exact terms, and an answer that finds every term 0 proves the group has
nothing on the shard (see docs/design.md "Consume state in lanes").

Acks are recorded on the lane's item as ranges `"<first>:<count>"` in a string set (an ADD, which
never fails a condition); the next commit of the lane folds them into its pending set and DELETEs the
ranges it folded. Until then a pending entry whose sequence is recorded there is done.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from sluice.engine.groupstate import GroupState

MAX_LANES = 32  # per group and shard at rest: ~1,000 pullers over 32 shards need ~31 (docs/performance.md)
CEILING_MAX = 256  # the most lanes the coordinator lets a group have on one shard under consumer pressure
MAX_CLAIM = 5_000  # sequences per claim: fewer claims, and a lane never holds much beyond its share
CLAIM_BATCHES = 10  # a claim is at least this many of the puller's batches (when there are as many)
LANE_BATCHES = 4  # lanes widen only while the unclaimed backlog gives every lane this many batches
ITEM_SPAN = 100  # a batch item holds at most this many messages (MAX_BATCH_MESSAGES)
STRIPE_BLOCK = ITEM_SPAN  # sequences per block of a striped split (lane k of n reads every n-th block)
MAX_STRIPES = 16  # stripes of one group on one shard (16 kept up with ~3,100 msg/s a shard, 8 did not)
STRIPE_HEADROOM = 1.5  # stripes cut for this many times the pullers the send rate needs
STRIPE_BACKLOG_S = 5  # more than this many seconds of sends waiting is a backlog, not a live stream


@dataclass(frozen=True)
class Cursor:
    """The claim cursor of a group on one shard (on lane 0's item): `next` is the first sequence no
    lane has claimed; lanes [0, `lanes`) may claim; lanes [0, `high`) may hold work (a lane past
    `lanes` drains what it holds and claims nothing more); pullers widen up to `ceiling` lanes (the
    coordinator raises it under consumer pressure; a merge drops it back to MAX_LANES).

    A striped split (`stripe` > 0, cut for a live stream) claims nothing: from `next` (its base) on,
    blocks of `stripe` sequences go round lanes 1 .. lanes - 1, each lane reading only its own, and lane
    0 keeps what it held at the split. `epoch` counts the group's splits on this shard: a merge retires
    the stripe lanes of its epoch (on their own items), so a puller that read an older cursor reads
    nothing new on them."""

    next: int
    lanes: int
    high: int
    ranges: Mapping[int, tuple[int, int]] = field(default_factory=dict)  # lane -> its latest claim [lo, hi)
    ceiling: int = MAX_LANES
    stripe: int = 0  # block size of a striped split (0: lanes claim ranges from `next`)
    epoch: int = 0

    @property
    def stripes(self) -> int:
        """Lanes reading stripes (1 .. stripes) of a striped split; lane 0 keeps what it held at the split."""
        return self.lanes - 1 if self.stripe else 0

    def range_of(self, lane: int, read: int = 0) -> tuple[int, int]:
        """The lane's range: its latest claim, or (striped) the block of its stripe holding `read` or
        the first one after it."""
        if self.stripe and lane:
            return self.block(lane, read)
        return self.ranges.get(lane, (self.next, self.next))

    def block(self, lane: int, read: int) -> tuple[int, int]:
        """Lane `lane`'s (>= 1) block of a striped split holding `read`, or the first one after it: the
        blocks from `next` (the split's base) go round the lanes 1, 2, .., stripes, 1, 2, .."""
        base, size, n = self.next, self.stripe, self.stripes
        index = max(0, read - base) // size
        index += (lane - 1 - index) % n
        return base + index * size, base + (index + 1) * size

    def striped(self, lane: int, lo: int, hi: int) -> int:
        """How many sequences of [lo, hi) lane `lane`'s stripe holds (closed form: the unread count)."""
        return max(0, self._striped_below(lane, hi) - self._striped_below(lane, lo))

    def _striped_below(self, lane: int, end: int) -> int:
        span = max(0, end - self.next)
        cycle = self.stripe * self.stripes
        rest = span % cycle - (lane - 1) * self.stripe
        return span // cycle * self.stripe + min(self.stripe, max(0, rest))


@dataclass
class LaneState:
    """One lane's state, the acks recorded on its item but not folded into it yet, and when it was last
    committed (ms; 0: never)."""

    lane: int
    state: GroupState
    acked: frozenset[str] = frozenset()
    last_ms: int = 0
    acks_added: int = 0  # ADDs of ack records so far (a redelivering commit holds only while unchanged)
    retired: int = 0  # the epoch whose merge retired this stripe lane (0: never)

    @property
    def acked_seqs(self) -> set[int]:
        return acked_seqs(self.acked)

    def open_pending(self) -> dict[int, int]:
        """Pending sequences not recorded as acked: seq -> 1 (a set with cheap membership)."""
        done = self.acked_seqs
        return {seq: 1 for seq in self.state.pending if seq not in done}


@dataclass
class GroupLanes:
    """A group's state on one shard: the cursor (None: one unbounded lane) and the lanes read."""

    cursor: Cursor | None
    lanes: dict[int, LaneState]

    @classmethod
    def fresh(cls) -> GroupLanes:
        return cls(None, {0: LaneState(0, GroupState())})

    @property
    def lane0(self) -> LaneState:
        return self.lanes[0]

    @property
    def high(self) -> int:
        return 1 if self.cursor is None else self.cursor.high

    def not_read(self) -> list[int]:
        """The lanes below `high` this read left out (a survey skips those held by trusted pullers)."""
        return [lane for lane in range(self.high) if lane not in self.lanes]

    def bounds(self, lane: int, head_next: int) -> tuple[int, int]:
        """[lo, hi) lane `lane` may read: its claimed range, or (one lane) everything up to `next`."""
        if self.cursor is None:
            return 0, head_next
        return self.cursor.range_of(lane, self.lanes[lane].state.read if lane in self.lanes else 0)

    def read_level(self, lane: int, head_next: int) -> int:
        """The lane's next sequence to read (its state's level moved into its current range)."""
        lo, _hi = self.bounds(lane, head_next)
        return max(self.lanes[lane].state.read, lo)

    def unread(self, lane: int, head_next: int) -> int:
        if self.cursor is not None and self.cursor.stripe and lane:
            if (ls := self.lanes.get(lane)) is not None and ls.retired >= self.cursor.epoch:
                return 0  # read after its epoch's merge, with the cursor read before it: nothing new
            return self.cursor.striped(lane, self.read_level(lane, head_next), head_next)
        _lo, hi = self.bounds(lane, head_next)
        return max(0, min(hi, head_next) - self.read_level(lane, head_next))

    def unread_ranges(self, head_next: int, floor: int = 0) -> list[tuple[int, int]]:
        """The sequences never read, as ranges in sequence order: the unclaimed backlog and each lane's
        unread part of its range."""
        out = []
        if self.cursor is not None and self.unclaimed(head_next, floor):
            out.append((max(self.cursor.next, floor), head_next))
        for lane in self.lanes:
            if not self.unread(lane, head_next):
                continue
            level = self.read_level(lane, head_next)
            if self.cursor is not None and self.cursor.stripe and lane:
                while level < head_next:  # every unread block of the stripe
                    lo, hi = self.cursor.block(lane, level)
                    if lo >= head_next:
                        break
                    out.append((max(lo, level), min(hi, head_next)))
                    level = hi
                continue
            out.append((level, min(self.bounds(lane, head_next)[1], head_next)))
        return sorted(out)

    def unclaimed(self, head_next: int, floor: int = 0) -> int:
        if self.cursor is None or self.cursor.stripe:
            return 0  # a striped split assigns every sequence from its base to a lane
        return max(0, head_next - max(self.cursor.next, floor))

    def figures(self, head_next: int, now_ms: int, floor: int = 0) -> Figures:
        """Exact per shard: every message below `next` not done is in one of the terms."""
        out = Figures(unread=self.unclaimed(head_next, floor))
        for lane, ls in self.lanes.items():
            out.unread += self.unread(lane, head_next)
            done = ls.acked_seqs
            for seq, p in ls.state.pending.items():
                if seq in done:
                    continue
                if p.due_ms <= now_ms:
                    out.due += 1
                elif p.leased:
                    out.in_flight += 1
                else:
                    out.delayed += 1
        return out

    def ack_level(self, head_next: int, floor: int = 0) -> int:
        """Every sequence below it is done for this group on this shard."""
        levels = [head_next] if self.cursor is None or self.cursor.stripe else [max(self.cursor.next, floor)]
        for lane, ls in self.lanes.items():
            if self.unread(lane, head_next):
                levels.append(self.read_level(lane, head_next))
            done = ls.acked_seqs
            levels += [s for s in ls.state.pending if s not in done]
        return min(levels)

    def oldest_item(self, head_next: int, floor: int = 0) -> int | None:
        """The first sequence of the batch item holding the ack level (or where to look for it)."""
        level = self.ack_level(head_next, floor)
        if level >= head_next:
            return None
        for ls in self.lanes.values():
            if level in ls.state.pending:
                return ls.state.pending[level].item
            if ls.state.read == level:
                return ls.state.read_item
        # A claim's or a stripe block's first sequence: an item boundary only when an item happens to
        # start there (`oldest_age_s` looks up the item holding a stripe's with a Query).
        return level

    def apply_floor(self, floor: int) -> set[int]:
        """What a purge removed, dropped from every lane read; the lanes whose state changed."""
        changed = set()
        for lane, ls in self.lanes.items():
            if drop_below(ls.state, floor):
                changed.add(lane)
        return changed


@dataclass
class Figures:
    unread: int = 0  # never delivered (claimed or not): available once visible
    due: int = 0  # pending and deliverable now (a lease ran out, a retry's or a delay's time came)
    in_flight: int = 0
    delayed: int = 0

    @property
    def available(self) -> int:
        return self.unread + self.due

    @property
    def backlog(self) -> int:
        """Unacked messages, in flight and delayed included (the API's `backlog_count`)."""
        return self.unread + self.due + self.in_flight + self.delayed

    def leased(self, count: int) -> None:
        """`count` available messages were leased since these figures were read: now in flight."""
        due = min(count, self.due)
        self.due -= due
        self.unread = max(0, self.unread - (count - due))
        self.in_flight += count

    def scaled(self, factor: float) -> Figures:
        """An estimate for `factor` times as many shards as these figures were read from."""
        return Figures(*(round(v * factor) for v in (self.unread, self.due, self.in_flight, self.delayed)))

    def add(self, other: Figures) -> None:
        self.unread += other.unread
        self.due += other.due
        self.in_flight += other.in_flight
        self.delayed += other.delayed


def drop_below(state: GroupState, floor: int) -> bool:
    """Drop what a purge removed: move the read level up to the floor, forget pending entries below it.
    True when the state changed (a writer must commit it)."""
    changed = False
    if state.read < floor:
        state.read = state.read_item = floor
        changed = True
    gone = [seq for seq in state.pending if seq < floor]
    for seq in gone:
        del state.pending[seq]
    return changed or bool(gone)


def may_claim(lane: int, cursor: Cursor) -> bool:
    """Whether `lane` may claim from the cursor: a lane being retired (past `lanes`) may not, nor lane 0
    while there are others (its item shares the shard's partition with the HEAD, which every pull's
    survey reads: no lease or ack of a split shard waits on that partition)."""
    return lane < cursor.lanes and (lane > 0 or cursor.lanes == 1)


def claim_size(unclaimed: int, lanes: int, want: int, batch: int) -> int:
    """How much one claim takes: a lane's share of what is unclaimed, at least CLAIM_BATCHES batches,
    at most MAX_CLAIM, and never more than there is (a claim costs a write: few, large ones). Cut so
    that after the claiming pull's `want` the pulls of `batch` end at its end: a batch that crosses
    the end of a range is leased from two lanes (two commits, and its ack an ADD to each)."""
    share = -(-unclaimed // max(1, lanes))
    count = max(min(MAX_CLAIM, CLAIM_BATCHES * batch), min(MAX_CLAIM, share))
    if count > want:
        count = want + (count - want) // batch * batch
    return min(unclaimed, count)


def fed_lanes(unclaimed: int, want: int) -> int:
    """How many lanes the unclaimed backlog can feed with LANE_BATCHES batches of `want` each."""
    return unclaimed // max(1, LANE_BATCHES * want)


def stripes_for(rate: float | None, unread: int, batch: int, cycle_s: float, *, shared: bool) -> int:
    """Stripes for a shard one lane reads, whose puller, back after `cycle_s` with a batch of `batch`,
    found that others had leased from its lane meanwhile or beat it to a commit there (`shared`: they
    keep up only by taking turns on one item), while the shard receives `rate` msg/s. As many pullers
    as the rate needs at that pace, with STRIPE_HEADROOM, up to MAX_STRIPES; none below two, nor for a
    puller alone on the lane (stripes would only split its batches over more commits), nor while what
    waits (`unread`) is more than STRIPE_BACKLOG_S of sends (a backlog: claims spread it over more
    lanes than stripes would)."""
    if rate is None or not shared or unread > rate * STRIPE_BACKLOG_S:
        return 0
    stripes = min(MAX_STRIPES, math.ceil(STRIPE_HEADROOM * rate * cycle_s / batch))
    return stripes if stripes >= 2 else 0


def wider(lanes: int, unclaimed: int, want: int, ceiling: int = MAX_LANES) -> int:
    """The lane count after a lost race: as many as the unclaimed backlog can feed, up to the group's
    ceiling on the shard, at once (doubling took a lost race per step while pullers kept colliding);
    the same count when it cannot grow."""
    return max(lanes, min(ceiling, fed_lanes(unclaimed, want)))


def ack_records(seqs: Iterable[int]) -> frozenset[str]:
    """Sequences as `"<first>:<count>"` runs: the acks of one pull are a few strings, not a hundred."""
    ordered = sorted(set(seqs))
    runs: list[str] = []
    start = prev = None
    for seq in ordered:
        if prev is not None and seq == prev + 1:
            prev = seq
            continue
        if start is not None and prev is not None:
            runs.append(f"{start}:{prev - start + 1}")
        start = prev = seq
    if start is not None and prev is not None:
        runs.append(f"{start}:{prev - start + 1}")
    return frozenset(runs)


def acked_seqs(records: Iterable[str]) -> set[int]:
    out: set[int] = set()
    for record in records:
        first, _, count = record.partition(":")
        out.update(range(int(first), int(first) + int(count or 1)))
    return out
