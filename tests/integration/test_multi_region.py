"""The data plane across two regions on one moto (which keeps regions apart): sends stay in the
broker's region, a consumer in one region drains every region exactly once per group, acks go to the
shard's region, segments stay in their region's bucket, and an unreachable region neither stops the
other's pulls nor loses what it holds (issue 13, docs/design.md "Multi-region").

The queue documents are built here with regional shards (`QueueRegistry.modify`) and written to both
regions' mirrors, as the control plane does; tables are tiny: one shard table per region."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from sluice import constants as c
from sluice import errors
from sluice.adapters import aws
from sluice.adapters.s3 import Bucket
from sluice.engine.regions import RegionBreaker
from sluice.engine.streams import parse_position
from sluice.faults import RegionOutage
from sluice.local import moto_patches
from sluice.models import OutgoingMessage, Queue, Shard
from sluice.segmentformat import queue_prefix
from sluice.settings import Settings
from tests.conftest import report
from tests.regions import regional_settings

HOME, AWAY = REGIONS = ("us-east-1", "eu-west-1")
STAGE = "mr"
PER_REGION = 2  # shards of each region in the test queues


@pytest.fixture(scope="module")
def region_settings(settings) -> dict[str, Settings]:
    """Two regions' settings over same-named tables in each region (the deployed naming)."""
    return regional_settings(
        STAGE, REGIONS, settings.aws_endpoint_url, lease_key_secret=settings.lease_key_secret
    )


@pytest.fixture
def regional(region_settings) -> dict[str, Any]:
    """A fresh engine per region (fresh per-process breakers)."""
    from sluice.service import Sluice

    return {region: Sluice.from_settings(s) for region, s in region_settings.items()}


