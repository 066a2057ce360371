"""The coordinator on in-process moto with a fake clock: scaling, sealing, retirement, fencing."""

from __future__ import annotations

import logging
import threading

import pytest
from botocore.exceptions import ClientError

from sluice import constants as c
from sluice import errors
from sluice.engine import keys, mapdoc
from sluice.engine.coordinator import Coordinator, CoordinatorConfig
from sluice.engine.publish import Publisher
from sluice.engine.queues import QueueDirectory
from sluice.engine.scaling import ScalingPolicy
from sluice.engine.store.dynamo import head_of
from sluice.engine.workplan import ShardWorkPolicy
from sluice.events import PushWorkerEvent, ShardWorkEvent
from sluice.models import OutgoingMessage, Queue
from sluice.segments import list_segments

LEASE_MS = 30_000


class RecordingInvoker:
    """Records what the coordinator starts; with `engine`, also runs shard work as the function would."""

    def __init__(self, engine=None) -> None:
        self.calls: list[tuple[str, dict]] = []
        self.engine = engine

    def invoke_async(self, function: str, event: dict) -> None:
        self.calls.append((function, event))
        if self.engine is not None and function == "shard":
            work = ShardWorkEvent.model_validate(event)
            self.engine.shard_worker.run(work.actions, work.queue, work.shards)

    def shard_work(self) -> list[ShardWorkEvent]:
        return [ShardWorkEvent.model_validate(e) for f, e in self.calls if f == "shard"]


def coordinator(engine, queue_name, holder=None, invoker=None, **policy) -> Coordinator:
    config = CoordinatorConfig(
        policy=ScalingPolicy(**{"shard_wcu_ceiling": 10.0, "scale_down_after_ms": 5_000, **policy}),
        ownership_ms=LEASE_MS,
        ownership_sk=f"LEASE-{queue_name}",
        queues=[queue_name],
        shard_function="shard",
        consumer_function="consumer",
    )
    return Coordinator(engine.backend, engine.queues, invoker, config, holder=holder)


def send(engine, queue_name, n_requests, per_request=10, tag="m"):
    sent = []
    for r in range(n_requests):
        msgs = [OutgoingMessage(body=f'"{tag}-{r}-{i}"'.encode()) for i in range(per_request)]
        sent += engine.publisher.publish(queue_name, msgs).message_ids
    return sent


def drain(engine, queue_name, group):
    got = []
    while True:
        result = engine.consumer.pull(queue_name, group=group, batch_size=100)
        if not result.messages:
            return got
        got += [m.id for m in result.messages]
        engine.consumer.ack(queue_name, [m.lease_id for m in result.messages])


def head(engine, queue: Queue, shard_id: int) -> dict:
    shard = queue.shard(shard_id)
    return engine.backend.table_for(shard).get(keys.shard_pk(queue, shard_id), keys.HEAD_SK) or {}


def test_publish_counts_on_the_head_update(clocked, queue_name):
    clocked.queues.create(queue_name)
    send(clocked, queue_name, 3, per_request=4)
    h = head(clocked, clocked.queues.get(queue_name), 0)
    assert (h["wreq"], h["wmsgs"], h["next"]) == (3, 12, 12)
    assert h["wbytes"] == sum(len(f'"m-{r}-{i}"') for r in range(3) for i in range(4))
    # A broker whose clock is behind the head's loses the condition once (a conflict), follows the
    # head's clock, and carries the conflict count on its next successful allocation.
    queue = clocked.queues.get(queue_name)
    clocked.backend.table_for(queue.shard(0)).update(
        keys.shard_pk(queue, 0), keys.HEAD_SK, "SET ts = :t", values={":t": clocked.backend.clock() + 5_000}
    )
    send(clocked, queue_name, 1)
    assert head(clocked, queue, 0)["cfl"] == 1


