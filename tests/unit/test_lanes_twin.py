"""Lanes under contention, on the twin (the real engine on the in-memory DynamoDB, virtual time): many
pullers of one group widen a shard's lanes, every message is delivered, acked once, and the last pull
proves the queue empty."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from bench.twin.world import World, build
from sluice import constants as c
from sluice.engine.store import ShardAddress
from sluice.models import OutgoingMessage, Queue


def _world_with_backlog(shards: int, sends: int) -> tuple[World, Queue]:
    """A twin with queue "q" on `shards` shards holding `sends` sends of 100 messages (`{"n": i}`),
    published outside the twin's limits."""
    world = build(seed=3)
    queue = world.engine.queues.create("q", {"min_shards": shards, "max_shards": shards})
    world.dynamo.unlimited = True
    for i in range(sends):
        world.engine.publisher.publish(
            "q", [OutgoingMessage(body=b'{"n": %d}' % (100 * i + j)) for j in range(100)]
        )
    world.dynamo.unlimited = False
    return world, queue


def test_many_pullers_split_the_lanes_and_every_message_is_acked_once() -> None:
    world, queue = _world_with_backlog(2, 40)
    engine, sim = world.engine, world.sim
    delivered: Counter[str] = Counter()
    acked: Counter[str] = Counter()
    store = engine.backend.store
    splits: list[int] = []
    split = store.split
    store.split = lambda at, group, lanes: splits.append(lanes) or split(at, group, lanes)  # type: ignore[method-assign]

    def puller() -> None:
        while sum(acked.values()) < 4_000 and sim.now < 30:
            result = engine.consumer.pull("q", group="default", batch_size=20)
            if not result.messages:
                sim.sleep(0.05)
                continue
            for m in result.messages:
                delivered[m.id] += 1
            done = engine.consumer.ack("q", [m.lease_id for m in result.messages])
            assert done.ack_count == len(result.messages), done.warnings
            for m in result.messages:
                acked[m.id] += 1

    for i in range(40):
        sim.spawn(f"puller-{i}", puller)
    sim.run_until(30)
    assert len(acked) == 4_000 and set(acked.values()) == {1}  # every message acked, once
    assert max(delivered.values()) == 1  # nothing redelivered: no lease ran out, no ack was lost
    assert splits  # contention split the lanes
    final = engine.consumer.pull("q", group="default", batch_size=10)
    assert final.messages == [] and final.backlog_exact and final.message_backlog_count == 0
    narrowed = [
        engine.backend.store.read_lanes(ShardAddress.of(queue, s), "default", [], head=False).cursor
        for s in queue.shards
    ]
    assert narrowed == [None, None]  # the empty survey merged the lanes back: an idle poll reads one lane
    engine.publisher.publish("q", [OutgoingMessage(body=b'{"n": "late"}')])
    late = engine.consumer.pull("q", group="default", batch_size=10)
    assert [m.body for m in late.messages] == [b'{"n": "late"}'] and late.backlog_exact  # nothing re-read


def test_an_empty_answer_reads_each_shard_once_and_an_idle_long_poll_is_bounded() -> None:
    from bench.twin.consume import idle_poll_cost

    cost = idle_poll_cost(32)  # HEAD + lane 0 of each shard, strongly consistent: 2 RRU a shard
    assert cost["empty"]["rru"] == 64 and cost["empty"]["calls"] == 1 and cost["empty"]["wru"] == 0
    assert cost["long"]["wru"] == 0 and cost["long"]["rru"] <= 64 * 85  # ≤ 4 polls a second for 20 s


def test_quick_pullers_write_about_two_units_per_hundred_messages() -> None:
    from bench.twin.scenarios import pull_load

    row = pull_load(10, 100, shards=4, seconds=0.6, backlog=60_000, warmup=0.2)
    assert row["msgs_per_s"] > 10_000 and row["wcu_per_msg"] < 0.03 and row["conflict_share"] < 0.05
    assert row["left_share"] > 0.2  # the backlog outlasted the window


def test_a_row_whose_backlog_ran_dry_is_measured_again_on_more(monkeypatch: pytest.MonkeyPatch) -> None:
    """A closed-loop row on a backlog the pullers finish inside the window measured the lanes' tail
    (1,000 pullers on 1,200,000 messages: 5.3 % lost races; 1.7 % on 2,400,000)."""
    from bench.twin import consume

    monkeypatch.setattr(consume, "BACKLOG_CAP", 6_000)
    row = consume.lasting(10, 100, shards=4, seconds=0.3, warmup=0.2)
    assert row["backlog"] > 6_000 and row["left_share"] >= consume.LASTING


