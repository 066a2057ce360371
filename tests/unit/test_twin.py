"""The DynamoDB twin (bench/twin) answers like moto / DynamoDB on small cases: the same conditional
sequence through the real adapter gives the same results on both, throttles come back by code, and
capacity units follow DynamoDB's documented size rules."""

from __future__ import annotations

import contextlib
import random
import uuid
from collections import Counter
from functools import partial
from typing import Any

import pytest
from botocore.exceptions import ClientError

from bench.prices import LAMBDA_MEMORY_MB
from bench.twin.dynamo import (
    STALE_MAX_S,
    TABLE_QUOTA_THROTTLE,
    TABLE_UNITS_PER_S,
    THROTTLE,
    TwinDynamo,
    read_units,
    write_units,
)
from bench.twin.gateway import Gateway, TooManyRequests
from bench.twin.lambdas import ExecutionRefused, Executions, Operation, handler_cpu_s
from bench.twin.sim import Sim
from bench.twin.world import TwinBucket, TwinTable, _S3Client, build
from sluice import constants as c
from sluice import errors
from sluice.adapters import aws as aws_adapter
from sluice.adapters import dynamo as dynamo_adapter
from sluice.adapters.dynamo import ConditionFailed, Table
from sluice.engine import keys
from sluice.local.template import ACCOUNT_THROTTLE
from sluice.models import OutgoingMessage

ALLOCATE = "SET #n = if_not_exists(#n, :zero) + :count, #ts = :now ADD #cr :one"
ALLOCATE_IF = "attribute_not_exists(#sealed) AND (attribute_not_exists(#ts) OR #ts <= :now)"
NAMES = {"#n": "next", "#ts": "ts", "#sealed": "sealed", "#cr": "wreq"}


def _outcome(call: Any) -> Any:
    try:
        return ("ok", call())
    except ConditionFailed as exc:
        return ("condition failed", exc.item)


def _sequence(table: Table, pk: str) -> list[Any]:
    """Publish allocations, a seal, optimistic state writes, a lease take-over, queries, deletes."""
    out = []
    for now in (100, 200, 150):  # the third runs behind the stored clock: refused
        out.append(
            _outcome(
                lambda now=now: table.update(
                    pk,
                    "HEAD",
                    ALLOCATE,
                    condition=ALLOCATE_IF,
                    names=NAMES,
                    values={":zero": 0, ":count": 10, ":now": now, ":one": 1},
                    returns="UPDATED_NEW",
                )
            )
        )
    out.append(
        _outcome(lambda: table.update(pk, "HEAD", "SET #s = :t", names={"#s": "sealed"}, values={":t": True}))
    )
    out.append(
        _outcome(
            lambda: table.update(
                pk, "HEAD", ALLOCATE, condition=ALLOCATE_IF, names=NAMES,
                values={":zero": 0, ":count": 1, ":now": 300, ":one": 1}, returns="UPDATED_NEW",
            )
        )
    )  # fmt: skip
    state = {"pk": pk, "sk": "G#g", "ver": 1, "s": b"\x01state"}
    out.append(_outcome(lambda: table.put(state, condition="attribute_not_exists(pk)")))
    out.append(_outcome(lambda: table.put(state, condition="attribute_not_exists(pk)")))
    out.append(_outcome(lambda: table.put({**state, "ver": 2}, condition="ver = :v", values={":v": 1})))
    out.append(_outcome(lambda: table.put({**state, "ver": 2}, condition="ver = :v", values={":v": 1})))
    lease = {"#h": "holder", "#e": "exp_ms", "#r": "rel", "#t": "tok"}
    for holder, now in (("a", 0), ("b", 10), ("b", 99_999)):
        out.append(
            _outcome(
                lambda holder=holder, now=now: table.update(
                    pk,
                    "LEASE",
                    "SET #h = :me, #e = :e, #r = :f, #t = if_not_exists(#t, :z) + :one",
                    condition="attribute_not_exists(pk) OR #e < :now OR #r = :true",
                    names=lease,
                    values={":me": holder, ":e": now + 60_000, ":f": False, ":z": 0, ":one": 1, ":now": now,
                            ":true": True},
                    returns="ALL_OLD",
                )
            )
        )  # fmt: skip
    for seq in (0, 10, 20, 30):
        table.put({"pk": pk, "sk": f"M#{seq:020d}", "n": 10, "d": b"x" * 50})
    out.append([i["sk"] for i in table.query(pk, sk_from=f"M#{10:020d}", sk_to="M#~", limit=2)])
    out.append([i["sk"] for i in table.query(pk, sk_prefix="M#", forward=False, limit=3)])
    out.append([i["sk"] for i in table.query(pk, sk_to=f"M#{15:020d}")])
    out.append(_outcome(lambda: table.delete(pk, "G#g", condition="ver = :v", values={":v": 1})))
    out.append(_outcome(lambda: table.delete(pk, "G#g", condition="ver = :v", values={":v": 2})))
    out.append([table.get(pk, sk) for sk in ("HEAD", "G#g", "LEASE")])
    return out