def test_scale_up_seal_and_retire_without_losing_a_message(clocked, clock, queue_name):
    clocked.queues.create(queue_name, {"max_shards": 8})
    clocked.consumer  # noqa: B018  (lease secret created before groups are used)
    _add_group(clocked, queue_name, "analytics")
    invoker = RecordingInvoker()
    coord = coordinator(clocked, queue_name, invoker=invoker)
    assert coord.run_once().queues[0].reason.startswith("first pass")
    sent = send(clocked, queue_name, 20)
    clock.advance(1_000)
    report = coord.run_once().queues[0]
    assert report.writes_per_s == pytest.approx(200)
    assert report.added == [1, 2, 3] and report.open_shards == 4
    queue = clocked.queues.get(queue_name)
    assert [s.state for s in queue.shards] == ["open"] * 4
    assert mapdoc.decode(clocked.backend.mirror.read(queue_name)).version == queue.version

    # A broker still holding the 1-shard map... and one holding the 4-shard map after sealing.
    stale_doc = clocked.backend.mirror.read(queue_name)
    sent += send(clocked, queue_name, 20, tag="spread")
    # Each request picks one of the 4 open shards at random, so 20 miss one about once in 80 runs:
    # send on (a few more requests, still "busy") until every shard holds a message.
    for extra in range(40):
        if {s for s in range(4) if head(clocked, queue, s).get("next")} == {0, 1, 2, 3}:
            break
        sent += send(clocked, queue_name, 1, tag=f"spread-extra-{extra}")
    assert {s for s in range(4) if head(clocked, queue, s).get("next")} == {0, 1, 2, 3}

    clock.advance(1_000)
    assert coord.run_once().queues[0].sealed == []  # 20 requests/s: still busy (it may add more)
    others = [s.id for s in clocked.queues.get(queue_name).shards if s.id != 0]
    clock.advance(1_000)
    assert coord.run_once().queues[0].sealed == []  # idle: the scale-down timer starts
    clock.advance(6_000)
    report = coord.run_once().queues[0]
    assert report.sealed == others and report.open_shards == 1
    queue = clocked.queues.get(queue_name)
    assert all(head(clocked, queue, s).get("sealed") for s in others)

    # A broker with the stale map picks sealed shards: the head refuses, and its stamp names the map
    # that sealed it (no SSM read: the directory read the mirror once, for the stale document), no error.
    stale = Publisher(clocked.backend, QueueDirectory(clocked.queues, lambda name: stale_doc))
    for r in range(12):
        result = stale.publish(queue_name, [OutgoingMessage(body=f'"late-{r}"'.encode())])
        assert result.shard == 0
        sent += result.message_ids
    assert stale.directory.mirror_reads == 1

    # Sealed shards hold unacked messages: nothing is retired until every group has drained them.
    clock.advance(1_000)
    holding = [s for s in others if head(clocked, queue, s).get("next")]
    assert set(holding) >= {1, 2, 3}
    empty_retired = coord.run_once().queues[0].retired  # shards that never took a write go at once
    assert sorted(empty_retired) == sorted(set(others) - set(holding))
    got_default = drain(clocked, queue_name, "default")
    clock.advance(1_000)
    assert coord.run_once().queues[0].retired == []  # "analytics" has not read them yet
    got_analytics = drain(clocked, queue_name, "analytics")
    clock.advance(1_000)
    report = coord.run_once().queues[0]
    assert report.retired == holding
    assert sorted(got_default) == sorted(sent) == sorted(got_analytics)
    assert len(set(sent)) == len(sent)
    queue = clocked.queues.get(queue_name)
    assert all(queue.shard(s).state == "retired" for s in others)
    assert not [s for s in queue.shards if s.state == "sealed"]  # nothing left behind on a sealed shard
    # Shard work, non-bottomless queue included: maintenance (compaction + retention) on the first
    # pass's one shard; a flush of shard 0 as soon as it holds records; then nothing more within the
    # 60 s cadences (the test's coordinator time is ~13 s).
    assert [(w.actions, w.shards) for w in invoker.shard_work()] == [
        (["compact", "retention"], [0]),
        (["flush", "compact"], [0]),
    ]


