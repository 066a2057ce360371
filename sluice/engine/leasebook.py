"""The lease state machine of one group on one shard, pure: what a pull, an ack, a retry or an extend
does to a `GroupState`, with no storage and no clock of its own (`now` is handed in).

A message below the read level is either done (absent) or pending: leased until `due_ms`, delayed
(not leased, deliverable at `due_ms`), or waiting behind its key on an ordered queue. A delivery
leases it (`attempts` + 1); an ack deletes it; a retry un-leases it until its delay ran out; an extend
moves the deadline. Only the latest delivery's lease may retry or extend (acks stay permissive).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from sluice.engine import ordering
from sluice.engine.groupstate import GroupState, Pending

MAX_PENDING = 5_000  # leased + delayed messages per shard and group: bounds the state item


class Op(Enum):
    """What an ack-path request does to a pending message."""

    ACK = "ack"
    RETRY = "retry"  # back to the queue after a delay (or to the DLQ when out of deliveries)
    EXTEND = "extend"  # push the lease deadline out


class Outcome(Enum):
    DONE = "done"  # acked or extended
    RETRIED = "retried"
    EXHAUSTED = "exhausted"  # a retry of a message out of deliveries: it goes to the dead letter queue
    GONE = "gone"  # already acked (or purged, or dead-lettered)
    STALE = "stale"  # an older delivery's lease: the message belongs to a later one


class Fresh(Enum):
    """What happens to a message read for the first time."""

    LEASED = "leased"
    DELAYED = "delayed"  # not visible yet: parked in pending, blocking nothing behind it
    HELD = "held"  # ordered queues: an earlier message with its key is still pending


@dataclass(frozen=True)
class Due:
    exhausted: list[int]  # leased too often: to the dead letter queue
    redeliver: list[int]  # in order, each first in line for its key


class LeaseBook:
    def __init__(self, state: GroupState, *, ordered: bool = False) -> None:
        self.state = state
        self.ordered = ordered

    @property
    def full(self) -> bool:
        return len(self.state.pending) >= MAX_PENDING

    # --- pulls --------------------------------------------------------------------------------------------

    def due(self, now_ms: int, max_deliveries: int, dead_letter_cap: int) -> Due:
        """Pending messages whose lease or delay ran out: those delivered `max_deliveries` times go to the
        dead letter queue (at most `dead_letter_cap` per call; one whose dead letter queue was missing
        waits un-leased, still out of deliveries); the others may be delivered again."""
        state = self.state
        due = state.due(now_ms)
        exhausted_all = [s for s in due if state.pending[s].attempts >= max_deliveries]
        spent = set(exhausted_all)
        redeliver = [s for s in due if s not in spent]
        if self.ordered:
            redeliver = ordering.deliverable(state, redeliver)
        return Due(exhausted_all[:dead_letter_cap], redeliver)

    def redelivery(self, seq: int, now_ms: int, visibility_ms: int) -> Pending:
        """The entry a redelivery of `seq` leaves (stored with `lease`, once the response admits it)."""
        entry = self.state.pending[seq]
        return Pending(
            item=entry.item, due_ms=now_ms + visibility_ms, attempts=entry.attempts + 1, leased=True
        )

    def lease(self, seq: int, entry: Pending) -> None:
        self.state.pending[seq] = entry

    @staticmethod
    def first_lease(item: int, now_ms: int, visibility_ms: int) -> Pending:
        return Pending(item=item, due_ms=now_ms + visibility_ms, attempts=1, leased=True)

    def read_fresh(
        self, seq: int, item: int, visible_at_ms: int, partition_key: str | None, now_ms: int, entry: Pending
    ) -> Fresh:
        """Move the read level past `seq`, read for the first time; `entry` is its lease if it is one."""
        state = self.state
        state.read = seq + 1
        if visible_at_ms > now_ms:
            state.pending[seq] = Pending(item=item, due_ms=visible_at_ms, attempts=0, leased=False)
            return Fresh.DELAYED
        if self.ordered and ordering.hold_fresh(state, seq, item, partition_key, now_ms):
            return Fresh.HELD
        state.pending[seq] = entry
        return Fresh.LEASED

    def skip_to(self, seq: int) -> None:
        """Everything below `seq` is done without a delivery (a sealed gap, expired, before the start)."""
        self.state.read = self.state.read_item = seq

    def drop(self, seqs: list[int]) -> None:
        """Dead-lettered: no longer this group's to deliver."""
        for seq in seqs:
            del self.state.pending[seq]

    def postpone(self, seqs: list[int], until_ms: int) -> None:
        """Not delivered and not dropped (its dead letter queue is missing): due again at `until_ms`."""
        for seq in seqs:
            entry = self.state.pending[seq]
            entry.leased, entry.due_ms = False, until_ms

    # --- acks, retries, extends ---------------------------------------------------------------------------

    def ack(self, seq: int) -> bool:
        """Permissive about which delivery's lease names it: False when it is no longer pending."""
        return self.state.pending.pop(seq, None) is not None

    def settle(
        self,
        op: Op,
        seq: int,
        attempt: int,
        now_ms: int,
        *,
        value_ms: int,
        max_deliveries: int,
    ) -> Outcome:
        """Apply one ack, retry (`value_ms`: its delay) or extend (`value_ms`: the new visibility)."""
        entry = self.state.pending.get(seq)
        if entry is None:
            return Outcome.GONE
        if op is Op.ACK:
            del self.state.pending[seq]
            return Outcome.DONE
        if not (entry.leased and entry.attempts == attempt):
            # An older delivery's lease: the message now belongs to a later puller (or waits for one).
            # Extending or retrying it would take the message away from that puller.
            return Outcome.STALE
        if op is Op.EXTEND:
            entry.due_ms = now_ms + value_ms
            return Outcome.DONE
        if entry.attempts >= max_deliveries:
            return Outcome.EXHAUSTED
        entry.leased, entry.due_ms = False, now_ms + value_ms
        return Outcome.RETRIED
