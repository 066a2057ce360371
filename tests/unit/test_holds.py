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

    assert holds.shards == {0}  # shard 2: lane 0's lease kept across the cut may come due
    assert holds.until_ms == NOW_MS - 100 + HELD_MS  # the first moment a hold may lapse
    assert holds.active(holds.until_ms - 1) == {0} and holds.active(holds.until_ms) == frozenset()


def test_a_stripe_its_puller_left_ends_the_shards_hold() -> None:
    assert Holds.of(striped_reads(4, one_left=True), GROUP, NOW_MS, TAKEN).shards == frozenset()
    held = striped_reads(4, one_left=False)
    assert Holds.of(held, GROUP, NOW_MS + HELD_MS, TAKEN).shards == frozenset()  # every hold lapsed