class TakingTurns:
    """Stands in for the publisher's `random`: each send goes to the next open shard in turn."""

    def __init__(self) -> None:
        self.turn = 0

    def choice(self, candidates):
        self.turn += 1
        return candidates[self.turn % len(candidates)]


def test_bottomless_shards_retire_only_once_flushed(clocked, clock, queue_name, monkeypatch):
    clocked.queues.create(queue_name, {"bottomless": True, "min_shards": 2, "retention_seconds": 60})
    invoker = RecordingInvoker()
    coord = coordinator(clocked, queue_name, invoker=invoker)
    coord.run_once()
    queue = clocked.queues.get(queue_name)
    # Both shards must hold records: a shard with none is trivially flushed, and whichever one is sealed
    # must first wait for its flush. Sends take turns: at random, retrying until both held records could
    # send enough for the coordinator to add a third shard and then seal two (it failed CI that way).
    monkeypatch.setattr("sluice.engine.publish.random", TakingTurns())
    send(clocked, queue_name, 2)
    assert all(head(clocked, queue, s.id).get("next", 0) > 1 for s in queue.shards)
    clocked.queues.update_settings(queue_name, {"min_shards": 1})
    clock.advance(1_000)
    coord.run_once()
    flushes = [w for w in invoker.shard_work() if "flush" in w.actions]
    assert flushes and set(flushes[-1].shards) <= {0, 1} and "retention" not in flushes[-1].actions
    for _ in range(3):  # low load → seal one
        clock.advance(3_000)
        coord.run_once()
    queue = clocked.queues.get(queue_name)
    sealed = [s for s in queue.shards if s.state == "sealed"]
    assert len(sealed) == 1
    drain(clocked, queue_name, "default")
    clock.advance(1_000)
    assert coord.run_once().queues[0].retired == []  # drained, not yet in S3
    assert any("flush" in w.actions and sealed[0].id in w.shards for w in invoker.shard_work())
    h = head(clocked, queue, sealed[0].id)
    clocked.backend.control.put(
        {
            "pk": f"SEG#{queue_name}#{queue.incarnation}#{sealed[0].id}",
            "sk": "0".zfill(16),
            "last": h["next"] - 1,
            "key": "segments/x",
        }
    )
    clock.advance(1_000)
    assert coord.run_once().queues[0].retired == [sealed[0].id]


@pytest.fixture
def atomic_moto_updates(monkeypatch):
    """DynamoDB applies a conditional update atomically per item; moto's in-process backend checks and
    writes without a lock, so two threads can both pass one condition. Serialise its UpdateItem."""
    from moto.dynamodb.models import DynamoDBBackend

    lock = threading.Lock()
    original = DynamoDBBackend.update_item

    def update_item(self, *args, **kwargs):
        with lock:
            return original(self, *args, **kwargs)

    monkeypatch.setattr(DynamoDBBackend, "update_item", update_item)