def make_queue(regional: dict[str, Any], raw: dict[str, Any] | None = None) -> Queue:
    """A queue with PER_REGION open shards in each region, mirrored in both regions."""
    name = f"mr-{uuid.uuid4().hex[:10]}"
    home = regional[HOME]
    home.queues.create(name, raw)

    def regional_shards(queue: Queue) -> Queue:
        count = PER_REGION * len(REGIONS)
        shards = [
            Shard(id=i, table=0, created_ms=queue.created_ms, region=REGIONS[i // PER_REGION])
            for i in range(count)
        ]
        return queue.model_copy(update={"shards": shards, "next_shard_id": count})

    queue = home.queues.modify(name, regional_shards)
    for engine in regional.values():
        copy_mirror(engine, queue)
    return queue


def copy_mirror(engine: Any, queue: Queue) -> None:
    """Write `queue`'s mirror in `engine`'s region as the test's own step, a second after the engine's
    writes (moto allows 3 PutParameter a second per region, as AWS does: sluice/local/moto_patches.py)."""
    moto_patches.refill_ssm_quota()
    engine.backend.mirror.write(queue.name, queue.model_dump_json())


def region_of(queue: Queue, shard_id: int) -> str | None:
    found = queue.shard(shard_id)
    assert found is not None
    return found.region


def msgs(n: int, tag: str) -> list[OutgoingMessage]:
    return [OutgoingMessage(body=b'"%s-%d"' % (tag.encode(), i)) for i in range(n)]


@contextmanager
def recorded_calls() -> Iterator[list[tuple[str, str, str]]]:
    """(region, service, operation) of every AWS API call made inside the block."""
    calls: list[tuple[str, str, str]] = []
    lock = threading.Lock()
    attached: list[Any] = []
    uid = f"test-region-calls-{uuid.uuid4().hex}"

    def attach(client: Any) -> None:
        region, service = client.meta.region_name, client.meta.service_model.service_name

        def note(model: Any, **_: Any) -> None:
            with lock:
                calls.append((region, service, model.name))

        client.meta.events.register("before-call", note, unique_id=uid)
        attached.append(client)

    stop = aws.instrument(attach)
    try:
        yield calls
    finally:
        stop()
        for client in attached:
            client.meta.events.unregister("before-call", unique_id=uid)


def drain(engine: Any, queue: str, group: str, expected: int, *, limit_s: float = 60.0) -> list[Any]:
    """Pull and ack until `expected` messages were delivered (and one more pull finds nothing)."""
    got: list[Any] = []
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        batch = engine.consumer.pull(queue, group=group, batch_size=10)
        if batch.messages:
            result = engine.consumer.ack(queue, [d.lease_id for d in batch.messages])
            assert result.ack_count == len(batch.messages), result.warnings
            got += batch.messages
        elif len(got) >= expected:
            return got
    raise AssertionError(f"{len(got)} of {expected} messages delivered in {limit_s} s")


# --- publish ----------------------------------------------------------------------------------------------


def test_unordered_publish_makes_no_cross_region_call(regional):
    queue = make_queue(regional)
    for region, engine in regional.items():
        with recorded_calls() as calls:
            results = [engine.publisher.publish(queue.name, msgs(5, f"{region}-{i}")) for i in range(10)]
        assert calls, "nothing was recorded"
        elsewhere = [call for call in calls if call[0] != region]
        assert elsewhere == [], f"a send from {region} called other regions: {Counter(elsewhere)}"
        assert {region_of(queue, r.shard) for r in results} == {region}
        assert len({r.shard for r in results}) == PER_REGION  # spread over the region's open shards


def test_ordered_keys_live_on_the_home_regions_shards(regional):
    queue = make_queue(regional, {"ordered": True})
    keyed = [OutgoingMessage(body=b"1", partition_key=f"k{i}") for i in range(20)]
    for engine in regional.values():
        for message in keyed:
            result = engine.publisher.publish(queue.name, [message])
            assert region_of(queue, result.shard) == HOME
    # The same key lands on the same shard whichever region's broker took it.
    firsts = [regional[r].publisher.publish(queue.name, keyed[:1]).shard for r in REGIONS]
    assert firsts[0] == firsts[1]


def test_a_region_without_open_shards_sends_to_another_rather_than_failing(regional):
    queue = make_queue(regional)
    home = regional[HOME]
    queue = home.queues.modify(
        queue.name,
        lambda q: q.model_copy(
            update={
                "shards": [
                    s if s.region == HOME else s.model_copy(update={"state": "sealed"}) for s in q.shards
                ]
            }
        ),
    )
    copy_mirror(regional[AWAY], queue)
    result = regional[AWAY].publisher.publish(queue.name, msgs(1, "fallback"))
    assert region_of(queue, result.shard) == HOME


# --- consume ----------------------------------------------------------------------------------------------


def test_a_consumer_drains_every_region_once_per_group_and_acks_in_the_shards_region(regional):
    queue = make_queue(regional)
    home = regional[HOME]
    home.groups.create(queue.name, "second")
    copy_mirror(regional[AWAY], home.queues.get(queue.name))
    sent = set()
    for region, engine in regional.items():
        for i in range(4):
            batch = msgs(10, f"{region}-{i}")
            engine.publisher.publish(queue.name, batch)
            sent |= {m.body for m in batch}
    for group in ("default", "second"):
        got = drain(home, queue.name, group, len(sent))
        bodies = [d.body for d in got]
        assert len(bodies) == len(set(bodies)) == len(sent), "a message was delivered twice or lost"
        assert set(bodies) == sent
        assert {region_of(queue, d.shard) for d in got} == set(REGIONS)
        # The acks reached each shard's own region: no group state there holds anything.
        current = home.queues.get(queue.name)
        reads = home.consumer.shard_states.read(current, current.shards, [group])  # one call per region
        assert sum(read.head.next for read in reads) == len(sent)
        for read in reads:
            assert home.backend.table_for(read.shard).region == (read.shard.region or HOME)
            assert read.backlog(group) == 0, f"shard {read.shard.id} ({read.shard.region}) still has work"


def test_acks_and_retries_of_another_regions_shard_are_written_there(regional):
    queue = make_queue(regional)
    regional[AWAY].publisher.publish(queue.name, msgs(3, "away"))
    home = regional[HOME]
    batch = home.consumer.pull(queue.name, group="default", batch_size=10)
    assert len(batch.messages) == 3 and {region_of(queue, d.shard) for d in batch.messages} == {AWAY}
    with recorded_calls() as calls:
        result = home.consumer.ack(queue.name, [batch.messages[0].lease_id])
    assert result.ack_count == 1
    writes = {(region, op) for region, service, op in calls if op in ("PutItem", "UpdateItem")}
    assert writes == {(AWAY, "UpdateItem")}, calls  # the ack is an ADD on the lane item there
    from sluice.engine.consume import RetryRequest

    retried = home.consumer.ack(queue.name, [], [RetryRequest(d.lease_id, 0) for d in batch.messages[1:]])
    assert retried.retry_count == 2
    again = drain(home, queue.name, "default", 2)
    assert sorted(d.body for d in again) == sorted(d.body for d in batch.messages[1:])


def test_acks_carried_on_a_pull_reach_another_regions_shards_or_refuse_the_pull(regional):
    queue = make_queue(regional)
    home = regional[HOME]
    regional[AWAY].publisher.publish(queue.name, msgs(2, "carried"))
    first = home.consumer.pull(queue.name, group="default", batch_size=1).messages
    home.consumer.breaker = RegionBreaker(cooldown_s=60.0)
    home.consumer.breaker.trip(AWAY)
    with pytest.raises(errors.DependencyUnavailable):  # refused before anything changes
        home.consumer.pull(queue.name, group="default", batch_size=1, acks=[first[0].lease_id])
    home.consumer.breaker = RegionBreaker()
    second = home.consumer.pull(queue.name, group="default", batch_size=1, acks=[first[0].lease_id])
    assert second.ack is not None and second.ack.ack_count == 1
    assert [d.body for d in second.messages] != [first[0].body]
    home.consumer.ack(queue.name, [d.lease_id for d in second.messages])
    reads = home.consumer.shard_states.read(queue, [s for s in queue.shards if s.region == AWAY], ["default"])
    assert sum(r.head.next for r in reads) == 2 and all(r.backlog("default") == 0 for r in reads)


def test_dead_letters_and_redrive_cross_regions(regional):
    dlq = make_queue(regional)
    source = make_queue(regional, {"max_retries": 1, "dead_letter_queue": dlq.name})
    home, away = regional[HOME], regional[AWAY]
    sent = msgs(3, "to-dlq")
    away.publisher.publish(source.name, sent)
    from sluice.engine.consume import RetryRequest

    batch = home.consumer.pull(source.name, group="default", batch_size=10).messages
    assert {region_of(source, d.shard) for d in batch} == {AWAY}
    home.consumer.ack(source.name, [], [RetryRequest(d.lease_id, 0) for d in batch])  # out of deliveries
    # The consumer's broker wrote the dead letters: to its own region's shards of the DLQ.
    dead = home.consumer.pull(dlq.name, group="default", batch_size=10, visibility_ms=1).messages
    assert sorted(d.body for d in dead) == sorted(m.body for m in sent)
    assert {region_of(dlq, d.shard) for d in dead} == {HOME}
    time.sleep(0.01)  # the DLQ leases above lapse: redrive pulls them again
    # Redrive from the other region's API moves them back into its own region's shards.
    assert away.operations.redrive(source.name, dlq.name)["moved"] == 3
    again = drain(home, source.name, "default", 3)
    assert sorted(d.body for d in again) == sorted(m.body for m in sent)
    assert {region_of(source, d.shard) for d in again} == {AWAY}


# --- an unreachable region -------------------------------------------------------------------------------


class Monotonic:
    """The breaker's clock, moved by hand: cool-downs end when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    started = time.monotonic()
    try:
        return call(), time.monotonic() - started
    except errors.DependencyUnavailable as exc:
        return exc, time.monotonic() - started


def test_an_unreachable_region_does_not_stop_the_other_and_loses_nothing(regional, pytestconfig):
    queue = make_queue(regional)
    home, away = regional[HOME], regional[AWAY]
    clock = Monotonic()
    home.consumer.breaker = breaker = RegionBreaker(cooldown_s=5.0, clock=clock)
    before = {m.body for m in msgs(6, "away-before")}
    away.publisher.publish(queue.name, msgs(6, "away-before"))
    leased = home.consumer.pull(queue.name, group="default", batch_size=1).messages
    assert len(leased) == 1 and region_of(queue, leased[0].shard) == AWAY
    delivered: list[bytes] = [leased[0].body]
    ack = [leased[0].lease_id]

    with RegionOutage() as outage:
        outage.down.add(AWAY)
        # Producers of the reachable region go on: their sends touch nothing of the other region.
        _, send_s = timed(lambda: home.publisher.publish(queue.name, msgs(8, "home-during")))
        assert outage.refused[AWAY] == 0
        # The ack of a message of the unreachable region fails retryably and changes nothing.
        failed, first_ack_s = timed(lambda: home.consumer.ack(queue.name, ack))
        assert isinstance(failed, errors.DependencyUnavailable)
        assert outage.refused[AWAY] == aws.REMOTE_CONFIG.retries["total_max_attempts"]  # one call
        assert not breaker.allows(AWAY)
        # Pulls answer from the reachable region without calling the cooling one.
        refused = outage.refused[AWAY]
        pulls = [
            timed(lambda: home.consumer.pull(queue.name, group="default", batch_size=4)) for _ in range(3)
        ]
        during = [d for batch, _ in pulls for d in batch.messages]
        assert outage.refused[AWAY] == refused
        # While it cools down, an ack for it is refused at once, without a call.
        refusal, refusal_s = timed(lambda: home.consumer.ack(queue.name, ack))
        assert isinstance(refusal, errors.DependencyUnavailable) and outage.refused[AWAY] == refused
        # After the cool-down a pull tries the region again (one failed call), then answers anyway.
        clock.now += breaker.cooldown_s
        retry, retry_s = timed(lambda: home.consumer.pull(queue.name, group="default", batch_size=4))
        assert outage.refused[AWAY] > refused and not breaker.allows(AWAY)
        during += retry.messages
        home.consumer.ack(queue.name, [d.lease_id for d in during])
        assert {region_of(queue, d.shard) for d in during} == {HOME}
        assert len(during) == 8
        delivered += [d.body for d in during]

    clock.now += breaker.cooldown_s  # the region is back and its cool-down over
    assert home.consumer.ack(queue.name, ack).ack_count == 1
    after = drain(home, queue.name, "default", 5)
    delivered += [d.body for d in after]
    assert len(delivered) == len(set(delivered)) == 6 + 8
    assert before <= set(delivered)
    from tests.conftest import report

    title = "multi-region: one region unreachable (moto in-process, EndpointConnectionError)"
    report(pytestconfig, title, f"send in the reachable region: {send_s * 1000:.0f} ms")
    report(
        pytestconfig,
        title,
        f"first ack to the unreachable region (fails, trips): {first_ack_s * 1000:.0f} ms",
    )
    report(
        pytestconfig, title, f"pulls while it cools down: {', '.join(f'{s * 1000:.0f}' for _, s in pulls)} ms"
    )
    report(pytestconfig, title, f"ack refused while it cools down: {refusal_s * 1000:.1f} ms")
    report(pytestconfig, title, f"pull after the cool-down (one failed try): {retry_s * 1000:.0f} ms")


def test_a_stream_read_from_a_cursor_skips_an_unreachable_region_and_resumes_it(regional):
    queue = make_queue(regional)
    home = regional[HOME]
    clock = Monotonic()
    home.reader.breaker = breaker = RegionBreaker(cooldown_s=5.0, clock=clock)
    for engine in regional.values():
        engine.publisher.publish(queue.name, msgs(3, f"first-{engine.backend.region}"))
    page = home.reader.read(queue.name, _beginning(), limit=100)
    assert len(page.records) == 6
    for engine in regional.values():
        engine.publisher.publish(queue.name, msgs(2, f"second-{engine.backend.region}"))
    with RegionOutage() as outage:
        outage.down.add(AWAY)
        during = home.reader.read(queue.name, parse_position(page.next_offset), limit=100)
        assert {during.regions[r.shard] for r in during.records} == {HOME} and len(during.records) == 2
        assert outage.refused[AWAY] > 0 and not breaker.allows(AWAY)
        replay = home.reader.read(queue.name, _beginning(), limit=100)  # from '-': no read of AWAY needed
        assert len(replay.records) == 5 and {replay.regions[r.shard] for r in replay.records} == {HOME}
        # The unreachable region's positions are where they were: nothing of it was skipped over.
        away_ids = {s.id for s in queue.shards if s.region == AWAY}
        assert {k: v for k, v in during.positions.items() if k in away_ids} == {
            k: v for k, v in page.positions.items() if k in away_ids
        }
    clock.now += breaker.cooldown_s
    after = home.reader.read(queue.name, parse_position(during.next_offset), limit=100)
    assert sorted(r.body for r in after.records) == sorted(m.body for m in msgs(2, f"second-{AWAY}"))


def test_a_pull_fails_retryably_only_when_no_region_answers(regional):
    queue = make_queue(regional)
    home = regional[HOME]
    home.consumer.breaker = RegionBreaker(cooldown_s=30.0)
    for region in REGIONS:
        home.consumer.breaker.trip(region)
    with pytest.raises(errors.DependencyUnavailable):
        home.consumer.pull(queue.name, group="default", batch_size=1)
    home.consumer.breaker = RegionBreaker(cooldown_s=30.0)
    home.consumer.breaker.trip(AWAY)
    assert home.consumer.pull(queue.name, group="default", batch_size=1).messages == []


# --- segments and stream reads ------------------------------------------------------------------------------


def bucket_keys(region_settings: dict[str, Settings], region: str, prefix: str = "") -> list[str]:
    settings = region_settings[region]
    return list(Bucket(settings.bucket_in(region), settings.aws_endpoint_url, region).keys(prefix))


def test_segments_and_overflow_bodies_stay_in_their_region_and_read_from_anywhere(regional, region_settings):
    queue = make_queue(regional, {"max_message_bytes": 1_048_576})
    large = OutgoingMessage(body=b'"' + b"x" * 300_000 + b'"')
    for region, engine in regional.items():
        engine.publisher.publish(queue.name, msgs(5, region))
    regional[AWAY].publisher.publish(queue.name, [large])
    overflow = bucket_keys(region_settings, AWAY, c.OVERFLOW_PREFIX)
    assert any(queue.incarnation in key for key in overflow)  # the body went to its shard's region
    assert not any(queue.incarnation in key for key in bucket_keys(region_settings, HOME, c.OVERFLOW_PREFIX))

    report = regional[AWAY].shard_worker.run("flush", queue=queue.name)
    assert report.shards == PER_REGION and report.flushed_records == 6, report
    segment_prefix = queue_prefix(queue.name)
    assert bucket_keys(region_settings, AWAY, segment_prefix)
    assert not bucket_keys(region_settings, HOME, segment_prefix)  # the home region's shards: untouched
    assert regional[HOME].shard_worker.run("flush", queue=queue.name).flushed_records == 5
    assert bucket_keys(region_settings, HOME, segment_prefix)

    # A reader in the home region replays both regions' streams: the away shards from their bucket.
    home = regional[HOME]
    page = home.reader.read(queue.name, _beginning(), limit=100)
    assert len(page.records) == 11
    assert {page.regions[r.shard] for r in page.records} == set(REGIONS)
    assert large.body in [r.body for r in page.records]
    listing = home.reader.shard_ranges(queue.name)
    assert {s["shard"]: s["region"] for s in listing} == {s.id: s.region for s in queue.shards}
    assert all(s["flushed_seq"] == s["next_seq"] for s in listing)
    # The consumer in the home region gets the away region's large body from that region's bucket.
    bodies = [d.body for d in drain(home, queue.name, "default", 11)]
    assert large.body in bodies


def _beginning():
    return parse_position("-")


def test_single_region_listings_and_reads_name_no_region(engine, queue_name):
    engine.queues.create(queue_name)
    engine.publisher.publish(queue_name, msgs(2, "single"))
    assert all("region" not in s for s in engine.reader.shard_ranges(queue_name))
    assert engine.reader.read(queue_name, _beginning(), limit=10).regions == {}


# --- a region that accepts connections and hangs; metrics with a region down (issue 26) -------------------
@contextmanager
def hanging_region(region: str) -> Iterator[None]:
    """DynamoDB calls to `region` go to a socket that accepts and reads, then never answers: what a
    region does when its endpoint is up and its service is stuck. The client is the one `aws.client`
    would make for that region (REMOTE_CONFIG), pointed at the socket."""
    import socket

    import botocore.session

    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)  # read nothing back, answer nothing

    threading.Thread(target=accept, daemon=True).start()
    session = botocore.session.get_session()
    client = session.create_client(
        "dynamodb",
        region_name=region,
        endpoint_url=f"http://127.0.0.1:{listener.getsockname()[1]}",
        config=aws.config_for(session, region),
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    key = ("dynamodb", None, region)
    with aws._lock:
        before = aws._clients.get(key)
        aws._clients[key] = client
    try:
        yield
    finally:
        with aws._lock:
            if before is None:
                aws._clients.pop(key, None)
            else:
                aws._clients[key] = before
        listener.close()
        for conn in held:
            conn.close()


@pytest.mark.slow
def test_a_long_pull_answers_within_its_window_while_another_region_hangs(regional, pytestconfig):
    """Each call to the hanging region ends at its bound (REMOTE_CONFIG: one attempt, 1 s connect + 2 s
    read), the breaker skips the region while it cools down, and once the pull waits, a read of it starts
    only if it can end before the deadline. Before: two attempts of up to 1 + 5 s with backoff between
    made each try ~11 s, so a 12 s pull retrying the region after a 1 s cool-down ended ~22 s in (a 20 s
    pull deployed: past the 29 s function timeout)."""
    queue = make_queue(regional)
    home = regional[HOME]
    home.consumer.breaker = RegionBreaker(cooldown_s=1.0)  # try the hanging region as often as possible
    wait_s = 12.0
    with hanging_region(AWAY):
        started = time.monotonic()
        batch = home.consumer.pull(queue.name, group="default", batch_size=5, wait_ms=int(wait_s * 1000))
        elapsed = time.monotonic() - started
    assert batch.messages == []
    assert elapsed <= wait_s + aws.REMOTE_CALL_SECONDS, elapsed
    report(
        pytestconfig,
        "multi-region: a region that hangs",
        f"a {wait_s:.0f} s pull answered in {elapsed:.1f} s",
    )


def test_metrics_skip_an_unreachable_region_and_name_it(regional):
    """Shards are read a region at a time in batches; a region that fails is skipped (and, cooling down,
    not even tried), and the answer names it: figures over the regions that answered."""
    queue = make_queue(regional)
    home, away = regional[HOME], regional[AWAY]
    home.publisher.publish(queue.name, msgs(3, "home"))
    away.publisher.publish(queue.name, msgs(4, "away"))
    whole = home.operations.metrics(queue.name)
    assert whole["backlog_count"] == 7 and "skipped_regions" not in whole
    assert whole["regions"][AWAY]["backlog_count"] == 4
    with RegionOutage() as outage:
        outage.down.add(AWAY)
        partial = home.operations.metrics(queue.name)
        refused = outage.refused[AWAY]
        again = home.operations.metrics(queue.name)  # cooling down: skipped without a call
        assert outage.refused[AWAY] == refused
    for answer in (partial, again):
        assert answer["skipped_regions"] == [AWAY]
        assert answer["backlog_count"] == 3 and set(answer["regions"]) == {HOME}
        assert {s["region"] for s in answer["shards"]} == {HOME}


def test_metrics_of_the_largest_queue_fit_the_response_budget():
    """256 shards in each of 3 regions, 32 consumer groups with 63-character names and the largest
    figures: ~5.4 MB as it was. Past the budget the answer keeps per-shard figures for the top group only
    and says so; the per-group totals stay whole. A small answer is left as it is."""
    import json

    from lambdas.common.errors import envelope
    from sluice.engine.operations import METRICS_BYTES, fit_metrics

    figures = {
        "backlog_count": 10**12,
        "backlog_bytes": 10**15,
        "in_flight": 10**6,
        "delayed": 10**6,
        "oldest_message_timestamp_ms": 1_700_000_000_000,
    }
    groups = ["default", *(f"{'g' * 60}{i:03d}" for i in range(31))]
    shards = [
        {
            "shard": i,
            "region": ("us-east-1", "eu-west-1", "ap-southeast-2")[i // 256],
            "state": "sealed",
            "next_seq": 10**15,
            "purge_floor": 10**15,
            "last_write_ms": 1_700_000_000_000,
            "consumer_groups": {g: dict(figures) for g in groups},
        }
        for i in range(768)
    ]
    top = {**figures, "oldest_message_age_ms": 10**9}
    answer = {
        "queue_name": "q" * 63,
        "paused": False,
        "shard_count": 768,
        **top,
        "consumer_groups": {g: top for g in groups},
        "shards": shards,
        "regions": {s["region"]: top for s in shards},
    }
    assert len(json.dumps(envelope(answer))) > METRICS_BYTES
    fitted = fit_metrics(answer, "default")
    assert len(json.dumps(envelope(fitted))) < METRICS_BYTES
    assert fitted["shard_groups_omitted"] is True and fitted["consumer_groups"] == answer["consumer_groups"]
    assert all(list(s["consumer_groups"]) == ["default"] for s in fitted["shards"])
    small = {**answer, "shards": shards[:2]}
    assert fit_metrics(small, "default") == small


def test_shard_ranges_list_an_unreachable_regions_shards_without_failing(regional):
    """`GET /v1/queues/{q}/shards` with a region down: its shards are listed, marked `unreachable`, with
    no offsets; the others' ranges as always (it answered 503 for the whole queue before)."""
    queue = make_queue(regional)
    home, away = regional[HOME], regional[AWAY]
    away.publisher.publish(queue.name, msgs(2, "away"))
    with RegionOutage() as outage:
        outage.down.add(AWAY)
        ranges = home.reader.shard_ranges(queue.name)
    assert len(ranges) == PER_REGION * len(REGIONS)
    for entry in ranges:
        if entry["region"] == AWAY:
            assert entry["unreachable"] is True and entry["last_offset"] is None
        else:
            assert "unreachable" not in entry
