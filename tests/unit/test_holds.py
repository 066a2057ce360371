"""`Holds.of`: which striped shards a container's polls leave out, on survey reads built as
bench/planner_cpu.py builds them (every shard cut into 16 stripes, read to HEAD)."""

from __future__ import annotations

from dataclasses import replace

from bench.planner_cpu import GROUP, MAX_STRIPES, NOW_MS, striped_reads
from sluice.engine.groupstate import Pending
from sluice.engine.lanes import Figures
from sluice.engine.pullplan import BUSY_MS, HELD_MS, HOLD_TRUST_MS, Busy, Holds, LaneHold

TAKEN = Busy(BUSY_MS, frozenset(), HELD_MS)  # holds read are left alone until they may lapse
TRUSTING = Busy(BUSY_MS, frozenset(), HELD_MS, HOLD_TRUST_MS)  # as `PullPlanner.busy` builds it
BASE_ITEM = 9_900  # an item lane 0 read before the cut


def test_a_shard_is_left_out_only_while_every_stripe_is_held_and_lane_0_has_nothing_due() -> None:
    reads = striped_reads(3, one_left=False)
    reads[1].groups[GROUP].lanes[MAX_STRIPES].last_ms = NOW_MS - HELD_MS  # its puller left
    zero = reads[2].groups[GROUP].lane0.state
    zero.pending[BASE_ITEM] = Pending(item=BASE_ITEM, due_ms=NOW_MS, attempts=1, leased=True)

    holds = Holds.of(reads, GROUP, NOW_MS, TAKEN)

    assert holds.active(NOW_MS) == {0}  # shard 2: lane 0's lease kept across the cut came due
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


def test_lane_0s_leases_from_before_the_cut_leave_a_shard_out_until_one_comes_due() -> None:
    """Such a shard used to be read at every poll of every puller without a stripe until its leases were
    acked: with holds trusted longer, all of them surveyed it, and its partition throttled the sends."""
    reads = striped_reads(2, one_left=False)
    zero = reads[1].groups[GROUP].lane0.state
    zero.pending[BASE_ITEM] = Pending(item=BASE_ITEM, due_ms=NOW_MS + 500, attempts=1, leased=True)
    zero.pending[BASE_ITEM + 1] = Pending(item=BASE_ITEM, due_ms=NOW_MS + 200, attempts=0, leased=False)

    holds = Holds.of(reads, GROUP, NOW_MS, TRUSTING)

    assert holds.active(NOW_MS) == {0, 1}
    assert holds.shards[1].until_ms == NOW_MS + 200  # the delayed one may be delivered then
    assert holds.shards[0].until_ms >= NOW_MS + HOLD_TRUST_MS // 2


def test_a_hold_read_is_left_alone_about_the_trust_even_when_it_may_lapse_sooner() -> None:
    """Holders renew their holds every block: a puller without a stripe that read a shard again at each
    lapse found it held again (twice a second). The trust is spread (half to one and a half times), so
    pullers that read together do not come back together."""
    reads = striped_reads(20, one_left=False)
    lapse = NOW_MS - 100 + HELD_MS

    holds = Holds.of(reads, GROUP, NOW_MS, TRUSTING)

    untils = {hold.until_ms for hold in holds.shards.values()}
    assert len(holds.shards) == 20 and len(untils) > 1
    assert all(NOW_MS + HOLD_TRUST_MS // 2 <= until <= NOW_MS + 3 * HOLD_TRUST_MS // 2 for until in untils)
    assert min(untils) > lapse
    late = Holds.of(reads, GROUP, NOW_MS, replace(TRUSTING, held_ms=4 * HOLD_TRUST_MS))
    assert {h.until_ms for h in late.shards.values()} == {NOW_MS - 100 + 4 * HOLD_TRUST_MS}  # the later lapse


def test_stripes_left_unread_count_as_held_while_their_container_trusts_what_it_read() -> None:
    """`survey_lanes` leaves unread the stripes its container read held and trusts still: a shard read
    that way is held until the earliest of those trusts, and its figures count them as then read. A
    stripe left unread that the container does not trust held leaves the shard out of the holds (read
    again at the next poll)."""
    reads = striped_reads(2, one_left=False)
    skipped = Figures(in_flight=100, unread=7)
    known = {(0, lane): LaneHold(NOW_MS + 900 + lane, skipped) for lane in range(1, MAX_STRIPES + 1)}
    reads[0].groups[GROUP].lanes = {0: reads[0].groups[GROUP].lane0}  # lane 0 alone read
    for lane in (3, 4):
        reads[1].groups[GROUP].lanes.pop(lane)  # two stripes unread, not trusted held

    holds = Holds.of(reads, GROUP, NOW_MS, TRUSTING, known)

    assert holds.read == {0} and holds.active(NOW_MS) == {0}
    assert holds.shards[0].until_ms == NOW_MS + 901  # stripe 1's trust ends first
    lane0 = reads[0].figures(GROUP, NOW_MS).backlog
    assert holds.shards[0].figures.backlog == lane0 + MAX_STRIPES * 107  # the stripes as remembered
    assert Holds.of(reads, GROUP, NOW_MS, TRUSTING).read == frozenset()  # nothing trusted: not news