def test_two_coordinators_at_once_one_acts_the_other_stands_down(
    engine, queue_name, caplog, atomic_moto_updates
):
    engine.queues.create(queue_name)
    barrier = threading.Barrier(2)
    reports = {}

    def run(holder):
        coord = coordinator(engine, queue_name, holder=holder)
        barrier.wait()
        reports[holder] = coord.run_once()

    with caplog.at_level(logging.INFO, logger="sluice.engine.coordinator"):
        threads = [threading.Thread(target=run, args=(h,)) for h in ("alpha", "beta")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    acted = [h for h, r in reports.items() if r.acted]
    stood = [h for h, r in reports.items() if not r.acted]
    assert len(acted) == 1 and len(stood) == 1
    assert f"coordinator {stood[0]} stands down: the pass is owned by {acted[0]}" in caplog.text
    assert reports[acted[0]].queues[0].queue == queue_name


def test_a_coordinator_whose_lease_was_taken_over_cannot_write_the_map(clocked, clock, queue_name):
    clocked.queues.create(queue_name)
    old = coordinator(clocked, queue_name, holder="old")
    assert old.run_once().acted
    stale_token = old.ownership.token
    clock.advance(LEASE_MS + 1)  # the old holder stalls past its lease (GC pause, slow network...)
    new = coordinator(clocked, queue_name, holder="new")
    report = new.run_once()
    assert report.acted and report.token > stale_token and new.ownership.took_over_expired
    assert clocked.queues.get(queue_name).fence == report.token

    # The stale coordinator wakes up and writes the map with its old token: the condition fails.
    def add_shard(q: Queue) -> Queue:
        return q.model_copy(update={"next_shard_id": q.next_shard_id + 1})

    with pytest.raises(errors.Conflict):
        clocked.queues.modify(queue_name, add_shard, fence=stale_token)
    assert clocked.queues.get(queue_name).next_shard_id == 1
    # And through its own loop it cannot renew, so it stands down.
    assert not old.run_once().acted


def test_coordinator_starts_push_workers_in_proportion_to_backlog(engine, api, queue_name):
    engine.queues.create(queue_name)
    status, body = api(
        "POST",
        f"/v1/queues/{queue_name}/consumers",
        {"type": "webhook", "url": "https://example.com/hook", "max_batch_size": 10, "max_concurrency": 3},
    )
    assert status == 201, body
    invoker = RecordingInvoker()
    coord = coordinator(engine, queue_name, invoker=invoker)
    coord.config.push_batches_per_worker = 4
    send(engine, queue_name, 1, per_request=30)  # ceil(30 / 10 / 4) = 1 worker
    coord.run_once()
    pushes = [PushWorkerEvent.model_validate(e).push for f, e in invoker.calls if f == "consumer"]
    assert [p.slot for p in pushes] == [0] and pushes[0].queue == queue_name
    send(engine, queue_name, 5, per_request=100)  # 530 → ceil(13.25) capped at 3
    invoker.calls.clear()
    coord.run_once()
    assert sorted(e["push"]["slot"] for _, e in invoker.calls if "push" in e) == [0, 1, 2]


def _add_group(engine, queue_name, group):
    engine.queues.modify(queue_name, lambda q: q.model_copy(update={"groups": {**q.groups, group: 0}}))


@pytest.mark.parametrize("bottomless", [False, True])
def test_coordinator_alone_flushes_and_compacts_every_queue(clocked, clock, queue_name, bottomless):
    """Only coordinator passes (fake clock, 5 s ticks) drive shard work; the invoker runs each event
    as the shard function does. Bottomless or not, records reach S3 and level-0 segments are merged."""
    clocked.queues.create(queue_name, {"bottomless": bottomless, "min_shards": 2, "max_shards": 2})
    invoker = RecordingInvoker(clocked)
    coord = coordinator(clocked, queue_name, invoker=invoker)
    coord.config.work = ShardWorkPolicy(flush_every_ms=20_000, maintenance_every_ms=60_000)
    sent = 0
    for _ in range(5 * 4):  # 100 s of 5 s ticks: 5 flush cadences
        sent += len(send(clocked, queue_name, 1, per_request=3))
        clock.advance(5_000)
        coord.run_once()
    queue = clocked.queues.get(queue_name)
    heads = {s.id: head(clocked, queue, s.id) for s in queue.shards}
    assert sum(h["next"] for h in heads.values()) == sent
    segments = {s.id: list_segments(clocked.backend, queue, s.id) for s in queue.shards}
    in_s3 = sum(r.last - r.first + 1 for refs in segments.values() for r in refs)
    flushed = sum(h.get("flushed", 0) for h in heads.values())
    assert flushed >= sent - 2 * 3 * 4  # at most the last flush cadence's sends wait in the hot tier
    assert in_s3 == flushed
    assert any(r.level >= 1 for refs in segments.values() for r in refs), segments  # compacted
    work = invoker.shard_work()
    assert all(set(w.shards) <= {0, 1} for w in work)
    assert any(w.actions == ["flush", "compact"] for w in work)
    assert any("retention" in w.actions for w in work) is not bottomless


def test_after_a_purge_the_coordinator_counts_no_backlog(clocked, clock, queue_name, monkeypatch):
    """Purged messages are gone for the coordinator too (it reads shard state through the same reader as
    pulls and metrics): its backlog metric, oldest age, drained check and push-worker count all see 0."""
    from sluice.engine.push import PushConsumer

    clocked.queues.create(queue_name, {"min_shards": 2, "max_shards": 2})
    queue = clocked.queues.get(queue_name)
    clocked.push_consumers.create(
        queue, PushConsumer(id="hook", type="webhook", url="https://example.com/h", max_concurrency=3)
    )
    monkeypatch.setattr("sluice.engine.publish.random", TakingTurns())
    send(clocked, queue_name, 2)
    assert all(head(clocked, queue, s.id).get(keys.HEAD_NEXT, 0) > 1 for s in queue.shards)

    def seal_shard_1(q: Queue) -> Queue:
        shards = [s.model_copy(update={"state": "sealed"}) if s.id == 1 else s for s in q.shards]
        return q.model_copy(update={"shards": shards})

    clocked.queues.modify(queue_name, seal_shard_1)
    invoker = RecordingInvoker()
    coord = coordinator(clocked, queue_name, invoker=invoker)
    before = coord.run_once().queues[0]  # seals shard 1's HEAD
    assert before.backlog["default"] > 0 and before.push_workers_started > 0 and before.retired == []

    clocked.operations.purge(queue_name)
    clock.advance(1_000)
    invoker.calls.clear()
    after = coord.run_once().queues[0]
    assert after.backlog == {"default": 0} and after.total_backlog == 0
    assert after.oldest_message_age_s == 0.0
    assert after.push_workers_started == 0 and not [f for f, _ in invoker.calls if f == "consumer"]
    assert after.retired == [1]  # sealed and drained: nothing left that any group must read
    assert clocked.operations.metrics(queue_name)["backlog_count"] == 0


class HeadThrottlingClient:
    """The DynamoDB client with BatchGetItem throttled on chosen shards' partition keys, as DynamoDB does
    it: throttled keys come back unprocessed, and a call where no key could be read fails with
    ProvisionedThroughputExceededException."""

    def __init__(self, client, hot_pks: set[str]) -> None:
        self.client = client
        self.hot_pks = hot_pks
        self.throttled = 0

    def __getattr__(self, name):
        return getattr(self.client, name)

    def batch_get_item(self, RequestItems):
        from botocore.exceptions import ClientError

        asked, hot = {}, {}
        for table, request in RequestItems.items():
            for k in request["Keys"]:
                into = hot if k["pk"]["S"] in self.hot_pks else asked
                into.setdefault(table, {**request, "Keys": []})["Keys"].append(k)
        self.throttled += bool(hot)
        if not asked:
            error = {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "throttled"}}
            raise ClientError(error, "BatchGetItem")
        return {**self.client.batch_get_item(RequestItems=asked), "UnprocessedKeys": hot}


