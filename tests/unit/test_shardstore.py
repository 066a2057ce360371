"""The shard-store port's contract, on both stores: the in-memory one and the DynamoDB one (on the twin's
in-memory DynamoDB, which evaluates the same expressions and conditions)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.twin.world import build
from sluice.codec import StoredMessage
from sluice.engine.groupstate import GroupState, Pending
from sluice.engine.store import (
    AllocationRefused,
    ClaimRefused,
    HeadCounts,
    HeadGuard,
    InlinePayload,
    LaneAddress,
    ObjectPayload,
    ShardAddress,
    ShardStore,
    SlotTaken,
    StateConflict,
)
from sluice.engine.store.memory import MemoryShardStore
from sluice.models import Shard

AT = ShardAddress("q", "0000abcd", Shard(id=3, table=1, created_ms=0))
COUNTS = HeadCounts(messages=2, bytes=10)


@pytest.fixture(params=["memory", "dynamo"])
def store(request: pytest.FixtureRequest) -> Iterator[ShardStore]:
    if request.param == "memory":
        yield MemoryShardStore()
    else:
        yield build().engine.backend.store


def msgs(*bodies: bytes) -> list[StoredMessage]:
    return [StoredMessage(body=b) for b in bodies]


def test_allocate_takes_contiguous_ranges_and_counts_them(store: ShardStore) -> None:
    first = store.allocate(AT, 2, 100, COUNTS)
    second = store.allocate(AT, 3, 100, COUNTS)
    assert (first.first_seq, second.first_seq) == (0, 2)
    head = store.head(AT)
    assert (head.next, head.ts) == (5, 100)
    assert head.counters[:3] == (2, 4, 20)  # requests, messages, bytes
    assert (first.map_version, first.map_route, head.exists) == (0, "", True)  # never stamped
    assert not store.head(ShardAddress("q", "0000abcd", Shard(id=4, table=1, created_ms=0))).exists


def test_map_stamps_only_move_forward_and_come_back_with_allocations_and_refusals(
    store: ShardStore,
) -> None:
    """issue 23's hooks: a stamp (`mv`, `mo`) makes a HEAD nobody wrote, never goes back, and every
    allocation (ALL_NEW) and refusal (ALL_OLD) carries it."""
    assert store.stamp_map(AT, 3, "1a2b3c4d/4/0-3")
    head = store.head(AT)
    assert (head.exists, head.map_version, head.map_route, head.next) == (True, 3, "1a2b3c4d/4/0-3", 0)
    assert not store.stamp_map(AT, 3, "other") and not store.stamp_map(AT, 2, "older")
    first = store.allocate(AT, 2, 100, COUNTS, fail_fast=True)
    assert (first.first_seq, first.map_version, first.map_route) == (0, 3, "1a2b3c4d/4/0-3")
    assert store.stamp_map(AT, 4, "1a2b3c4d/4/0-7")
    store.seal(AT, 200)
    store.seal(AT, 300)  # idempotent
    with pytest.raises(AllocationRefused) as sealed:
        store.allocate(AT, 1, 400, COUNTS)
    assert (sealed.value.head.map_version, sealed.value.head.map_route) == (4, "1a2b3c4d/4/0-7")


def test_allocate_refuses_a_sealed_head_an_older_producer_and_a_clock_behind(store: ShardStore) -> None:
    store.allocate(AT, 1, 200, COUNTS, producer_version=5)
    with pytest.raises(AllocationRefused) as behind:
        store.allocate(AT, 1, 150, COUNTS)
    assert behind.value.head.ts == 200
    with pytest.raises(AllocationRefused) as fenced:
        store.allocate(AT, 1, 300, COUNTS, producer_version=4)
    assert fenced.value.head.producer_version == 5
    store.seal(AT, 300)
    with pytest.raises(AllocationRefused) as sealed:
        store.allocate(AT, 1, 400, COUNTS)
    assert sealed.value.head.sealed and store.head(AT).next == 1


def test_a_guarded_allocation_holds_only_while_the_guard_is_unchanged(store: ShardStore) -> None:
    store.allocate(AT, 0, 1, COUNTS, guard=HeadGuard("osv", None, {"osv": 1}))
    with pytest.raises(AllocationRefused) as refused:
        store.allocate(AT, 0, 2, COUNTS, guard=HeadGuard("osv", None, {"osv": 1}))
    assert refused.value.guard_value == 1
    store.allocate(AT, 1, 3, COUNTS, guard=HeadGuard("osv", 1, {"osv": 2}))


def test_batches_scan_in_order_and_a_sealed_gap_refuses_the_late_writer(store: ShardStore) -> None:
    store.write_batch(AT, 0, 10, msgs(b"a", b"b"), expires_s=None)
    assert store.seal_gap(AT, 2, 4, 20_000)
    store.write_batch(AT, 4, 30, msgs(b"c"), expires_s=99)
    with pytest.raises(SlotTaken):
        store.write_batch(AT, 2, 15, msgs(b"late"), expires_s=None)
    items = list(store.scan(AT, 0))
    assert [(i.first, i.count, i.gap) for i in items] == [
        (0, 2, False),
        (2, 1, True),
        (3, 1, True),
        (4, 1, False),
    ]
    assert [m.body for m in store.messages(AT, items[0])] == [b"a", b"b"]
    assert isinstance(items[0].payload, InlinePayload)
    assert items[-1].expired(99_000) and not items[-1].expired(98_999)
    assert [i.first for i in store.scan(AT, 1, to_seq=3, limit=5)] == [2, 3]
    before = store.item_before(AT, 1)
    assert before is not None and before.first == 0
    assert sorted(store.items(AT, [0, 4, 7])) == [0, 4]
    assert not store.seal_gap(AT, 4, 5, 1)  # taken: the caller re-reads


def test_a_payload_tier_item_reads_its_bodies_from_its_object_in_one_ranged_read(store: ShardStore) -> None:
    from sluice.engine.payloads import TierObject

    sent = msgs(b"alpha", b"", b"gamma-gamma")
    tier = TierObject.of(AT.pk, 0, sent, days=5)
    if isinstance(store, MemoryShardStore):
        store.put_object(tier.key, tier.data, AT)
    else:
        store.backend.bucket_for(AT.shard).put(tier.key, tier.data, tags=tier.tags)
    store.write_batch(AT, 0, 100, tier.index[:2], None, object_key=tier.key)
    store.write_batch(AT, 2, 100, tier.index[2:], None, object_key=tier.key, object_base=tier.base_of(2))
    first, second = list(store.scan(AT, 0))
    assert isinstance(first.payload, ObjectPayload) and first.payload.key == tier.key
    assert store.body_sizes(AT, first) == [5, 0]
    assert [m.body for m in store.messages(AT, first)] == [b"alpha", b""]
    assert [m.body for m in store.messages(AT, second)] == [b"gamma-gamma"]


def test_floor_flush_marks_and_expiry(store: ShardStore) -> None:
    store.allocate(AT, 4, 1, COUNTS)
    store.set_floor(AT)
    assert store.head(AT).floor == 4
    assert store.mark_flushed(AT, 0, 3) and not store.mark_flushed(AT, 0, 4)
    store.mark_ttl_set(AT, 3)
    store.mark_ttl_set(AT, 2)  # never moves back
    assert store.head(AT).ttl_set == 3
    store.write_batch(AT, 0, 1_000, msgs(b"x"), expires_s=None)
    assert store.set_expiry(AT, 0, 5) and not store.set_expiry(AT, 9, 5)
    store.delete_items(AT, [0])
    assert list(store.scan(AT, 0)) == []


def test_lane_commits_are_conditional_on_the_version_and_fold_recorded_acks(store: ShardStore) -> None:
    state = GroupState(read=3, read_item=2, pending={1: Pending(item=0, due_ms=50, attempts=1, leased=True)})
    store.commit_lane(AT, "g", 0, state, 0, now_ms=1)
    store.record_acks(AT, "g", 0, frozenset({"1:1"}))
    with pytest.raises(StateConflict) as lost:
        store.commit_lane(AT, "g", 0, GroupState(read=9), 0, now_ms=1)
    winner = lost.value.winner
    assert (winner.state.version, winner.state.read, winner.acked) == (1, 3, frozenset({"1:1"}))
    store.commit_lane(AT, "g", 0, GroupState(read=4), 1, folded=frozenset({"1:1"}), now_ms=1)
    (view,), unread = store.read_groups([AT], ["g", "never"])
    lane0 = view.groups["g"].lane0
    assert not unread and (lane0.state.read, lane0.state.version, lane0.acked) == (4, 2, frozenset())
    assert view.groups["never"].lane0.state.version == 0 and view.groups["g"].cursor is None
    store.put_state(AT, "h", GroupState(read=7))
    store.delete_group(AT, "h")
    (view,), _ = store.read_groups([AT], ["h"])
    assert view.groups["h"].lane0.state.version == 0


def test_a_glance_reads_heads_and_lane_versions(store: ShardStore) -> None:
    """What a long-poll watches between its surveys (eventually consistent on DynamoDB)."""
    other = ShardAddress("q", "0000abcd", Shard(id=4, table=0, created_ms=0))
    store.allocate(AT, 2, 100, COUNTS)
    store.commit_lane(AT, "g", 0, GroupState(read=2), 0, now_ms=1)
    lanes = [LaneAddress(AT, "g", 0), LaneAddress(AT, "g", 1), LaneAddress(other, "g", 0)]
    heads, versions = store.glance([AT, other], lanes)
    assert [(h.next, h.exists) for h in heads] == [(2, True), (0, False)] and versions == [1, 0, 0]
    assert store.glance([], []) == ([], [])


def test_lanes_split_claim_without_overshoot_and_merge_back(store: ShardStore) -> None:
    store.allocate(AT, 1_000, 1, COUNTS)
    lane0 = GroupState(read=100, read_item=100, version=0)
    assert not store.split(AT, "g", 4)  # lane 0 never committed: nothing to split from
    store.commit_lane(AT, "g", 0, lane0, 0, now_ms=1)
    assert store.split(AT, "g", 4) and not store.split(AT, "g", 4)
    read = store.read_lanes(AT, "g", [2], head=True)
    cursor = read.cursor
    assert cursor is not None and (cursor.next, cursor.lanes, cursor.high) == (100, 4, 4)
    assert store.claim(AT, "g", 2, 300, limit=1_000 - 300, seen_hi=None) == (100, 400)
    with pytest.raises(ClaimRefused) as stale:  # the lane's previous claim is not the one seen
        store.claim(AT, "g", 2, 300, limit=700, seen_hi=None)
    assert stale.value.cursor is not None and stale.value.cursor.range_of(2) == (100, 400)
    assert store.claim(AT, "g", 3, 500, limit=500, seen_hi=None) == (400, 900)
    with pytest.raises(ClaimRefused):  # 900 + 200 would pass HEAD next (1,000)
        store.claim(AT, "g", 1, 200, limit=800, seen_hi=None)
    with pytest.raises(StateConflict):  # the split moved lane 0's version on
        store.commit_lane(AT, "g", 0, lane0, 1, now_ms=1)
    assert store.claim(AT, "g", 0, 100, limit=900, seen_hi=100) == (
        900,
        1_000,
    )  # lane 0 claims like the others
    (view,), _ = store.read_groups([AT], ["g"])
    group = view.groups["g"]
    assert group.cursor is not None and group.cursor.next == 1_000 and set(group.lanes) == {0, 1, 2, 3}
    seen = group.cursor
    assert store.set_lanes(AT, "g", 1, 1, seen) and not store.set_lanes(AT, "g", 2, 2, seen)
    with pytest.raises(ClaimRefused):  # lane 2 no longer claims
        store.claim(AT, "g", 2, 1, limit=10_000, seen_hi=400)
    current = store.read_lanes(AT, "g", [], head=False)
    assert current.cursor is not None
    assert store.merge(AT, "g", GroupState(read=1_000), 2, current.cursor)
    assert store.read_lanes(AT, "g", [], head=False).cursor is None


def test_a_striped_split_is_an_epoch_whose_merge_retires_its_lanes_all_or_none(store: ShardStore) -> None:
    striped_epoch_contract(store, AT)


def striped_epoch_contract(store: ShardStore, at: ShardAddress) -> None:
    """Stripes claim nothing, so the merge writes every stripe lane on the version it saw (one
    transaction) and marks it retired for the epoch: a commit from a read before the merge fails, and a
    stripe lane read after it reads nothing new under that epoch's cursor. (Also run on moto.)"""
    store.allocate(at, 1_000, 1, COUNTS)
    store.commit_lane(at, "g", 0, GroupState(read=100, read_item=100), 0, now_ms=1)
    assert store.split(at, "g", 3, stripe=100)
    cursor = store.read_lanes(at, "g", [], head=False).cursor
    assert cursor is not None and (cursor.next, cursor.stripes, cursor.stripe, cursor.epoch) == (
        100,
        2,
        100,
        1,
    )
    assert (
        cursor.block(1, 0) == (100, 200)
        and cursor.block(2, 0) == (200, 300)
        and cursor.block(1, 250) == (300, 400)
    )
    assert cursor.striped(2, 100, 1_000) == 400  # blocks 200, 400, 600, 800
    store.commit_lane(at, "g", 1, GroupState(read=1_000, read_item=1_000), 0, now_ms=2)
    lane1 = store.read_lanes(at, "g", [1, 2], head=False)
    zero = lane1.lanes[0].state.version
    stripes = {1: lane1.lanes[1].state, 2: lane1.lanes[2].state}  # lane 2 never committed: version 0
    stale = GroupState(read=1_000, read_item=1_000, version=stripes[1].version)
    # A stripe lane that moved since it was seen fails the whole merge: nothing is written.
    store.commit_lane(at, "g", 2, GroupState(read=1_000, read_item=1_000), 0, now_ms=3)
    assert not store.merge(at, "g", GroupState(read=1_000, read_item=1_000), zero, cursor, stripes)
    assert store.read_lanes(at, "g", [1], head=False).lanes[1].retired == 0
    stripes[2] = store.read_lanes(at, "g", [2], head=False).lanes[2].state
    assert store.merge(at, "g", GroupState(read=1_000, read_item=1_000), zero, cursor, stripes)
    after = store.read_lanes(at, "g", [1, 2], head=False)
    assert after.cursor is None and after.lanes[0].state.read == 1_000
    assert after.lanes[1].retired == after.lanes[2].retired == 1
    with pytest.raises(StateConflict):  # a puller that read lane 1 before the merge
        store.commit_lane(at, "g", 1, stale, stale.version, now_ms=4)
    # The next striped split is a new epoch: its lanes read again.
    assert store.split(at, "g", 3, stripe=100)
    again = store.read_lanes(at, "g", [1], head=False)
    assert again.cursor is not None and again.cursor.epoch == 2 and again.lanes[1].retired == 1


def test_the_other_lanes_are_read_but_those_skipped(store: ShardStore) -> None:
    store.allocate(AT, 1_000, 1, COUNTS)
    store.commit_lane(AT, "g", 0, GroupState(read=100, read_item=100, version=0), 0, now_ms=1)
    assert store.split(AT, "g", 4)
    (view,), _ = store.read_groups([AT], ["g"], every_lane=False)
    assert set(view.groups["g"].lanes) == {0}
    (every,), _ = store.read_other_lanes([view])
    (some,), _ = store.read_other_lanes([view], skip={(AT.pk, "g", 2), (AT.pk, "other", 1)})
    (none,), _ = store.read_other_lanes([view], skip={(AT.pk, "g", lane) for lane in (1, 2, 3)})
    assert set(every.groups["g"].lanes) == {0, 1, 2, 3}
    assert set(some.groups["g"].lanes) == {0, 1, 3}  # another group's lane skipped is not this one
    assert set(none.groups["g"].lanes) == {0}