@pytest.fixture(scope="module")
def moto_table(aws: None) -> Table:
    name = f"twin-check-{uuid.uuid4().hex[:6]}"
    aws_adapter.client("dynamodb").create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    return Table(name)


def _without_keys_in_updated_new(outcomes: list[Any]) -> list[Any]:
    """moto adds the key attributes to UPDATED_NEW when the update creates the item; DynamoDB returns
    only the attributes the update wrote ("UPDATED_NEW - Returns only the updated attributes")."""
    return [
        (o[0], {k: v for k, v in o[1].items() if k not in ("pk", "sk")})
        if isinstance(o, tuple) and o[0] == "ok" and isinstance(o[1], dict) and "wreq" in o[1]
        else o
        for o in outcomes
    ]


def test_conditional_sequence_matches_moto(moto_table: Table):
    pk = f"twin-{uuid.uuid4().hex[:8]}"
    on_moto = _without_keys_in_updated_new(_sequence(moto_table, pk))
    on_twin = _sequence(TwinTable("t", TwinDynamo(Sim())), pk)
    assert on_twin == on_moto
    assert on_twin[2][0] == on_twin[4][0] == "condition failed"  # behind the clock; sealed
    assert on_twin[4][1]["sealed"] is True  # ALL_OLD on failure: the item as it was


def test_capacity_units_follow_item_sizes():
    small = {"pk": {"S": "p"}, "sk": {"S": "s"}}  # 4 bytes
    big = {**small, "d": {"B": b"x" * 3580}}  # 4 + 1 + 3580 = 3585 bytes: 3.5 KB
    assert write_units(None, small) == 1
    assert write_units(None, big) == 4  # ceil(3.5 KB / 1 KB)
    assert write_units(big, small) == 4  # an update pays the larger of old and new
    assert read_units([3585], consistent=True, per_item=True) == 1  # ceil(3.5 KB / 4 KB)
    assert read_units([3585], consistent=False, per_item=True) == 0.5
    assert read_units([3585, 3585], consistent=True, per_item=False) == 2  # a Query sums first
    assert read_units([0], consistent=True, per_item=True) == 1  # a missing item still costs a unit


def test_partition_key_throttles_at_1000_wcu_per_second_with_the_aws_code():
    sim = Sim()
    twin = TwinDynamo(sim)
    table = TwinTable("t", twin)
    body = b"x" * 1100  # with keys and names: 2 WCU per put
    for i in range(500):  # 1,000 WCU: one second's worth, all at virtual time 0
        table.put({"pk": "hot", "sk": f"M#{i}", "d": body})
    with pytest.raises(errors.Throttled) as caught:
        table.put({"pk": "hot", "sk": "M#over", "d": body})
    assert caught.value.__cause__.response["Error"]["Code"] == THROTTLE  # mapped by code, not text
    table.put({"pk": "cold", "sk": "M#0", "d": body})  # another partition key is unaffected
    sim.now = 0.5  # half a second refills 500 WCU: 250 more puts
    accepted = 0
    with pytest.raises(errors.Throttled):
        while accepted < 1000:
            table.put({"pk": "hot", "sk": f"N#{accepted}", "d": body})
            accepted += 1
    assert accepted == 250