def test_a_throttled_head_read_scales_up_instead_of_failing_the_pass(clocked, clock, queue_name, monkeypatch):
    from sluice.adapters import dynamo

    monkeypatch.setattr(dynamo.time, "sleep", lambda _s: None)  # the unprocessed-key backoff pauses
    clocked.queues.create(queue_name, {"max_shards": 32})
    coord = coordinator(clocked, queue_name, heavy_growth=8.0)
    send(clocked, queue_name, 3)
    coord.run_once()  # reads shard 0's counters: what later rates are measured against
    queue = clocked.queues.get(queue_name)
    before = head(clocked, queue, 0)
    hot = {keys.shard_pk(queue, 0)}
    real = dynamo.Table._client.fget
    throttling = HeadThrottlingClient(real(clocked.backend.control), hot)
    monkeypatch.setattr(dynamo.Table, "_client", property(lambda self: throttling))

    # The only shard's HEAD cannot be read: the whole BatchGetItem is throttled. The pass goes on and
    # treats the shard as saturated: heavy growth, x8.
    clock.advance(1_000)
    report = coord.run_once().queues[0]
    assert throttling.throttled and report.unreadable == [0]
    assert report.added == list(range(1, 8)) and report.open_shards == 8

    # Still hot among 7 readable shards: the others are read, the hot one forces at least one more.
    clock.advance(1_000)
    report = coord.run_once().queues[0]
    assert report.unreadable == [0] and report.open_shards >= 9
    # The counters of the last pass that read it are kept for the pass that reads it again.
    saved = coord.saved.load(clocked.queues.get(queue_name))
    assert saved.counts["0"] == list(head_of(before).counters)

    throttling.hot_pks = set()
    clock.advance(1_000)
    assert coord.run_once().queues[0].unreadable == []


