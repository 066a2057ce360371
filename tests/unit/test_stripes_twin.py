"""Stripes on the twin (the real engine on the in-memory DynamoDB, virtual time): a live stream sent to
one shard faster than one puller works is cut into stripes, each held by its puller; every message is
acked once; and when the stream stops, an empty pull merges the stripes back into one lane."""

from __future__ import annotations

from collections import Counter
from functools import partial

import pytest

from bench.twin.world import build
from sluice.engine.commit import LaneView
from sluice.engine.consume import LONG_POLL_MAX_INTERVAL, STALE_VIEW_MS, _Pull
from sluice.engine.groupstate import GroupState
from sluice.engine.keys import lane_partition
from sluice.engine.lanes import STRIPE_BLOCK, Figures
from sluice.engine.pullplan import (
    HELD_LANES_PRUNE_AT,
    HELD_MS,
    HOLD_TRUST_MS,
    WALK_MS,
    Busy,
    Holds,
    ShardHold,
    shares_lane,
)
from sluice.engine.store import ShardAddress
from sluice.models import LeasedBatch, OutgoingMessage, Shard


def test_a_stream_one_puller_cannot_keep_up_with_is_striped_and_merged_back_when_it_stops() -> None:
    """With eventually consistent reads up to a second stale (the glances at held stripes, the watches)."""
    world = build(seed=5, stale_reads=True)
    engine, sim = world.engine, world.sim
    queue = engine.queues.create("q", {"min_shards": 1, "max_shards": 1})
    at = ShardAddress.of(queue, queue.shards[0])
    store = engine.backend.store
    sent: list[str] = []
    acked: Counter[str] = Counter()
    striped: list[int] = []

    def producer() -> None:  # 1,000 msg/s for 3 s; a puller working 0.25 s a batch of 100 takes ~350
        publisher = world.container().publisher
        while sim.now < 3:
            ids = publisher.publish("q", [OutgoingMessage(body=b"x" * 200) for _ in range(50)])
            sent.extend(ids.message_ids)
            sim.sleep(0.05)
        cursor = store.read_lanes(at, "default", [], head=False).cursor
        striped.append(0 if cursor is None else cursor.stripes)

    def puller() -> None:
        while sim.now < 8:
            consumer = world.container().consumer
            result = consumer.pull("q", group="default", batch_size=100, wait_ms=1_000)
            if result.messages:
                sim.sleep(0.25)
                done = consumer.ack("q", [m.lease_id for m in result.messages])
                assert done.ack_count == len(result.messages), done.warnings
                acked.update(m.id for m in result.messages)

    sim.spawn("producer", producer)
    for i in range(8):
        sim.spawn(f"puller-{i}", puller)
    sim.run_until(10)
    assert striped and striped[0] >= 2  # cut for the rate: ~1,000 / ~350 msg/s, with headroom
    assert len(sent) > 2_000 and set(acked) == set(sent) and set(acked.values()) == {1}
    assert store.read_lanes(at, "default", [], head=False).cursor is None  # merged back once idle
    final = engine.consumer.pull("q", group="default", batch_size=10)
    assert final.messages == [] and final.backlog_exact and final.message_backlog_count == 0
    engine.publisher.publish("q", [OutgoingMessage(body=b"late")])
    late = engine.consumer.pull("q", group="default", batch_size=10)
    assert [m.body for m in late.messages] == [b"late"] and late.backlog_exact  # lane 0 reads on, once


def test_stripes_are_cut_for_pullers_that_share_a_lane_never_for_one_alone() -> None:
    from sluice.engine.lanes import MAX_STRIPES, stripes_for

    # 940 msg/s, a puller back every 0.3 s with 100: ~3 pullers' work, with headroom 5 stripes.
    assert stripes_for(940, 50, 100, 0.3, shared=True) == 5
    assert stripes_for(940, 2_000, 100, 0.3, shared=False) == 0  # alone and behind: stripes cannot help
    assert stripes_for(200, 0, 100, 0.3, shared=True) == 0  # one puller keeps up
    assert stripes_for(940, 10_000, 100, 0.3, shared=True) == 0  # a backlog (> 5 s of sends): claims
    assert stripes_for(None, 0, 100, 0.3, shared=True) == 0  # no rate measured yet
    assert stripes_for(100_000, 0, 100, 0.3, shared=True) == MAX_STRIPES