def test_a_table_throttles_past_its_on_demand_quota_though_no_partition_is_hot():
    sim = Sim()
    twin = TwinDynamo(sim)
    assert twin.table_units_per_s == TABLE_UNITS_PER_S == 40_000  # DynamoDB's default per table
    twin.table_units_per_s = 3_000  # a small quota, so a test reaches it: three partitions' worth
    table, other = TwinTable("t", twin), TwinTable("other", twin)
    body = b"x" * 1100  # 2 WCU per put
    for i in range(1_500):  # 3,000 WCU over 30 keys: 100 a key, a tenth of one partition's second
        table.put({"pk": f"p{i % 30}", "sk": f"M#{i}", "d": body})
    with pytest.raises(errors.Throttled) as caught:
        table.put({"pk": "fresh", "sk": "M#0", "d": body})
    response = caught.value.__cause__.response
    assert response["Error"]["Code"] == TABLE_QUOTA_THROTTLE  # mapped by code, as the partition's
    assert response["ThrottlingReasons"][0]["reason"] == "TableWriteAccountLimitExceeded"
    assert table.get("p0", "M#0") is not None  # reads have their own quota
    other.put({"pk": "p0", "sk": "M#0", "d": body})  # and every table its own
    sim.now = 0.5  # half a second refills half the quota: 750 more puts
    accepted = 0
    with pytest.raises(errors.Throttled):
        while accepted < 2_000:
            table.put({"pk": f"q{accepted % 30}", "sk": f"N#{accepted}", "d": body})
            accepted += 1
    assert accepted == 750


def test_s3_slows_a_prefix_down_past_its_request_rate_and_lists_a_thousand_keys_a_page():
    """3,500 writes a second per prefix (here a thousandth of it: 3.5, a bucket of 4): of 60 puts at one
    moment, those past what botocore's 6 attempts wait out answer SlowDown, which the adapter maps to a
    throttle; another prefix, and reads, have buckets of their own."""
    sim = Sim()
    client = _S3Client(sim, scale=0.001)
    bucket = TwinBucket("b", client)
    outcomes: Counter[str] = Counter()

    def put(i: int) -> None:
        try:
            bucket.put(f"hot/{i}", b"x")
            outcomes["stored"] += 1
        except errors.Throttled:
            outcomes["slowed down"] += 1

    for i in range(60):
        sim.spawn(f"put-{i}", partial(put, i), at=0.0)
    sim.run_until(60.0)
    assert outcomes["slowed down"] > 0 and client.slowdowns > outcomes["slowed down"]  # retried first
    assert 4 <= outcomes["stored"] <= 4 + 3.5 * 16  # the bucket, and what refills over the retries' waits
    assert len([k for k in client.objects if k.startswith("hot/")]) == outcomes["stored"]

    sim.spawn("cold", lambda: bucket.put("cold/0", b"y"), at=sim.now)
    sim.run_until(sim.now + 1.0)
    assert "cold/0" in client.objects  # its own prefix: untouched by the hot one

    big = _S3Client(Sim())
    big.objects = {f"p/{i:05d}": b"" for i in range(2_500)}
    pages = list(big.get_paginator("list_objects_v2").paginate(Bucket="b", Prefix="p/"))
    assert [len(page["Contents"]) for page in pages] == [1_000, 1_000, 500]


def test_real_publish_pull_ack_round_trip_in_virtual_time():
    world = build()
    engine = world.engine
    engine.queues.create("q", {"min_shards": 2})
    engine.groups.create("q", "g")
    got: dict[str, Any] = {}

    def producer() -> None:
        for _ in range(5):
            engine.publisher.publish("q", [OutgoingMessage(body=b"m" * 200) for _ in range(100)])

    def puller() -> None:
        world.sim.sleep(1.0)
        seen = 0
        while seen < 500:
            result = engine.consumer.pull("q", group="g", batch_size=100)
            engine.consumer.ack("q", [m.lease_id for m in result.messages])
            seen += len(result.messages)
        got["seen"], got["at"] = seen, world.sim.now

    world.sim.spawn("producer", producer)  # no patching: the engine's clock is the simulation's
    world.sim.spawn("puller", puller)
    world.sim.run_until(5.0)
    assert got["seen"] == 500
    assert 1.0 < got["at"] < 2.0  # ~10 pull+ack rounds of a few modelled milliseconds each


def test_a_send_throttled_on_one_shard_moves_to_another_open_shard():
    world = build()
    engine = world.engine
    queue = engine.queues.create("q", {"min_shards": 2})
    hot = keys.shard_pk(queue, 0)
    table = engine.backend.table_for(queue.shards[0]).name
    world.dynamo.tables[table][hot].tokens = 0.0  # shard 0's partition has no capacity left (time stands)
    shards = {
        engine.publisher.publish("q", [OutgoingMessage(body=b"m")]).shard for _ in range(20)
    }  # fmt: skip
    assert shards == {1}  # none failed, none stored on the throttled shard
    assert world.dynamo.stats.throttles[("UpdateItem", "HEAD")] > 0


