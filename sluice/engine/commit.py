"""The commit of one lane of a group on one shard: a conditional write on the lane's version, which also
drops the ack records the lane folded in and, for lane 0, may take a claim from the cursor. A lost
race hands back the winner's lane (the failed condition returns it: no re-read), with the purge floor
applied, and the caller decides again from it after a short random backoff."""

from __future__ import annotations

import random
from dataclasses import dataclass

from sluice import errors
from sluice.engine.clock import Clock
from sluice.engine.groupstate import GroupState
from sluice.engine.lanes import Cursor, Figures, GroupLanes, LaneState, acked_seqs, drop_below
from sluice.engine.store import Head, ShardAddress, ShardStore, StateConflict

MAX_COMMIT_ATTEMPTS = 30


@dataclass
class LaneView:
    """One lane of a group on one shard as a puller or acker works on it. `head` is None when the
    request did not read it (a lane inside its claimed range needs no HEAD)."""

    address: ShardAddress
    group: str
    lane: int
    state: GroupState
    acked: frozenset[str]  # ack records on the item, not folded yet
    cursor: Cursor | None  # lane 0's, read with this lane (None: one lane reads the whole shard)
    head: Head | None = None
    cursor_known: bool = True  # False: lane 0 was not read (a lane inside its range needs no cursor)
    floor: int = 0  # the HEAD's purge floor, when known
    dirty: bool = False  # the state changed and must be committed
    folded: frozenset[str] = (
        frozenset()
    )  # ack records applied to `state`: dropped from the item by the commit
    last_ms: int = 0  # when the lane was last committed
    acks_added: int = 0  # the item's count of ack-record ADDs when read
    redelivered: bool = False  # this attempt leases a message again: commit only if no ack came meanwhile
    retired: int = 0  # a stripe lane: the epoch whose merge retired it (it reads nothing new in that one)

    @classmethod
    def of(
        cls,
        address: ShardAddress,
        group: str,
        lane: LaneState,
        cursor: Cursor | None,
        head: Head | None,
        *,
        cursor_known: bool = True,
    ) -> LaneView:
        view = cls(address, group, lane.lane, lane.state, lane.acked, cursor, head, cursor_known)
        view.last_ms, view.acks_added, view.retired = lane.last_ms, lane.acks_added, lane.retired
        if head is not None:
            view.floor = head.floor
            view.dirty = drop_below(view.state, head.floor)
        return view

    def figures(self, now_ms: int) -> Figures:
        """This lane's share of its shard's figures (`GroupLanes.figures`) as read; none when the HEAD
        was not read."""
        if self.head is None:
            return Figures()
        lane = LaneState(self.lane, self.state, self.acked, self.last_ms, self.acks_added, self.retired)
        return GroupLanes(self.cursor, {self.lane: lane}).figures(self.head.next, now_ms, self.floor)

    @property
    def on_stripe(self) -> bool:
        """Whether this lane reads a stripe of a striped split (lanes 1 .., not its lane 0)."""
        return bool(self.lane and self.cursor is not None and self.cursor.stripe)

    @property
    def bounds(self) -> tuple[int, int] | None:
        """The range this lane reads: its claim [lo, hi) (from the cursor, or the end its state adopted
        when the cursor was not read); (0, HEAD next) for the one lane; None when that is not known."""
        if self.cursor is not None:
            return self.cursor.range_of(self.lane, self.state.read)
        if not self.cursor_known:
            return (0, self.state.end) if self.state.end > self.state.read else None
        if self.lane:
            return None  # no cursor: the lanes are merged into lane 0, this one reads nothing new
        return None if self.head is None else (0, self.head.next)

    def enter(self, lo: int, hi: int, item: int) -> None:
        """Start reading the range [lo, hi), whose first batch item starts at `item` (<= lo)."""
        self.state.read, self.state.read_item, self.state.end = lo, item, hi
        self.dirty = True

    def fold(self) -> int:
        """Apply the ack records on the item to the pending set; how many pending messages they removed.
        A fold alone is not worth a write (`dirty` stays): readers subtract ack records as it does, and
        the lane's next commit drops them. One lane write in 14 was such a commit when a puller came
        back to a lane it had emptied (twin, 10 pullers). Except on lane 0 of a split shard: the claims
        write its item, and left unfolded (the pending set it held at the split, the runs acking it)
        it passed 1 KB: 2 WRU a claim (twin, 1,000 pullers)."""
        if not self.acked:
            return 0
        done = 0
        for seq in acked_seqs(self.acked):
            if self.state.pending.pop(seq, None) is not None:
                done += 1
        self.folded |= self.acked
        self.acked = frozenset()
        if self.lane == 0 and self.cursor is not None:
            self.dirty = True  # every claim writes lane 0's item while split, paid by its size: keep it small
        return done


class StateCommit:
    def __init__(self, store: ShardStore, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def backoff(self, attempt: int) -> None:
        if attempt:
            self.clock.sleep(random.uniform(0, 0.002 * min(attempt, 10)))

    def save(self, view: LaneView, old_version: int) -> bool:
        """Commit the lane over `old_version`. False: lost; `view` now holds the winner's lane."""
        try:
            self.store.commit_lane(
                view.address,
                view.group,
                view.lane,
                view.state,
                old_version,
                now_ms=self.clock(),
                folded=view.folded,
                # An ack recorded (by ADD) after the lane was read is not folded in: a redelivery of
                # that message must not commit, or it would be delivered after its ack.
                acks_added=view.acks_added if view.redelivered else None,
            )
        except StateConflict as exc:
            view.state, view.acked, view.folded = exc.winner.state, exc.winner.acked, frozenset()
            view.acks_added, view.retired = exc.winner.acks_added, exc.winner.retired
            if view.lane == 0 and view.cursor_known:
                view.cursor = exc.cursor
            view.dirty = drop_below(view.state, view.floor)
            return False
        view.state.version = old_version + 1
        view.folded, view.dirty, view.redelivered = frozenset(), False, False
        return True

    @staticmethod
    def exhausted(what: str) -> errors.Throttled:
        return errors.Throttled(f"too many consumers are {what} this shard at once; retry shortly")
