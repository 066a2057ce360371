"""The long-poll between its surveys, on the twin (the real engine on the in-memory DynamoDB, virtual
time): each way a message can become deliverable during the wait wakes it within about one poll
interval, and an empty answer is still a strongly consistent survey of every HEAD and every lane."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bench.twin.dynamo import STALE_MAX_S
from bench.twin.world import World, build
from sluice import errors
from sluice.engine import keys
from sluice.engine.consume import LONG_POLL_MAX_INTERVAL, RetryRequest
from sluice.engine.pullplan import PATIENT_BUSY_MS
from sluice.engine.store import ShardAddress
from sluice.models import LeasedBatch, OutgoingMessage

WAIT_MS = 10_000
LATE = LONG_POLL_MAX_INTERVAL + 0.05  # one poll interval, and the reads' latency


def long_poll(world: World, shards: int, other: Callable[[World], None]) -> tuple[Any, float]:
    """`other` runs in a container from t=1 s; another container long-polls the queue of `shards` shards
    from t=1.5 s (after `other`'s set-up): (the pull's answer or the error it raised, when it came back)."""
    world.engine.queues.create("q", {"min_shards": shards, "max_shards": shards})
    world.sim.now = 1.0
    out: dict[str, Any] = {}

    def poller() -> None:
        world.sim.sleep(0.5)
        try:
            consumer = world.container().consumer
            out["answer"] = consumer.pull("q", group="default", batch_size=10, wait_ms=WAIT_MS)
        except errors.SluiceError as exc:
            out["answer"] = exc
        out["at"] = world.sim.now

    world.sim.spawn("other", lambda: other(world))
    world.sim.spawn("poller", poller)
    world.sim.run_until(world.sim.now + WAIT_MS / 1000 + 5)
    return out["answer"], out["at"]


def test_a_publish_to_any_shard_wakes_the_long_poll_within_a_poll_interval() -> None:
    published: list[float] = []

    def publish(world: World) -> None:
        world.sim.sleep(4.0)
        world.container().publisher.publish("q", [OutgoingMessage(body=b'{"late": 1}')])
        published.append(world.sim.now)

    answer, at = long_poll(build(), 32, publish)
    assert isinstance(answer, LeasedBatch) and [m.body for m in answer.messages] == [b'{"late": 1}']
    assert at - published[0] <= LATE


def test_with_reads_a_second_stale_a_publish_still_wakes_the_long_poll_a_second_later_at_most() -> None:
    """The watch's eventually consistent glances may answer from a copy behind the write (DynamoDB:
    "usually within a second"): the wake comes later, never after the bound and one interval more
    (40 seeds on 32 shards: p50 0.19 s, p90 0.50 s, max 0.78 s, against 0.14 / 0.25 / 0.27 s fresh)."""
    published: list[float] = []

    def publish(world: World) -> None:
        world.sim.sleep(4.0)
        world.container().publisher.publish("q", [OutgoingMessage(body=b'{"late": 1}')])
        published.append(world.sim.now)

    answer, at = long_poll(build(stale_reads=True), 32, publish)
    assert isinstance(answer, LeasedBatch) and [m.body for m in answer.messages] == [b'{"late": 1}']
    assert at - published[0] <= STALE_MAX_S + LATE


def test_a_lease_running_out_wakes_the_long_poll_at_its_deadline() -> None:
    world = build()
    leased: list[float] = []

    def lease_and_forget(world: World) -> None:
        engine = world.container()
        engine.publisher.publish("q", [OutgoingMessage(body=b'{"n": 1}')])
        got = engine.consumer.pull("q", group="default", batch_size=1, visibility_ms=3_000)
        assert len(got.messages) == 1
        leased.append(world.sim.now)

    answer, at = long_poll(world, 8, lease_and_forget)
    assert isinstance(answer, LeasedBatch) and len(answer.messages) == 1
    assert answer.messages[0].attempts == 2
    assert 2.9 <= at - leased[0] <= 3.0 + LATE


def test_a_message_sent_with_a_delay_is_delivered_when_it_comes_due() -> None:
    sent: list[float] = []

    def send_delayed(world: World) -> None:
        world.sim.sleep(2.0)
        world.container().publisher.publish("q", [OutgoingMessage(body=b'{"n": 1}', delay_seconds=3)])
        sent.append(world.sim.now)

    answer, at = long_poll(build(), 8, send_delayed)
    assert isinstance(answer, LeasedBatch) and len(answer.messages) == 1
    assert 2.9 <= at - sent[0] <= 3.0 + LATE


def test_a_retry_by_another_consumer_wakes_the_long_poll() -> None:
    retried: list[float] = []

    def lease_then_retry(world: World) -> None:
        engine = world.container()
        engine.publisher.publish("q", [OutgoingMessage(body=b'{"n": 1}')])
        got = engine.consumer.pull("q", group="default", batch_size=1, visibility_ms=60_000)
        world.sim.sleep(3.0)  # the poller surveyed and is watching
        done = engine.consumer.ack("q", [], [RetryRequest(got.messages[0].lease_id, delay_seconds=0)])
        assert done.retry_count == 1
        retried.append(world.sim.now)

    answer, at = long_poll(build(), 8, lease_then_retry)
    assert isinstance(answer, LeasedBatch) and len(answer.messages) == 1
    assert at - retried[0] <= LATE


def test_a_pause_stamped_on_the_heads_ends_the_long_poll() -> None:
    paused: list[float] = []

    def pause(world: World) -> None:
        world.sim.sleep(2.0)
        world.container().queues.set_paused("q", True)  # another container: the poller's cache knows nothing
        paused.append(world.sim.now)

    answer, at = long_poll(build(), 8, pause)
    assert isinstance(answer, errors.QueuePaused)
    assert at - paused[0] <= LATE


Reads = list[tuple[bool, set[tuple[str, str]]]]  # each BatchGetItem: consistent, its (pk, sk) keys


def spy_reads(world: World) -> Reads:
    """From now on, record the keys and the consistency of every BatchGetItem."""
    reads: Reads = []
    batch_get = world.dynamo.batch_get_item

    def spy(RequestItems: dict[str, Any]) -> dict[str, Any]:
        requests = RequestItems.values()
        (consistent,) = {bool(r.get("ConsistentRead", False)) for r in requests}
        reads.append((consistent, {(k["pk"]["S"], k["sk"]["S"]) for r in requests for k in r["Keys"]}))
        return batch_get(RequestItems=RequestItems)

    world.dynamo.batch_get_item = spy  # type: ignore[method-assign]
    return reads


def heads_of(world: World) -> set[tuple[str, str]]:
    queue = world.engine.queues.get("q")
    return {(keys.shard_partition("q", queue.incarnation, s.id), keys.HEAD_SK) for s in queue.shards}


def lane_of(pk: str, lane: int = 0) -> tuple[str, str]:
    return keys.lane_partition(pk, lane), keys.group_state_sk("default")


def test_an_empty_answer_is_a_consistent_read_of_every_head_and_lane_after_cheap_watches() -> None:
    """The watch reads HEADs (and the lanes with leases in flight) eventually consistent; the answer's
    survey reads every HEAD and every lane consistently, last."""
    world = build()
    split: list[ShardAddress] = []
    spied: list[Reads] = []

    def lease_and_split(world: World) -> None:
        engine = world.container()
        engine.publisher.publish("q", [OutgoingMessage(body=b'{"n": %d}' % i) for i in range(20)])
        engine.consumer.pull("q", group="default", batch_size=20, visibility_ms=60_000)
        queue = engine.queues.get("q")
        for shard in queue.shards:  # lanes 1 and 2 on the shard that leased (lane 0 never wrote elsewhere)
            if engine.backend.store.split(ShardAddress.of(queue, shard), "default", 3):
                split.append(ShardAddress.of(queue, shard))
        spied.append(spy_reads(world))  # (the poller starts after this)

    answer, _ = long_poll(world, 2, lease_and_split)
    reads = spied[0]
    assert isinstance(answer, LeasedBatch) and not answer.messages and answer.backlog_exact
    assert answer.backlog is not None and answer.backlog.in_flight == 20 and len(split) == 1
    heads, pk = heads_of(world), split[0].pk
    watches = [found for consistent, found in reads if not consistent]
    assert len(watches) > 20 and all(found == heads | {lane_of(pk)} for found in watches)
    last_watch = max(i for i, (consistent, _) in enumerate(reads) if not consistent)
    assert all(consistent for consistent, _ in reads[last_watch + 1 :])
    survey = set().union(*(found for _, found in reads[last_watch + 1 :]))
    other = next(h[0] for h in heads if h[0] != pk)
    assert survey == heads | {lane_of(pk, k) for k in range(3)} | {lane_of(other)}


def test_a_move_is_surveyed_on_its_shard_only_and_the_answer_at_the_end_on_every_shard() -> None:
    """A purge moves one shard's floor: that shard is surveyed again (it finds nothing); the empty
    answer at the end of the wait is a survey of every shard."""
    world = build()
    spied: list[Reads] = []

    def lease_then_purge(world: World) -> None:
        engine = world.container()
        engine.publisher.publish("q", [OutgoingMessage(body=b'{"n": %d}' % i) for i in range(5)])
        engine.consumer.pull("q", group="default", batch_size=5, visibility_ms=60_000)
        spied.append(spy_reads(world))
        world.sim.sleep(3.0)
        engine.operations.purge("q")

    answer, _ = long_poll(world, 4, lease_then_purge)
    assert isinstance(answer, LeasedBatch) and not answer.messages and answer.backlog_exact
    assert answer.message_backlog_count == 0
    surveys = [found for consistent, found in spied[0] if consistent]
    heads = heads_of(world)
    purged = {pk for pk, sk in surveys[1] if sk == keys.HEAD_SK}
    assert len(surveys) == 3 and len(purged) == 1  # the first poll, the purged shard, the answer
    assert surveys[0] == surveys[2] == heads | {lane_of(pk) for pk, _ in heads}


def test_a_long_poll_that_finds_a_message_surveys_the_shard_it_landed_on() -> None:
    """32 shards, a message 2 s into the wait: one survey of every shard, HEAD reads at half a unit a
    shard each poll interval, then HEAD and lane of the one shard (before: a survey each interval)."""
    world = build()
    spied: list[Reads] = []

    def publish_later(world: World) -> None:
        spied.append(spy_reads(world))
        world.sim.sleep(2.5)
        world.container().publisher.publish("q", [OutgoingMessage(body=b'{"late": 1}')])

    answer, _ = long_poll(world, 32, publish_later)
    assert isinstance(answer, LeasedBatch) and len(answer.messages) == 1 and not answer.backlog_exact
    assert answer.message_backlog_count == 1
    surveys = [found for consistent, found in spied[0] if consistent]
    assert [len(found) for found in surveys] == [16, 64, 2]  # (a container's first pull samples 8 first)
    assert all(len(found) == 32 for consistent, found in spied[0] if not consistent)


@pytest.mark.parametrize("shards", [1, 32])
def test_an_idle_long_poll_reads_heads_eventually_consistent_between_two_surveys(shards: int) -> None:
    from bench.twin.consume import idle_poll_cost

    cost = idle_poll_cost(shards)
    surveys = 2 * 2 * shards  # the first poll and the answer's: HEAD + lane 0 a shard, consistent
    glances = cost["long"]["calls"] - 2  # every other call reads the HEADs at half a unit each
    assert cost["long"]["rru"] == surveys + glances * shards / 2 and cost["long"]["wru"] == 0


def test_a_long_poll_with_time_left_leaves_a_lane_just_committed_to_its_puller() -> None:
    """A live stream's herd: every waiting puller sees a shard's new messages at once, and all but one
    would lose the race on its lane. A long-poll's poll with time left passes over a lane committed in
    the last PATIENT_BUSY_MS (its puller takes what is there), and takes it once the lane is quiet; a
    pull without a wait takes it at once, as before."""
    world = build()
    world.engine.queues.create("q", {"min_shards": 1, "max_shards": 1})
    world.sim.now = 1.0
    out: dict[str, float] = {}

    def pull(name: str, wait_ms: int) -> None:
        got = world.container().consumer.pull("q", group="default", batch_size=1, wait_ms=wait_ms)
        assert len(got.messages) == 1
        out[name] = world.sim.now

    def owner() -> None:
        engine = world.container()
        engine.publisher.publish("q", [OutgoingMessage(body=f'{{"n": {n}}}'.encode()) for n in range(3)])
        pull("owner", 0)
        world.sim.spawn("patient", lambda: pull("patient", WAIT_MS))  # the lane was committed just now
        world.sim.sleep(0.005)
        pull("again", 0)  # the owner again, as the patient poll leaves the lane to it

    world.sim.spawn("owner", owner)
    world.sim.run_until(world.sim.now + 5)
    assert out["again"] - out["owner"] < PATIENT_BUSY_MS / 1000 / 2
    assert out["patient"] - out["again"] >= PATIENT_BUSY_MS / 1000 - 0.01  # left alone meanwhile
    assert out["patient"] - out["again"] <= PATIENT_BUSY_MS / 1000 + LATE  # then taken within a poll


def test_a_lone_consumer_is_not_kept_waiting_by_its_own_commit() -> None:
    """The lane a container committed last is not busy to that container's own patient polls: a lone
    consumer would otherwise wait PATIENT_BUSY_MS for itself after each batch."""
    world = build()
    world.engine.queues.create("q", {"min_shards": 1, "max_shards": 1})
    world.sim.now = 1.0
    out: dict[str, float] = {}

    def lone() -> None:
        engine = world.container()
        engine.publisher.publish("q", [OutgoingMessage(body=b'{"n": 0}')])
        assert len(engine.consumer.pull("q", group="default", batch_size=10).messages) == 1
        assert not engine.consumer.pull(
            "q", group="default", batch_size=10
        ).messages  # it lets go of the lane
        world.container().publisher.publish("q", [OutgoingMessage(body=b'{"n": 1}')])
        sent = world.sim.now
        got = engine.consumer.pull("q", group="default", batch_size=10, wait_ms=WAIT_MS)
        assert len(got.messages) == 1
        out["latency"] = world.sim.now - sent

    world.sim.spawn("lone", lone)
    world.sim.run_until(world.sim.now + 5)
    assert out["latency"] < PATIENT_BUSY_MS / 1000 / 2