def test_unprocessed_keys_wait_in_virtual_time(monkeypatch: pytest.MonkeyPatch):
    """The adapter's pause before unprocessed keys go again is the twin's: a wall-clock pause held the
    baton (every actor stood still) and let no capacity come back, so the retries failed again."""
    monkeypatch.setattr(dynamo_adapter.time, "sleep", lambda _s: pytest.fail("a wall-clock pause"))
    world = build()
    table = TwinTable("t", world.dynamo)
    for pk in ("cold", "hot"):
        table.put({"pk": pk, "sk": "s", "v": 1})
    world.dynamo.tables["t"]["hot"].tokens = -0.001  # refilled by the time the keys go again
    got: dict[str, Any] = {}

    def reader() -> None:
        got["found"], got["unread"] = dynamo_adapter.batch_get_available(
            {table: [("cold", "s"), ("hot", "s")]}
        )

    world.sim.spawn("reader", reader)
    world.sim.run_until(10.0)
    assert sorted(pk for _t, pk, _s in got["found"]) == ["cold", "hot"] and not got["unread"]


def test_a_world_draws_as_if_it_were_the_first_of_the_process():
    """A World's latencies are its own: SSM's and S3's models are module-level, and their shared stream
    once made the quick step's figures depend on the twin tests that ran before it (11.3 % throttled
    instead of 6.6 %)."""

    def timings() -> list[float]:
        random.seed(1)  # the engine's own choices (shards) use the global `random`
        world = build()
        world.engine.queues.create("q", {"min_shards": 2})  # writes the map to SSM
        took: list[float] = []

        def broker() -> None:  # a container's first send reads the map from SSM
            for i in range(3):
                t0 = world.sim.now
                world.container().publisher.publish("q", [OutgoingMessage(body=b"m")])
                world.engine.backend.bucket.put(f"k{i}", b"x")
                took.append(world.sim.now - t0)

        world.sim.spawn("broker", broker)
        world.sim.run_until(5.0)
        return took

    first = timings()
    assert len(first) == 3 and timings() == first


# --- the control plane at scale (issue 23): quick versions of the documented scenarios --------------


@pytest.fixture
def seeded() -> None:
    """The engine picks shards with the global `random`: a quick scenario is the same run every time."""
    random.seed(23)


def test_quick_step_is_absorbed_within_10_s_with_few_throttles_and_no_overshoot(seeded: None):
    from bench.twin.control import absorbed, shards_needed, throttled_share
    from bench.twin.scenarios import publish_load

    at = 10  # the documented run: sample 0.25, 60 s, step at 20 s (bench/twin/control.py)
    result = publish_load(lambda t: 1_000 if t < at else 100_000, 25, sample=0.25, first_rule_at=5.0)
    took = absorbed(result, at)
    assert took is not None and took <= 10
    # The 10 %: 6.6 % here, in any test order (the run is seeded and a World shares no state
    # with earlier ones: test_a_world_draws_as_if_it_were_the_first_of_the_process); full scale 7.7 %.
    assert throttled_share(result, slice(at, at + 10)) <= 0.10
    assert max(result["shards"]) <= 2 * shards_needed(100_000)
    assert result["wakes"] >= 1  # a throttled broker started the coordinator, no minute was waited


def test_quick_fleet_of_1200_containers_learns_every_map_change_without_ssm(seeded: None):
    from bench.twin import control

    result = control.measure("fleet", quick=True)
    warm = int(result["warm_s"])
    assert result["containers"] / result["sample"] >= 1_000
    assert len(set(result["shards"][warm:])) >= 3  # the map changed during the ramp
    ramp_reads = result["ssm_reads"][warm:]
    assert max(ramp_reads) <= 40 and sum(result["ssm_read_throttles"]) == 0
    assert control.mean(control.tail(result["delivered"])) >= 0.95 * 200_000


def test_quick_million_fills_256_shards_and_its_map_stays_one_standard_value(seeded: None):
    from bench.twin import control

    result = control.measure("million", quick=True)
    assert max(result["shards"]) == 256
    assert result["ssm_largest_value"] <= 4096 and result["map_bytes"] <= 4096
    assert control.mean(control.tail(result["delivered"])) >= 0.9 * 1_000_000