def test_acks_carried_on_the_next_pull_halve_the_write_units() -> None:
    """One lane write per batch (the pull's commit carries the last batch's acks): ~1.2 WRU per 100
    on 4 shards (10 pullers split their lanes: claims), against ~2 with an ack call. The window is
    0.6 s: in 0.3 s the pullers write ~60 lane items, so 3 lost races already read 5.2 % (one CI run)."""
    from bench.twin.scenarios import pull_load

    row = pull_load(10, 100, shards=4, seconds=0.6, backlog=60_000, warmup=0.2, carry_acks=True)
    assert row["msgs_per_s"] > 10_000 and row["wcu_per_msg"] < 0.015 and row["conflict_share"] < 0.05


def test_pullers_that_work_on_each_batch_ask_for_what_they_can_handle() -> None:
    """10 pullers working 0.1 s per batch of 100 ack at most ~10,000 msg/s, the rate they ask for."""
    from bench.twin.scenarios import pull_load

    row = pull_load(10, 100, shards=4, seconds=0.5, backlog=30_000, warmup=0.2, think_s=0.1)
    assert 6_000 <= row["msgs_per_s"] <= 10_000 and row["pull_p99_ms"] < 100


def test_a_live_stream_is_acked_once_and_priced_on_the_pullers_units() -> None:
    """Producers send while long-polling pullers pull and ack: after the window the pullers drain to an
    exact empty answer, every message sent acked once; the row's write units are the pullers' alone
    (the sends' 20 units per 100 messages would be over 0.1 a message)."""
    from bench.twin.scenarios import pull_load

    row = pull_load(
        10, 100, shards=4, seconds=0.5, backlog=0, warmup=0.3, think_s=0.05, publish_rate=2_000, wait_ms=1_000
    )
    assert row["sent_per_s"] >= 1_500 and row["msgs_per_s"] > 0
    assert row["unacked_at_rest"] == 0 and row["acked_again"] == 0
    # From the send call to the first lease: a long-polling puller holds a message in tens of ms, never
    # as long as the long-poll.
    assert 0 < row["delivery_p50_ms"] <= row["delivery_p99_ms"] < 1_000
    assert 0.01 < row["wcu_per_msg"] < 0.1
    assert 1 <= row["peak_executions"]["consumer"] <= 10 and not row["refused_executions"]  # one a puller


def test_a_long_poll_bills_its_wait() -> None:
    """One puller, a send of 100 every 0.5 s: a long-polling puller waits ~0.5 s inside the consumer for
    each batch (0.005 GB-s a message at 1,024 MB); one that polls without a wait sleeps between pulls
    outside it (0.0007: its empty pulls' own time)."""
    from bench.prices import LAMBDA_MEMORY_MB
    from bench.twin.scenarios import pull_load

    gb = LAMBDA_MEMORY_MB / 1024
    billed = {
        wait_ms: pull_load(
            1, 100, shards=4, seconds=2.0, backlog=0, warmup=0.5, publish_rate=200, wait_ms=wait_ms
        )["consumer_gb_s_per_msg"]
        for wait_ms in (1_000, 0)
    }
    assert billed[1_000] > 0.004 * gb and billed[0] < 0.002 * gb


def test_lane_zero_claims_only_while_it_is_the_one_lane() -> None:
    """Lane 0 shares the shard's partition with the HEAD: a split shard's claims go to the other lanes,
    and a lane being retired (past `lanes`) claims nothing."""
    from sluice.engine.lanes import Cursor, may_claim

    one, split = Cursor(next=0, lanes=1, high=1), Cursor(next=0, lanes=4, high=6)
    assert may_claim(0, one)
    assert [lane for lane in range(6) if may_claim(lane, split)] == [1, 2, 3]


def test_a_pull_whose_shard_was_split_under_it_answers_an_estimate() -> None:
    """A newcomer's survey saw lane 0 with the backlog; another puller split the shard before its commit,
    so lane 0 claims nothing now and the backlog is the new lanes' to claim: an empty answer proves
    nothing. (A puller keeping to lane 0 reads the shard again after its lost race, and claims.)"""
    world, _queue = _world_with_backlog(1, 1)
    engine, sim = world.engine, world.sim
    store = engine.backend.store
    commit = store.commit_lane

    def split_first(at, group, lane, *args, **kwargs):
        store.commit_lane = commit  # type: ignore[method-assign]
        assert store.split(at, group, 5)  # another puller's split lands between the read and the commit
        return commit(at, group, lane, *args, **kwargs)

    answers = []

    def puller() -> None:
        answers.append(engine.consumer.pull("q", group="default", batch_size=10))  # lane 0 exists now

    def newcomer() -> None:  # another container: it keeps to no lane
        store.commit_lane = split_first  # type: ignore[method-assign]
        answers.append(engine.consumer.pull("q", group="default", batch_size=10))

    sim.spawn("puller", puller)
    sim.run_until(sim.now + 1)
    sim.spawn("newcomer", newcomer)
    sim.run_until(sim.now + 5)
    assert len(answers[0].messages) == 10
    assert answers[1].messages == [] and not answers[1].backlog_exact