def test_a_queue_of_256_shards_and_its_scale_out_fit_ssm(clocked, clock, queue_name):
    """moto refuses values SSM refuses (4 KB Standard, 8 KB Advanced): the full map was 23,404 B."""
    created = clocked.queues.create(queue_name, {"min_shards": 200, "max_shards": 256})
    assert len(mapdoc.decode(clocked.backend.mirror.read(queue_name)).open_shards) == 200
    assert len(created.model_dump_json()) > 8192
    coord = coordinator(clocked, queue_name)
    coord.run_once()
    clocked.queues.update_settings(queue_name, {"min_shards": 256})
    clock.advance(1_000)
    assert coord.run_once().queues[0].open_shards == 256
    assert len(mapdoc.decode(clocked.backend.mirror.read(queue_name)).open_shards) == 256


def test_a_queue_whose_pass_fails_does_not_cost_the_queues_after_it_their_pass(
    clocked, clock, queue_name, monkeypatch
):
    first, second = f"{queue_name}-a", f"{queue_name}-b"
    for name in (first, second):
        clocked.queues.create(name, {"max_shards": 8})
    config = CoordinatorConfig(
        policy=ScalingPolicy(shard_wcu_ceiling=10.0),
        ownership_ms=LEASE_MS,
        ownership_sk=f"LEASE-{queue_name}",
        queues=[first, second],
    )
    coord = Coordinator(clocked.backend, clocked.queues, None, config)
    coord.run_once()
    for name in (first, second):
        send(clocked, name, 20)
    write = clocked.backend.mirror.write

    def refused(queue: str, document: str) -> None:
        if queue == first:
            raise ClientError(
                {"Error": {"Code": "ValidationException", "Message": "too big"}}, "PutParameter"
            )
        write(queue, document)

    monkeypatch.setattr(clocked.backend.mirror, "write", refused)
    clock.advance(1_000)
    report = coord.run_once()
    assert report.failed == [first]
    assert [q.queue for q in report.queues] == [second] and report.queues[0].added