def _refused(call: Any) -> Any:
    try:
        call()
    except ClientError as exc:
        return ("error", exc.response["Error"]["Code"])
    return "ok"


def _limits(table: Table, client: Any, pk: str) -> list[Any]:
    """What DynamoDB refuses by its documented quotas, as error codes (and that nothing was written)."""
    out: list[Any] = []
    too_big = {"pk": pk, "sk": "big", "d": b"x" * (400 * 1024)}  # the item's names and keys put it over
    out.append(_refused(lambda: table.put(too_big)))
    table.put({"pk": pk, "sk": "small", "d": b"x"})
    out.append(_refused(lambda: table.update(pk, "small", "SET d = :d", values={":d": b"x" * (400 * 1024)})))
    out.append([table.get(pk, sk) is not None for sk in ("big", "small")])
    out.append(table.get(pk, "small")["d"] == b"x")  # the refused update changed nothing
    keys_ = [{"pk": {"S": pk}, "sk": {"S": f"k{i}"}} for i in range(101)]
    out.append(_refused(lambda: client.batch_get_item(RequestItems={table.name: {"Keys": keys_}})))
    puts = [{"PutRequest": {"Item": {"pk": {"S": pk}, "sk": {"S": f"w{i}"}}}} for i in range(26)]
    out.append(_refused(lambda: client.batch_write_item(RequestItems={table.name: puts})))
    out.append(table.get(pk, "w0") is None)
    return out


def test_documented_request_limits_are_refused_as_moto_refuses_them(moto_table: Table):
    pk = f"limits-{uuid.uuid4().hex[:8]}"
    on_moto = _limits(moto_table, aws_adapter.client("dynamodb"), pk)
    twin = TwinDynamo(Sim())
    on_twin = _limits(TwinTable("t", twin), twin, pk)
    assert on_twin == on_moto  # moto as the local runtime patches it (BatchWriteItem's 25: moto_patches)
    assert on_twin[0] == on_twin[1] == on_twin[4] == on_twin[5] == ("error", "ValidationException")
    assert on_twin[2] == [False, True] and on_twin[3] is True and on_twin[6] is True


def test_a_query_page_holds_what_fits_in_1_mb_as_on_moto_and_the_adapter_follows_the_pages(
    moto_table: Table,
):
    twin = TwinDynamo(Sim())
    twin.unlimited = True  # capacity is not the subject: 300 WCU a put
    pk = f"pages-{uuid.uuid4().hex[:8]}"
    body = b"x" * (300 * 1024)
    firsts = []
    for table, client in ((moto_table, aws_adapter.client("dynamodb")), (TwinTable("t", twin), twin)):
        for i in range(10):  # 3 MB in one partition
            table.put({"pk": pk, "sk": f"M#{i:02d}", "d": body})
        first = client.query(
            TableName=table.name,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": pk}},
            ConsistentRead=True,
        )
        firsts.append((first["Count"], first["LastEvaluatedKey"]["sk"]["S"]))
        assert [item["sk"] for item in table.query(pk)] == [f"M#{i:02d}" for i in range(10)]
    assert firsts[1] == firsts[0] == (3, "M#02")  # 3 x 300 KB fit in 1 MB, a 4th does not
    assert twin.stats.attempts[("Query", "Query")] == 5  # the first call, then pages of 3, 3, 3, 1
    big = TwinTable("u", twin)
    for i in range(60):  # 60 x 300 KB = 18 MB: past one BatchGetItem answer's 16 MB
        big.put({"pk": "p", "sk": f"M#{i:02d}", "d": body})
    answer = twin.batch_get_item(
        RequestItems={"u": {"Keys": [{"pk": {"S": "p"}, "sk": {"S": f"M#{i:02d}"}} for i in range(60)]}}
    )
    assert len(answer["Responses"]["u"]) == 54  # 54 x 300 KB ≤ 16 MB
    assert len(answer["UnprocessedKeys"]["u"]["Keys"]) == 6
    assert not twin.stats.throttles  # unprocessed for size, not throttled