def _split_shard_drained_by_one_puller(batch: int) -> tuple[list[int], list[int], bool]:
    """2,600 messages on one shard; a puller reads `batch` of them, the shard is split into 4 lanes, and
    it pulls batches of `batch` until an empty answer: (the lane of every commit, the batch sizes,
    whether that empty answer was exact with nothing available)."""
    world, queue = _world_with_backlog(1, 26)
    engine, sim = world.engine, world.sim
    store = engine.backend.store
    commits: list[int] = []
    commit = store.commit_lane
    store.commit_lane = lambda at, group, lane, *a, **k: (
        commits.append(lane) or commit(at, group, lane, *a, **k)
    )  # type: ignore[method-assign]
    batches: list[int] = []
    last = []

    def puller() -> None:
        first = engine.consumer.pull("q", group="default", batch_size=batch)
        engine.consumer.ack("q", [m.lease_id for m in first.messages])
        assert store.split(ShardAddress.of(queue, queue.shards[0]), "default", 4)
        while True:
            result = engine.consumer.pull("q", group="default", batch_size=batch)
            if not result.messages:
                last.append(result)
                return
            batches.append(len(result.messages))
            engine.consumer.ack("q", [m.lease_id for m in result.messages])

    sim.spawn("puller", puller)
    sim.run_until(30)
    end = last[0]
    return commits, batches, bool(end.backlog_exact and end.message_backlog_count == 0)


def test_a_pull_right_after_a_split_claims_from_a_lane_not_committed_yet() -> None:
    """The lanes a split adds were never committed: within BUSY_MS of the twin's clock start they looked
    busy, and the pull after the split answered empty, and exact, with 2,570 unclaimed. Claiming lanes
    with a puller on them are the last resort, as lanes with work are."""
    _commits, batches, drained = _split_shard_drained_by_one_puller(30)
    assert sum(batches) == 2_570 and drained


def test_claims_are_cut_so_a_batch_is_leased_from_one_lane() -> None:
    """A batch that crosses the end of a lane's range is leased from two lanes: two commits, and its ack
    an ADD to each. Claims are cut to the pull's batch size: a lone puller of 30 on a split shard (a
    lane's share of 2,570 over 4 lanes is 643: 630, 21 batches) commits once per batch."""
    from sluice.engine.lanes import claim_size

    assert claim_size(2_520, 4, 30, 30) == 630 and claim_size(2_570, 4, 30, 30) == 630  # not 643
    assert claim_size(2_550, 4, 12, 30) == 612  # the claiming pull lacks 12: 20 batches of 30 after it
    assert claim_size(37_500, 32, 100, 100) == 1_100 and claim_size(10**6, 2, 100, 100) == 5_000
    assert claim_size(50, 4, 100, 100) == 50  # never more than there is
    commits, batches, _drained = _split_shard_drained_by_one_puller(30)
    # Lane 0 commits the first pull and, after the split, the fold of its acks (it claims nothing more);
    # then every batch of 30 is one commit of one of lanes 1-3.
    assert sum(batches) == 2_570 and commits[:2] == [0, 0] and len(commits[2:]) == len(batches)


def test_a_reservation_keeps_sends_apart_from_a_puller_fleet_that_fills_the_quota() -> None:
    """30 long-polling pullers in an account of 20 executions: without a reservation the pullers hold
    every execution and sends are refused; 5 reserved for the broker let every send through and refuse
    pullers instead, and no message is lost or acked twice either way."""
    from bench.twin.scenarios import pull_load

    def run(reserved: dict[str, int]) -> dict[str, Any]:
        return pull_load(
            30,
            100,
            shards=4,
            seconds=1.0,
            backlog=0,
            warmup=0.5,
            publish_rate=2_000,
            wait_ms=1_000,
            lambda_quota=20,
            reserved=reserved,
        )

    shared, apart = run({}), run({c.FN_BROKER: 5})
    assert shared["refused_executions"].get(c.FN_BROKER, 0) > 0
    assert apart["refused_executions"].get(c.FN_BROKER, 0) == 0
    assert apart["refused_executions"][c.FN_CONSUMER] > 0
    assert apart["sent_per_s"] > 2 * shared["sent_per_s"]
    assert apart["peak_executions"][c.FN_CONSUMER] <= 15
    for row in (shared, apart):
        assert row["unacked_at_rest"] == 0 and row["acked_again"] == 0