def test_a_mirror_left_behind_by_a_delete_is_pruned_and_its_shards_refuse_sends(
    clocked, queue_name, monkeypatch
):
    """The delete could not reach this region's SSM: its mirror lingers, and a broker that reads it (or
    still holds it) would send into the old shards. The coordinator's pass lists the SSM path, seals the
    shards and deletes the mirror."""
    queue = clocked.queues.create(queue_name, {"min_shards": 2})
    doc = clocked.backend.mirror.read(queue_name)
    monkeypatch.setattr(clocked.queues, "seal_heads", lambda *_a, **_k: 0)  # the region was unreachable
    clocked.queues.delete(queue_name)
    monkeypatch.undo()
    clocked.backend.mirror.write(queue_name, doc)  # what the delete could not remove
    stale = Publisher(clocked.backend, QueueDirectory(clocked.queues, lambda _name: doc))
    stale.publish(queue_name, [OutgoingMessage(body=b'"lost"')])  # accepted into a deleted queue

    # Another container's clock ran ahead when it last listed the path: a listing "in the future" is due
    # (else a skewed clock would stop pruning for good).
    pruned_at = clocked.backend.clock() + 3_600_000
    clocked.backend.control.put(
        {keys.PK: keys.COORDINATOR_PK, keys.SK: keys.COORDINATOR_PRUNED_SK, "at": pruned_at}
    )
    config = CoordinatorConfig(ownership_ms=LEASE_MS, ownership_sk=f"LEASE-{queue_name}", queues=[])
    report = Coordinator(clocked.backend, clocked.queues, None, config).run_once()
    assert queue_name in report.pruned
    assert clocked.backend.mirror.read(queue_name) is None
    assert all(head(clocked, queue, s.id).get("sealed") for s in queue.shards)
    with pytest.raises(errors.QueueNotFound):
        stale.publish(queue_name, [OutgoingMessage(body=b'"refused"')])


def test_the_oldest_age_of_a_striped_shard_is_the_item_its_ack_level_is_in(
    settings, clock, queue_name, monkeypatch
):
    """Items of 30 messages sent a second apart, read by stripes of 100-sequence blocks. A puller that
    keeps to stripe 1 reads its second block before anyone reads stripe 2: the group's ack level is
    stripe 2's first block, which starts inside an item and where no lane's read stands, so the
    coordinator finds that item with a Query (as the coordinator's role: the IAM call audit checks it
    against the template). Before, the pass left the shard out and reported age 0."""
    import random

    from sluice.engine.lanes import STRIPE_BLOCK
    from sluice.engine.store import ShardAddress
    from sluice.local import callaudit
    from sluice.service import Sluice

    containers = [Sluice.from_settings(settings, clock=clock) for _ in range(2)]
    engine = containers[0]
    engine.queues.create(queue_name, {"min_shards": 1, "max_shards": 1})
    queue = engine.queues.get(queue_name)
    started = clock.now
    for _ in range(20):
        send(engine, queue_name, 1, per_request=30)
        clock.advance(1_000)
    first = engine.consumer.pull(queue_name, group="default", batch_size=10)
    engine.consumer.ack(queue_name, [m.lease_id for m in first.messages])
    at = ShardAddress.of(queue, queue.shards[0])
    assert engine.backend.store.split(at, "default", 4, stripe=STRIPE_BLOCK)  # stripes 1-3 from 10
    coord = coordinator(engine, queue_name)
    monkeypatch.setattr("sluice.engine.pullplan.random", random.Random(11))  # the first puller: stripe 1
    levels = []
    for consumer in (containers[1].consumer, containers[1].consumer, engine.consumer):
        batch = consumer.pull(queue_name, group="default", batch_size=100)
        consumer.ack(queue_name, [m.lease_id for m in batch.messages])
        (read,) = engine.consumer.planner.states.read(queue, queue.shards, ["default"])
        lanes = read.groups["default"]
        level = lanes.ack_level(read.head.next, read.head.floor)
        levels.append((level, {lane: ls.state.read for lane, ls in lanes.lanes.items()}))
        with callaudit.attributed(c.FN_COORDINATOR):
            age = coord.run_once().queues[0].oldest_message_age_s
        assert age == (clock.now - (started + level // 30 * 1_000)) / 1000 > 0
    level, reads = levels[1]  # stripe 1 read two blocks, stripe 2 none: its first block, inside an item
    assert level == 110 and reads[1] == 410 and reads[2] == 0 and level not in reads.values()