def test_lambda_executions_past_the_account_quota_are_refused_and_the_rest_billed_by_the_ms():
    sim = Sim()
    lambdas = Executions(lambda: sim.now, sim.sleep, window=(1.0, 2.0), quota=2)
    done: list[str] = []
    refused: list[str] = []

    def call(name: str, function: str, seconds: float) -> None:
        try:
            with lambdas.run(function):
                sim.sleep(seconds)
        except errors.Throttled:
            refused.append(name)
            return
        done.append(name)

    for name, function, at, seconds in (
        ("early", "consumer", 0.5, 0.6),  # ends in the window: counted, all of it
        ("long-poll", "consumer", 1.2, 0.5),
        ("send", "broker", 1.3, 0.0104),
        ("third", "consumer", 1.305, 0.1),  # the long-poll and the send run: refused
        ("late", "consumer", 2.5, 0.1),  # after the window
    ):
        sim.spawn(name, partial(call, name, function, seconds), at=at)
    sim.run_until(3.0)
    assert refused == ["third"] and sorted(done) == ["early", "late", "long-poll", "send"]
    assert lambdas.refused == {"consumer": 1}
    assert lambdas.invocations == {"consumer": 2, "broker": 1}  # those that ended in the window
    gb = LAMBDA_MEMORY_MB / 1024
    assert lambdas.gb_seconds["consumer"] == pytest.approx(1.1 * gb)  # 0.6 + 0.5 s: a wait billed in full
    assert lambdas.gb_seconds["broker"] == pytest.approx(0.011 * gb)  # 10.4 ms billed as 11
    assert lambdas.peak == {"consumer": 1, "broker": 1} and lambdas.peak_total == 2


def test_api_gateway_answers_429_past_its_bucket_and_lambda_never_runs():
    """The account's 10,000 requests a second with a bucket of 5,000 (the scenarios' route throttle is
    set to the same): 5,000 at one moment pass, the next is refused, a tenth of a second refills 1,000."""
    sim = Sim()
    lambdas = Executions(lambda: sim.now, sim.sleep, quota=100_000)  # Lambda's own quotas far away
    assert (ACCOUNT_THROTTLE.rate, ACCOUNT_THROTTLE.burst) == (10_000, 5_000)

    def calls(count: int) -> int:
        passed = 0
        with contextlib.suppress(TooManyRequests):
            while passed < count:
                with lambdas.run(c.FN_CONSUMER):
                    passed += 1
        return passed

    assert calls(10_000) == 5_000
    assert lambdas.refused_by_gateway == {c.FN_CONSUMER: 1} and not lambdas.refused
    assert lambdas.invocations == {c.FN_CONSUMER: 5_000}  # the refused request invoked nothing
    sim.now = 0.1
    assert calls(10_000) == 1_000
    with lambdas.run(c.FN_COORDINATOR, via_api=False):  # an asynchronous invocation: no gateway
        pass
    raised = Gateway(lambda: 0.0, rps=40_000)  # a raised quota keeps AWS's 2:1 ratio of rate to burst
    for _ in range(20_000):
        raised.admit()
    with pytest.raises(TooManyRequests):
        raised.admit()


def test_lambda_refuses_past_ten_requests_a_second_per_unit_of_quota_and_past_its_scaling_rate():
    sim = Sim()
    lambdas = Executions(lambda: sim.now, sim.sleep, quota=10, gateway=Gateway(lambda: sim.now, scale=100))
    done = 0
    with contextlib.suppress(ExecutionRefused):
        while done < 1_000:
            with lambdas.run(c.FN_CONSUMER):  # each ends at once: concurrency 1
                done += 1
    assert done == 100  # 10 x a quota of 10, in one second's bucket
    assert lambdas.refused == {c.FN_CONSUMER: 1}

    sim = Sim()
    lambdas = Executions(
        lambda: sim.now, sim.sleep, quota=100_000, gateway=Gateway(lambda: sim.now, scale=100)
    )
    started: list[float] = []

    def call() -> None:
        with contextlib.suppress(ExecutionRefused), lambdas.run(c.FN_CONSUMER):
            started.append(sim.now)
            sim.sleep(10.0)  # held: each call needs an environment of its own

    for i in range(1_300):  # 1,100 at once, 200 a second later
        sim.spawn(f"c{i}", call, at=0.0 if i < 1_100 else 1.0)
    sim.run_until(2.0)
    assert started.count(0.0) == 1_000  # 1,000 new environments at once
    assert started.count(1.0) == 100  # then 100 a second: of the 200, 100 are refused
    assert lambdas.environments[c.FN_CONSUMER] == 1_100


