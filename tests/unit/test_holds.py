"""`Holds.of`: which striped shards a container's polls leave out, on survey reads built as
bench/planner_cpu.py builds them (every shard cut into 16 stripes, read to HEAD)."""

from __future__ import annotations

from bench.planner_cpu import GROUP, MAX_STRIPES, NOW_MS, striped_reads
from sluice.engine.groupstate import Pending
from sluice.engine.pullplan import BUSY_MS, HELD_MS, Busy, Holds

TAKEN = Busy(BUSY_MS, frozenset(), HELD_MS)
BASE_ITEM = 9_900  # an item lane 0 read before the cut


def test_a_shard_is_left_out_only_while_every_stripe_is_held_and_lane_0_holds_nothing() -> None:
    reads = striped_reads(3, one_left=False)
    reads[1].groups[GROUP].lanes[MAX_STRIPES].last_ms = NOW_MS - HELD_MS  # its puller left
    zero = reads[2].groups[GROUP].lane0.state
    zero.pending[BASE_ITEM] = Pending(item=BASE_ITEM, due_ms=NOW_MS + 30_000, attempts=1, leased=True)

    holds = Holds.of(reads, GROUP, NOW_MS, TAKEN)

    assert holds.active(NOW_MS) == {0}  # shard 2: lane 0's lease kept across the cut may come due
    assert holds.shards[0].until_ms == NOW_MS - 100 + HELD_MS  # the first moment a hold may lapse
    until = holds.shards[0].until_ms
    assert holds.active(until - 1) == {0} and holds.active(until) == frozenset()


def test_a_stripe_its_puller_left_ends_the_shards_hold() -> None:
    assert Holds.of(striped_reads(4, one_left=True), GROUP, NOW_MS, TAKEN).active(NOW_MS) == frozenset()
    held = striped_reads(4, one_left=False)
    assert Holds.of(held, GROUP, NOW_MS + HELD_MS, TAKEN).active(NOW_MS) == frozenset()  # every hold lapsed


def test_each_shard_is_left_out_until_its_own_first_hold_may_lapse() -> None:
    """The holds' earliest lapse used to bring every shard back into the next poll; each shard now comes
    back at its own."""
    reads = striped_reads(2, one_left=False)
    for state in reads[1].groups[GROUP].lanes.values():
        state.last_ms += 300 if state.lane else 0  # shard 1's stripes committed 300 ms later
    holds = Holds.of(reads, GROUP, NOW_MS + 200, TAKEN)
    first = NOW_MS - 100 + HELD_MS  # shard 0's first moment a hold may lapse
    assert holds.active(first - 1) == {0, 1}
    assert holds.active(first) == {1} and holds.active(first + 300) == frozenset()
    assert holds.backlog({1}) == holds.shards[1].figures.backlog


def test_a_poll_updates_the_holds_of_the_shards_it_read_in_full_and_keeps_the_others() -> None:
    """A poll leaves held shards out, so it reads the others only: their holds are replaced by what it
    found (none, for a shard whose stripe a puller left), the held shards' stay as they were. Before,
    only a poll that left no shard out recorded holds: a shard found held by any other poll was read
    again at every poll."""
    before = Holds.of(striped_reads(3, one_left=False), GROUP, NOW_MS, TAKEN)
    reread = striped_reads(2, one_left=True)[1:]  # shard 1 read again: a stripe there was left
    after = before.updated(Holds.of(reread, GROUP, NOW_MS, TAKEN), NOW_MS)
    assert after.active(NOW_MS) == {0, 2} and after.shards[0] == before.shards[0]
    sample = striped_reads(3, one_left=True)[2:]
    sample[0].groups[GROUP].lanes.pop(5)  # shard 2 read without every lane: not news about its hold
    assert after.updated(Holds.of(sample, GROUP, NOW_MS, TAKEN), NOW_MS).active(NOW_MS) == {0, 2}
    lapsed = after.shards[0].until_ms  # shards 0 and 2: committed at the same moment
    assert after.updated(Holds(), lapsed - 1).shards.keys() == {0, 2}
    assert after.updated(Holds(), lapsed).shards == {}  # dropped once lapsed: no growth