def test_a_lone_puller_behind_a_stream_keeps_one_lane() -> None:
    world = build(seed=6)
    engine, sim = world.engine, world.sim
    queue = engine.queues.create("q", {"min_shards": 1, "max_shards": 1})
    at = ShardAddress.of(queue, queue.shards[0])

    def producer() -> None:  # 1,000 msg/s against one puller's ~350
        while sim.now < 2:
            world.container().publisher.publish("q", [OutgoingMessage(body=b"x" * 200) for _ in range(50)])
            sim.sleep(0.05)

    def puller() -> None:
        while sim.now < 2:
            consumer = world.container().consumer
            result = consumer.pull("q", group="default", batch_size=100, wait_ms=1_000)
            sim.sleep(0.25)
            consumer.ack("q", [m.lease_id for m in result.messages])

    sim.spawn("producer", producer)
    sim.spawn("puller", puller)
    sim.run_until(3)
    assert engine.backend.store.read_lanes(at, "default", [], head=False).cursor is None


def test_no_pull_takes_a_stripe_its_puller_holds_and_a_long_poll_leaves_it_unread() -> None:
    """Two pullers hold the two stripes of a shard: a third pull, even one that waits nothing (the
    last resort of a long-poll's deadline), leaves their new blocks to them and answers an estimate.
    Its container reads the shard again only after HOLD_TRUST_MS (from half to one and a half times)
    and once a hold may lapse (1 s after its holder's commit); another container takes a lapsed one."""
    world = build(seed=7)
    engine, sim = world.engine, world.sim
    queue = engine.queues.create("q", {"min_shards": 1, "max_shards": 1})
    at = ShardAddress.of(queue, queue.shards[0])
    answers: dict[str, LeasedBatch] = {}
    calls: list[int] = []

    def send(n: int) -> None:
        for _ in range(n // 100):
            engine.publisher.publish("q", [OutgoingMessage(body=b"x" * 200) for _ in range(100)])

    def pull(name: str, at_s: float, wait_ms: int = 0) -> None:
        sim.sleep(at_s)
        before = sum(world.dynamo.stats.attempts.values())
        answers[name] = world.container().consumer.pull("q", group="default", batch_size=100, wait_ms=wait_ms)
        if wait_ms:
            calls.append(sum(world.dynamo.stats.attempts.values()) - before)

    send(100)
    first = engine.consumer.pull("q", group="default", batch_size=100)  # lane 0 has a read level now
    engine.consumer.ack("q", [m.lease_id for m in first.messages])
    assert engine.backend.store.split(at, "default", 3, stripe=STRIPE_BLOCK)  # lane 0 + two stripes
    send(200)  # a block on each stripe
    sim.spawn("holder-1", partial(pull, "holder-1", 0.0))
    sim.spawn("holder-2", partial(pull, "holder-2", 0.01))
    sim.spawn("sender", lambda: (sim.sleep(0.1), send(200)))
    sim.spawn("third", lambda: (pull("now", 0.2), pull("waited", 0.0, 500), pull("trusted", 0.4)))
    sim.spawn("fourth", partial(pull, "lapsed", 1.2))
    sim.spawn("later", lambda: (pull("later-now", 0.2), pull("after", 1.5 * HOLD_TRUST_MS / 1000)))
    sim.run_until(5)
    assert len(answers["holder-1"].messages) == len(answers["holder-2"].messages) == 100
    for name in ("now", "waited"):  # both stripes held: their blocks wait for their holders
        assert answers[name].messages == [] and not answers[name].backlog_exact
        assert answers[name].message_backlog_count >= 200
    # The container's last survey (the pull at 0.2 s) found both stripes held until ~1 s: its long-poll
    # reads nothing (before holds: 20 calls, a survey of HEAD + lane 0, each stripe alone and every
    # lane at each of its polls, 50-250 ms apart) and answers the backlog that survey saw.
    assert calls == [0]
    assert answers["trusted"].messages == []  # at 1.1 s: its container trusts what it read at 0.2 s
    assert len(answers["lapsed"].messages) == 100  # ... another's reads: neither holder committed for 1 s
    assert len(answers["after"].messages) == 100  # the trust over, the other lapsed stripe


def test_a_lane_is_shared_when_another_commits_on_it_within_the_cycle() -> None:
    # (version, when) of this container's last commit on the lane; the version its commit replaced.
    assert not shares_lane((7, 1_000), 7, 1_000, 1_000)  # it came back to its own commit: alone
    assert shares_lane((7, 1_000), 9, 1_200, 1_000)  # another committed in between
    # A newcomer (no commit of its own on the lane lately), last committing anywhere at 1,000 ms:
    assert shares_lane(None, 4, 1_100, 1_000)  # another committed there since: a herd rotates on it
    assert not shares_lane(None, 4, 900, 1_000)  # nobody since its last commit: it may be alone


def test_the_coordinators_oldest_age_reads_the_item_a_striped_shards_ack_level_is_in() -> None:
    """Items of 30 messages, sent a second apart, under stripes of 100-sequence blocks (the two never
    line up): after each pull and ack, the coordinator's oldest age is that of the item holding the
    group's ack level, found by one BatchGetItem."""
    from sluice.engine.coordinator.observe import oldest_age_s

    world = build(seed=7)
    engine, sim = world.engine, world.sim
    queue = engine.queues.create("q", {"min_shards": 1, "max_shards": 1})
    at = ShardAddress.of(queue, queue.shards[0])
    for second in range(40):
        sim.now = 10.0 + second
        engine.publisher.publish("q", [OutgoingMessage(body=b"x" * 200) for _ in range(30)])
    sim.now = 60.0
    first = engine.consumer.pull("q", group="default", batch_size=10)
    engine.consumer.ack("q", [m.lease_id for m in first.messages])
    assert engine.backend.store.split(at, "default", 5, stripe=STRIPE_BLOCK)
    consumers = [world.container().consumer for _ in range(3)]
    checked = 0
    for turn in range(12):
        consumer = consumers[turn % 3]
        batch = consumer.pull("q", group="default", batch_size=100)
        consumer.ack("q", [m.lease_id for m in batch.messages])
        (read,) = engine.consumer.planner.states.read(queue, queue.shards, ["default"])
        if not read.backlog("default"):
            break
        level = read.groups["default"].ack_level(read.head.next, read.head.floor)
        sent_at = 10.0 + level // 30  # the second the item holding the level was sent
        assert oldest_age_s(engine.backend, queue, [read], int(sim.now * 1000)) == 60.0 - sent_at
        checked += 1
    assert checked >= 8


def test_a_holder_walks_other_lanes_only_until_its_hold_is_near_its_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two pullers hold the two stripes of shard 0 and have taken their blocks. One of them long-polls:
    its patient polls find its stripe empty and walk the other lanes, each due back on its stripe
    WALK_MS before its hold may lapse (`_Pull.home_by_ms`: its last commit + HELD_MS - WALK_MS); once
    the hold has lapsed, nothing is left to keep and a walk has no end set. A message sent to shard 1
    after that is taken within one poll interval."""
    world = build(seed=8)
    engine, sim = world.engine, world.sim
    queue = engine.queues.create("q", {"min_shards": 2, "max_shards": 2})
    striped, other = queue.shards
    to = [striped]
    monkeypatch.setattr(engine.publisher, "_candidates", lambda _queue, _keyed: to)
    walks: list[tuple[float, int | None, bool]] = []  # (when, home_by_ms, patient)
    got: dict[str, tuple[float, int]] = {}

    def send(shard: Shard, n: int) -> None:
        to[:] = [shard]
        for start in range(0, n, 100):
            engine.publisher.publish(
                "q", [OutgoingMessage(body=b"x" * 200) for _ in range(min(100, n - start))]
            )

    def holder(name: str, at_s: float, long_poll: bool) -> None:
        sim.sleep(at_s)
        consumer = world.container().consumer
        taken = consumer.pull("q", group="default", batch_size=100)
        assert len(taken.messages) == 100  # its stripe's block: it keeps to that stripe
        got[f"{name} took"] = (sim.now, 100)
        consumer.ack("q", [m.lease_id for m in taken.messages])
        if long_poll:
            walk = consumer._walk

            def spy(pull: _Pull, *rest: object) -> None:
                walks.append((sim.now, pull.home_by_ms, pull.patient))
                walk(pull, *rest)  # type: ignore[arg-type]

            monkeypatch.setattr(consumer, "_walk", spy)
            waited = consumer.pull("q", group="default", batch_size=100, wait_ms=2_500)
            got[name] = (sim.now, len(waited.messages))

    def newcomer() -> None:
        sim.sleep(0.1)
        waited = world.container().consumer.pull("q", group="default", batch_size=100, wait_ms=2_500)
        got["newcomer"] = (sim.now, len(waited.messages))

    send(striped, 100)
    first = engine.consumer.pull("q", group="default", batch_size=100)  # lane 0 has a read level now
    engine.consumer.ack("q", [m.lease_id for m in first.messages])
    assert engine.backend.store.split(ShardAddress.of(queue, striped), "default", 3, stripe=STRIPE_BLOCK)
    send(striped, 200)  # a block on each stripe
    sim.spawn("holder-1", partial(holder, "holder-1", 0.0, True))
    sim.spawn("holder-2", partial(holder, "holder-2", 0.01, False))
    sim.spawn("newcomer", newcomer)
    sim.spawn("sender", lambda: (sim.sleep(1.3), send(other, 1)))
    sim.run_until(4)
    (taker,) = [name for name in ("holder-1", "newcomer") if got[name][1] == 1]
    assert got[taker][0] < 1.3 + LONG_POLL_MAX_INTERVAL + 0.1
    took_ms = got["holder-1 took"][0] * 1000  # its commit: a call's latency before this
    due = [home for _at, home, patient in walks if patient and home is not None]
    assert due and all(took_ms - 50 < home - HELD_MS + WALK_MS <= took_ms for home in due)
    assert all(home is None for at, home, _p in walks if at * 1000 >= took_ms + HELD_MS)
    assert any(at * 1000 >= took_ms + HELD_MS for at, _h, _p in walks)


def test_a_holder_due_back_on_its_stripe_leases_from_no_other_lane() -> None:
    """A holder's walk ends when it is due back on its stripe (`_Pull.away`): the lanes left are others'."""
    world = build(seed=10)
    engine = world.engine
    world.sim.now = 10.0
    queue = engine.queues.create("q", {"min_shards": 1, "max_shards": 1})
    engine.publisher.publish("q", [OutgoingMessage(body=b"x") for _ in range(10)])
    consumer, now = engine.consumer, engine.consumer.clock()
    pull = _Pull(queue, "default", 10, 30_000, None, None, home_by_ms=now)
    consumer._lease_from(pull, [(queue.shards[0], 0)], set(), busy=False, read_ms=now)
    assert pull.out == [] and not pull.exact
    pull.home_by_ms = now + WALK_MS  # time left: it leases
    consumer._lease_from(pull, [(queue.shards[0], 0)], set(), busy=False, read_ms=now)
    assert len(pull.out) == 10


def test_a_place_read_long_ago_is_read_again_before_a_take() -> None:
    """A poll that read lanes one by one for 1.9 s took lane 0 on its survey's view, after the shard had
    moved on, and lost every such race (docs/performance.md "Stop 56"). A place read more than
    STALE_VIEW_MS ago is read again first: the take commits on the lane as it is, no race lost."""
    world = build(seed=10)
    engine = world.engine
    world.sim.now = 10.0
    queue = engine.queues.create("q", {"min_shards": 1, "max_shards": 1})
    engine.publisher.publish("q", [OutgoingMessage(body=b"x") for _ in range(20)])
    consumer = world.container().consumer
    read_ms = consumer.clock()
    (read,) = consumer.shard_states.read(queue, queue.shards, ["default"])
    places = consumer.planner.places([read], "default", read_ms, set(), busy=False)
    assert [place.lane for place in places if isinstance(place, LaneView)] == [0]
    assert len(engine.consumer.pull("q", group="default", batch_size=10).messages) == 10  # lane 0 moves on
    world.sim.now += (STALE_VIEW_MS + 100) / 1000
    lost = world.dynamo.stats.conditional_failures.total()
    pull = _Pull(queue, "default", 10, 30_000, None, None)
    consumer._lease_from(pull, places, set(), busy=False, read_ms=read_ms)
    assert len(pull.out) == 10 and {m.seq for m in pull.out} == set(range(10, 20))
    assert world.dynamo.stats.conditional_failures.total() == lost  # on the old view: one lost race


def test_a_stripe_read_alone_is_glanced_at_first_and_read_consistently_only_when_free(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nearly every stripe a puller without one reads alone is held (twin, 1,000 pullers on 32 shards:
    99.2 %), each a consistent read. It is glanced at first, eventually consistent (half the units): a
    held one is left alone on that read; a free one is read again, consistently, and leased from."""
    world = build(seed=13)
    engine = world.engine
    world.sim.now = 10.0
    queue = engine.queues.create("q", {"min_shards": 1, "max_shards": 1})
    shard = queue.shards[0]
    at = ShardAddress.of(queue, shard)
    store = engine.backend.store
    engine.publisher.publish("q", [OutgoingMessage(body=b"x") for _ in range(10)])
    first = engine.consumer.pull("q", group="default", batch_size=100)  # lane 0 has a read level now
    engine.consumer.ack("q", [m.lease_id for m in first.messages])
    assert store.split(at, "default", 3, stripe=STRIPE_BLOCK)  # lane 0 + two stripes
    for _ in range(2):  # a block on each stripe
        engine.publisher.publish("q", [OutgoingMessage(body=b"x" * 200) for _ in range(STRIPE_BLOCK)])
    holder = world.container().consumer
    assert len(holder.pull("q", group="default", batch_size=STRIPE_BLOCK).messages) == STRIPE_BLOCK
    lanes = store.read_lanes(at, "default", [1, 2], head=False, cursor=False).lanes
    (held,) = [lane for lane, state in lanes.items() if state.last_ms]
    free = 3 - held
    reads: list[tuple[int, bool]] = []  # (stripe, consistent) of each read of a stripe alone
    batch_get = world.dynamo.batch_get_item

    def spy(RequestItems: dict) -> dict:
        for request in RequestItems.values():
            pks = [key["pk"]["S"] for key in request["Keys"]]
            for lane in (held, free):
                if pks == [lane_partition(at.pk, lane)]:
                    reads.append((lane, request.get("ConsistentRead", False)))
        return batch_get(RequestItems)

    monkeypatch.setattr(world.dynamo, "batch_get_item", spy)
    walker = world.container().consumer
    pull = _Pull(queue, "default", 100, 30_000, None, None)
    walker._survey(pull, [shard])
    walker._lease_from(pull, [(shard, held), (shard, free)], set(), busy=False, read_ms=walker.clock())
    assert reads == [(held, False), (free, False), (free, True)]
    assert len(pull.out) == STRIPE_BLOCK and not pull.exact  # the free stripe's block; the held one left
    assert walker.planner.known_held("q", "default", shard.id, held, walker.clock())


def test_a_holder_due_back_after_the_sample_answers_its_estimate_without_a_survey() -> None:
    """Past the sample (more shards than SAMPLE_SHARDS), a holder due back on its stripe answers the
    sample's figures, scaled, instead of going on to the survey of every shard."""
    world = build(seed=11)
    engine = world.engine
    world.sim.now = 10.0
    queue = engine.queues.create("q", {"min_shards": 10, "max_shards": 10})
    for _ in range(20):  # 80 messages, fewer than a batch: the sample can never fill the pull
        engine.publisher.publish("q", [OutgoingMessage(body=b"x") for _ in range(4)])
    consumer, now = engine.consumer, engine.consumer.clock()
    pull = _Pull(queue, "default", 100, 30_000, None, None, home_by_ms=now)
    assert consumer._from_sample(pull, list(queue.shards), set())  # the survey does not follow
    assert pull.out == [] and not pull.exact and pull.figures.backlog > 0
    walking = _Pull(queue, "default", 100, 30_000, None, None, home_by_ms=now + WALK_MS)
    assert not consumer._from_sample(walking, list(queue.shards), set())  # not full: the survey follows
    assert 0 < len(walking.out) < 100


def test_a_holder_keeps_a_stripe_its_walk_leased_from_beside_its_own_up_to_max_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A holder whose stripe is empty walks, and leases a block of a stripe nobody keeps to: it keeps to
    that stripe too (before, it moved there and left its own to a herd), and its next polls read both
    before any walk. A third stripe leased on a walk is helped once and not kept (MAX_HOLDS)."""
    world = build(seed=12)
    engine, sim = world.engine, world.sim
    queue = engine.queues.create("q", {"min_shards": 1, "max_shards": 1})
    at = ShardAddress.of(queue, queue.shards[0])
    consumer = world.container().consumer
    walks: list[float] = []
    walk = consumer._walk

    def spy(pull: _Pull, *rest: object) -> None:
        walks.append(sim.now)
        walk(pull, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(consumer, "_walk", spy)

    def send(n: int) -> None:
        for _ in range(n // 100):
            engine.publisher.publish("q", [OutgoingMessage(body=b"x" * 200) for _ in range(100)])

    def pull(wait_ms: int = 0) -> list[int]:
        got = consumer.pull("q", group="default", batch_size=100, wait_ms=wait_ms)
        consumer.ack("q", [m.lease_id for m in got.messages])
        return sorted({m.seq // STRIPE_BLOCK for m in got.messages})

    def kept() -> list[int]:
        return [mine.lane for mine in consumer.planner._kept("q", "default")]

    send(100)
    first = engine.consumer.pull("q", group="default", batch_size=100)  # lane 0 has a read level now
    engine.consumer.ack("q", [m.lease_id for m in first.messages])
    assert engine.backend.store.split(at, "default", 4, stripe=STRIPE_BLOCK)  # lane 0 + three stripes
    results: list[list[int]] = []

    def run() -> None:
        send(100)  # stripe 1's block
        results.append(pull())
        assert kept() == [1]
        send(100)  # stripe 2's block: its stripe is empty, its long-poll walks
        results.append(pull(wait_ms=500))
        assert kept() == [1, 2]
        send(100)  # stripe 3's block: helped, not kept
        results.append(pull(wait_ms=500))
        assert kept() == [1, 2]
        send(200)  # a block on stripes 1 and 2: one pull each, no walk
        del walks[:]
        results.append(pull())
        results.append(pull())
        assert walks == []

    sim.spawn("holder", run)
    sim.run_until(5)
    assert results == [[1], [2], [3], [4], [5]]  # each block once, in order (seq // 100)


def test_a_puller_keeping_to_no_lane_surveys_the_shards_not_held_once_a_hold_period() -> None:
    """With held shards left out, every puller without a stripe surveyed the few others at each poll
    interval and raced for a stripe whose holder left (docs/performance.md "Stop 53"): such a puller's
    long-poll now surveys them at its start and at its deadline only (at most once a second)."""
    world = build(seed=7)
    engine, sim = world.engine, world.sim
    queue = engine.queues.create("q", {"min_shards": 2, "max_shards": 2})
    polls: list[float] = []

    def pull() -> None:
        consumer = world.container().consumer
        until = consumer.clock() + 10 * HELD_MS  # shard 0 held for the whole long-poll
        consumer.planner.found_holds("q", "default", Holds({queue.shards[0].id: ShardHold(until, Figures())}))
        once = consumer._pull_once
        consumer._pull_once = lambda *a, **k: (polls.append(sim.now), once(*a, **k))[1]  # type: ignore[method-assign]
        answer = consumer.pull("q", group="default", batch_size=10, wait_ms=900)
        assert answer.messages == [] and not answer.backlog_exact  # shard 0 as last surveyed

    sim.spawn("puller", pull)
    sim.run_until(2)
    assert len(polls) == 2  # before: at 50, 150, 350 and 750 ms too


def test_a_walker_that_loses_a_race_on_a_streams_one_lane_cuts_it_into_stripes() -> None:
    """A container that committed nothing lately (a walker) has no cycle of its own; when it loses a
    race on the one lane of a shard whose send rate it measured, it cuts stripes for a cycle of HELD_MS.
    Left to containers with a recent commit, a lane that a herd of walkers raced stayed one lane."""
    world = build(seed=12)
    engine, sim = world.engine, world.sim
    queue = engine.queues.create("q", {"min_shards": 1, "max_shards": 1})
    shard = queue.shards[0]
    at = ShardAddress.of(queue, shard)
    store = engine.backend.store
    taken: list[int] = []

    def send(batches: int) -> None:
        for _ in range(batches):
            engine.publisher.publish("q", [OutgoingMessage(body=b"x" * 200) for _ in range(100)])

    def walker() -> None:
        consumer = world.container().consumer
        consumer.planner.saw_head("q", shard.id, store.head(at).next, consumer.clock())
        sim.sleep(0.5)  # 1,000 messages sent meanwhile
        consumer.planner.saw_head("q", shard.id, store.head(at).next, consumer.clock())
        view = consumer.planner.lane(queue, shard, "default", 0, head=True)
        sim.sleep(0.2)  # another container commits the lane meanwhile
        pull = _Pull(queue, "default", 100, 30_000, None, None)
        consumer._lease(pull, view, set())  # its commit loses, then it takes the next 100
        taken.append(len(pull.out))

    def other() -> None:
        sim.sleep(0.6)
        taken.append(len(world.container().consumer.pull("q", group="default", batch_size=100).messages))

    send(1)
    sim.spawn("walker", walker)
    sim.spawn("other", other)
    sim.spawn("sender", lambda: (sim.sleep(0.1), send(10)))
    sim.run_until(2)
    assert taken == [100, 100]
    cursor = store.read_lanes(at, "default", [], head=False).cursor
    assert cursor is not None and cursor.stripe == STRIPE_BLOCK and cursor.stripes >= 2


def test_a_containers_memory_of_held_lanes_stays_bounded_as_shards_come_and_go() -> None:
    """Lanes read held leave `saw_held`'s memory when looked up after their trust; those of shards that
    retired are never looked up again, so past HELD_LANES_PRUNE_AT the lapsed ones are dropped at once."""
    world = build(seed=13)
    engine = world.engine
    queue = engine.queues.create("q", {"min_shards": 1, "max_shards": 1})
    planner, taken = engine.consumer.planner, Busy(held_ms=HELD_MS, trust_ms=HOLD_TRUST_MS)
    at = ShardAddress.of(queue, queue.shards[0])
    for shard in range(HELD_LANES_PRUNE_AT + 10):  # shards that each retire before they are looked up again
        address = ShardAddress(at.queue, at.incarnation, at.shard.model_copy(update={"id": shard}))
        view = LaneView(address, "default", 1, GroupState(), frozenset(), None, last_ms=shard)
        planner.saw_held(view, taken, now_ms=shard)
    assert len(planner._held_lanes("q", "default")) <= HELD_LANES_PRUNE_AT
    assert planner.known_held("q", "default", HELD_LANES_PRUNE_AT + 9, 1, HELD_LANES_PRUNE_AT + 9)


def test_a_poll_leaves_unread_the_stripes_its_container_read_held_and_counts_them_as_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A puller without a stripe read every lane of every shard not held as a whole again at each poll,
    98 % of them stripes it had read held moments before (twin, 500 pullers on 16 shards: 0.34-0.60 RRU
    a message). Its container now leaves such a lane unread until it stops trusting the hold, and its
    answer, an estimate, counts the lane as last read. Three holders on four stripes: the fourth, never
    taken, keeps the shard from being held as a whole."""
    world = build(seed=7)
    engine, sim = world.engine, world.sim
    queue = engine.queues.create("q", {"min_shards": 1, "max_shards": 1})
    at = ShardAddress.of(queue, queue.shards[0])
    store = engine.backend.store
    surveyed: dict[str, list[int]] = {}
    answers: dict[str, LeasedBatch] = {}
    untils: set[int] = set()
    other_lanes = store.read_other_lanes

    def spy(*args: object, **kwargs: object) -> object:
        found = other_lanes(*args, **kwargs)  # type: ignore[arg-type]
        if sim.current is not None and sim.current.name == "walker":
            surveyed[sim.current.cache["poll"]] = sorted(found[0][0].groups["default"].lanes)
        return found

    monkeypatch.setattr(store, "read_other_lanes", spy)

    def send(n: int) -> None:
        for _ in range(n // 100):
            engine.publisher.publish("q", [OutgoingMessage(body=b"x" * 200) for _ in range(100)])

    def holder(at_s: float) -> None:
        sim.sleep(at_s)
        assert len(world.container().consumer.pull("q", group="default", batch_size=100).messages) == 100

    def walker() -> None:
        for poll, at_s in (("first", 0.2), ("again", 0.1), ("lapsed", 1.5 * HOLD_TRUST_MS / 1000)):
            sim.sleep(at_s)
            sim.current.cache["poll"] = poll  # type: ignore[union-attr]
            consumer = world.container().consumer
            answers[poll] = consumer.pull("q", group="default", batch_size=100)
            if poll == "first":  # the three read held in one pull: one trust, they lapse within its reads
                trusts = consumer.planner.trusted_holds("q", "default", consumer.clock())
                untils.update(hold.until_ms for hold in trusts.values())

    send(100)
    first = engine.consumer.pull("q", group="default", batch_size=100)  # lane 0 has a read level now
    engine.consumer.ack("q", [m.lease_id for m in first.messages])
    assert store.split(at, "default", 5, stripe=STRIPE_BLOCK)  # lane 0 + four stripes
    send(300)  # a block on each of stripes 1-3
    for n in range(3):
        sim.spawn(f"holder-{n}", partial(holder, n / 100))
    sim.spawn("walker", walker)
    sim.run_until(5)
    assert surveyed["first"] == [0, 4]  # it read stripes 1-3 on their own first, and found them held
    assert surveyed["again"] == [0, 4]  # ... and trusts that still (before: [0, 1, 2, 3, 4])
    assert surveyed["lapsed"] == [0, 1, 2, 3, 4]
    assert max(untils) - min(untils) < 50  # drawn for each lane, they were up to 1.6 s apart
    for poll in ("first", "again"):
        assert answers[poll].messages == [] and not answers[poll].backlog_exact
        assert answers[poll].message_backlog_count == 300  # the held stripes' leases, as last read