def test_a_calls_handler_cpu_holds_its_execution_at_lambdas_share_of_a_vcpu():
    """A pull of 100 at the default 1,024 MB: 6.8 ms of one vCPU's CPU takes 1,769 / 1,024 times as
    long, inside the execution (billed, and a second call past a quota of one is refused meanwhile)."""
    sim = Sim()
    lambdas = Executions(lambda: sim.now, sim.sleep, quota=1)
    ended: list[float] = []
    refused: list[str] = []

    def pull() -> None:
        with lambdas.run("consumer"):
            lambdas.compute("pull", 100)
        ended.append(sim.now)

    def other() -> None:
        with contextlib.suppress(errors.Throttled), lambdas.run("consumer"):
            return
        refused.append("other")

    sim.spawn("pull", pull, at=0.0)
    sim.spawn("other", other, at=0.010)
    sim.run_until(1.0)
    assert LAMBDA_MEMORY_MB == 1024
    assert ended == [pytest.approx((2.1 + 0.047 * 100) / 1000 * 1769 / 1024)]  # ~11.7 ms
    assert refused == ["other"]
    assert lambdas.gb_seconds["consumer"] == pytest.approx(0.012)  # 11.7 ms billed as 12 at 1 GB
    assert handler_cpu_s("pull", 100, acks=100) > handler_cpu_s("pull", 100) > handler_cpu_s("pull", 10)


def test_a_function_given_its_own_memory_computes_and_is_billed_at_it():
    """The consumer at 256 MB (`-c consumer_memory_mb=256`): a pull's CPU takes 1,769 / 256 times one
    vCPU's, billed at a quarter of a GB; a send keeps the stack's default memory."""
    sim = Sim()
    lambdas = Executions(lambda: sim.now, sim.sleep, memory_mb={c.FN_CONSUMER: 256})
    ended: dict[str, float] = {}

    def call(function: str, operation: Operation) -> None:
        with lambdas.run(function):
            lambdas.compute(operation, 100)
        ended[operation] = sim.now

    sim.spawn("pull", partial(call, c.FN_CONSUMER, "pull"), at=0.0)
    sim.spawn("send", partial(call, c.FN_BROKER, "send"), at=0.0)
    sim.run_until(1.0)
    assert ended["pull"] == pytest.approx((2.1 + 0.047 * 100) / 1000 * 1769 / 256)  # ~47 ms
    assert ended["send"] == pytest.approx((1.26 + 0.031 * 100) / 1000 * 1769 / LAMBDA_MEMORY_MB)
    assert lambdas.gb_seconds[c.FN_CONSUMER] == pytest.approx(0.047 * 256 / 1024)  # 47 ms at 0.25 GB
    assert lambdas.gb_seconds[c.FN_BROKER] == pytest.approx(0.008 * LAMBDA_MEMORY_MB / 1024)


def _transactions(table: Table, client: Any, pk: str) -> list[Any]:
    """TransactWriteItems as the adapter's `update_together` sends it: all or none, and DynamoDB's
    documented refusals (one item twice; more than 100 items)."""
    from sluice.adapters.dynamo import ConditionFailed, Update

    bump = "SET v = v + :one"
    values = {":one": 1}
    table.put({"pk": pk, "sk": "a", "v": 1})
    table.put({"pk": pk, "sk": "b", "v": 1})
    out: list[Any] = []
    table.update_together(
        [Update(pk, "a", bump, "v = :one", None, values), Update(pk, "b", bump, None, None, values)]
    )
    out.append([table.get(pk, sk)["v"] for sk in ("a", "b")])
    try:  # a's condition fails: b is not written either
        table.update_together(
            [Update(pk, "b", bump, None, None, values), Update(pk, "a", bump, "v = :one", None, values)]
        )
    except ConditionFailed:
        out.append("condition failed")
    out.append([table.get(pk, sk)["v"] for sk in ("a", "b")])
    twice = [
        {
            "Update": {
                "TableName": table.name,
                "Key": {"pk": {"S": pk}, "sk": {"S": "a"}},
                "UpdateExpression": "SET w = :w",
                "ExpressionAttributeValues": {":w": {"N": "1"}},
            }
        }
    ] * 2
    out.append(_refused(lambda: client.transact_write_items(TransactItems=twice)))
    many = [
        {
            "Update": {
                "TableName": table.name,
                "Key": {"pk": {"S": pk}, "sk": {"S": f"m{i}"}},
                "UpdateExpression": "SET w = :w",
                "ExpressionAttributeValues": {":w": {"N": "1"}},
            }
        }
        for i in range(101)
    ]
    out.append(_refused(lambda: client.transact_write_items(TransactItems=many)))
    out.append(table.get(pk, "m0") is None)
    return out


def test_a_transaction_is_all_or_none_and_refused_as_moto_refuses_it(moto_table: Table):
    pk = f"tx-{uuid.uuid4().hex[:8]}"
    on_moto = _transactions(moto_table, aws_adapter.client("dynamodb"), pk)
    twin = TwinDynamo(Sim())
    before = twin.stats.wcu
    on_twin = _transactions(TwinTable("t", twin), twin, pk)
    assert on_twin == on_moto
    assert on_twin[:3] == [[2, 2], "condition failed", [2, 2]]
    assert on_twin[3] == on_twin[4] == ("error", "ValidationException") and on_twin[5] is True
    # Two puts (1 WCU each), then two transactions of two items at 2 WCU an item, cancelled or not.
    assert twin.stats.wcu - before == 2 + 4 + 4


def test_a_transaction_of_more_than_4_mb_of_items_is_refused_and_writes_nothing() -> None:
    """DynamoDB: "The aggregate size of the items in the transaction cannot exceed 4 MB" (moto takes it:
    this limit is the twin's alone). Ten items of 390 KB (3.8 MB) are written; eleven are refused."""
    twin = TwinDynamo(Sim())
    table = TwinTable("t", twin)

    def items(n: int, sk: str) -> list[dict[str, Any]]:
        return [
            {
                "Update": {
                    "TableName": table.name,
                    "Key": {"pk": {"S": "tx"}, "sk": {"S": f"{sk}{i}"}},
                    "UpdateExpression": "SET d = :d",
                    "ExpressionAttributeValues": {":d": {"B": b"x" * (390 * 1024)}},
                }
            }
            for i in range(n)
        ]

    assert _refused(lambda: twin.transact_write_items(TransactItems=items(10, "ten"))) == "ok"
    assert _refused(lambda: twin.transact_write_items(TransactItems=items(11, "eleven"))) == (
        "error",
        "ValidationException",
    )
    twin.unlimited = True  # the ten's 7,800 write units spent the partition's second: read past it
    assert table.get("tx", "ten9") is not None
    assert all(table.get("tx", f"eleven{i}") is None for i in range(11))


def test_eventually_consistent_reads_may_miss_a_write_of_the_last_second_and_consistent_ones_never():
    """A third of eventually consistent reads come from the copy the write did not wait for, as it stood
    at a moment of the last second: they may see an item's earlier version, or no item yet."""
    sim = Sim()
    twin = TwinDynamo(sim)
    twin.unlimited = True
    twin.stale_max_s = STALE_MAX_S
    key = {"pk": {"S": "p"}, "sk": {"S": "HEAD"}}
    new_key = {"pk": {"S": "p"}, "sk": {"S": "M#1"}}

    def reads(k: dict, consistent: bool, n: int = 600) -> Counter:
        seen: Counter = Counter()
        for _ in range(n):
            item = twin.get_item(TableName="t", Key=k, ConsistentRead=consistent).get("Item")
            seen[item["v"]["N"] if item else None] += 1
        return seen

    twin.create_table("t")
    twin.put_item(TableName="t", Item={**key, "v": {"N": "1"}})
    sim.now = 5.0
    twin.put_item(TableName="t", Item={**key, "v": {"N": "2"}})
    twin.put_item(TableName="t", Item={**new_key, "v": {"N": "9"}})
    sim.now = 5.1  # a lagging copy stands before both writes in 0.9 of its answers
    assert reads(key, True) == Counter({"2": 600}) and reads(new_key, True) == Counter({"9": 600})
    stale = reads(key, False)
    assert set(stale) == {"1", "2"} and 0.2 < stale["1"] / 600 < 0.4, stale
    missing = reads(new_key, False)
    assert set(missing) == {None, "9"} and 0.2 < missing[None] / 600 < 0.4, missing
    sim.now = 6.2  # past the window: every copy has both writes
    assert reads(key, False) == Counter({"2": 600}) and reads(new_key, False) == Counter({"9": 600})
    twin.stale_max_s = 0.0
    sim.now = 6.3
    twin.put_item(TableName="t", Item={**key, "v": {"N": "3"}})
    assert reads(key, False) == Counter({"3": 600})
