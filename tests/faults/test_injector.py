"""The fault injector fails calls the way AWS does: before they apply (retried by botocore) or after."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from sluice import errors, faults
from sluice.faults import FaultInjector


@pytest.fixture
def raw_client(settings):
    """A client with a single attempt, so every injected fault surfaces."""
    return boto3.client("dynamodb", config=Config(retries={"max_attempts": 1, "mode": "standard"}))


def _put(client, table, sk):
    client.put_item(TableName=table, Item={"pk": {"S": "fault-test"}, "sk": {"S": sk}})


def _exists(client, table, sk):
    key = {"pk": {"S": "fault-test"}, "sk": {"S": sk}}
    return "Item" in client.get_item(TableName=table, Key=key, ConsistentRead=True)


@pytest.mark.parametrize(
    ("throttle_share", "code"), [(1.0, "ThrottlingException"), (0.0, "InternalServerError")]
)
def test_not_applied_fault_looks_like_aws_and_changes_nothing(settings, raw_client, throttle_share, code):
    table = settings.control_table
    injector = FaultInjector(1.0, applied_share=0.0, throttle_share=throttle_share, operations=["PutItem"])
    injector.attach(raw_client)
    try:
        with pytest.raises(ClientError) as caught:
            _put(raw_client, table, f"before-{code}")
    finally:
        injector.stop()
    assert caught.value.response["Error"]["Code"] == code
    assert not _exists(raw_client, table, f"before-{code}")
    assert injector.counts[("dynamodb", "PutItem", code)] >= 1


def test_applied_fault_changes_state_then_fails(settings, raw_client):
    injector = FaultInjector(1.0, applied_share=1.0, operations=["PutItem"])
    injector.attach(raw_client)
    try:
        with pytest.raises(ClientError) as caught:
            _put(raw_client, settings.control_table, "after")
    finally:
        injector.stop()
    assert caught.value.response["Error"]["Code"] == "InternalServerError"
    assert _exists(raw_client, settings.control_table, "after")


def test_engine_clients_retry_injected_faults(engine, queue_name):
    """At 30% not-applied faults the engine's retrying clients still complete every call."""
    engine.queues.create(queue_name)
    with FaultInjector(0.3, applied_share=0.0, throttle_share=0.0, seed=3) as injector:  # 5xx: short backoff
        for i in range(20):
            engine.publisher.publish(queue_name, [_msg(i)])
    assert injector.injected > 0
    bodies = []
    while pulled := engine.consumer.pull(queue_name, group="default", batch_size=100).messages:
        bodies += [d.body for d in pulled]
    assert sorted(bodies) == sorted(_msg(i).body for i in range(20))


def test_surfaced_faults_become_retryable_domain_errors(engine, queue_name):
    engine.queues.create(queue_name)
    engine.directory.get(queue_name)
    with (
        FaultInjector(1.0, applied_share=1.0, operations=["UpdateItem"]),
        pytest.raises(errors.DependencyUnavailable),
    ):
        engine.publisher.publish(queue_name, [_msg(0)])


def test_delay_only(settings, raw_client):
    injector = FaultInjector(0.0, delay_ms=20, delay_fraction=1.0)
    injector.attach(raw_client)
    try:
        _put(raw_client, settings.control_table, "delayed")
    finally:
        injector.stop()
    assert injector.counts[("dynamodb", "PutItem", "delay")] == 1
    assert injector.injected == 0


def test_stop_detaches(settings, raw_client):
    injector = FaultInjector(1.0, applied_share=0.0)
    injector.attach(raw_client)
    injector.stop()
    _put(raw_client, settings.control_table, "after-stop")


def test_hooks_a_client_got_while_the_injector_stopped_do_nothing(settings, raw_client):
    """A thread making a client while the injector stops can attach it after the detach loop: those
    hooks must not fail later calls (they failed a later test's S3 listing in a full run)."""
    injector = FaultInjector(1.0, applied_share=1.0)
    injector.attach(raw_client)
    injector.stop()
    injector.attach(raw_client)  # the late attach of the racing thread
    try:
        _put(raw_client, settings.control_table, "after-a-late-attach")
    finally:
        injector.detach(raw_client)
    assert _exists(raw_client, settings.control_table, "after-a-late-attach")
    assert injector.injected == 0


def test_crash_points_are_named_and_armed_one_at_a_time():
    assert len(set(faults.CRASH_POINTS)) == len(faults.CRASH_POINTS) == 7
    design = (Path(__file__).resolve().parents[2] / "docs" / "design.md").read_text()
    assert all(f"`{name}`" in design for name in faults.CRASH_POINTS)  # each in "Fault points"
    faults.crash_point(faults.SEGMENT_AFTER_UPLOAD)  # not armed: nothing happens
    with faults.armed(faults.SEGMENT_AFTER_UPLOAD), pytest.raises(faults.InjectedCrash):
        faults.crash_point(faults.SEGMENT_AFTER_UPLOAD)
    faults.crash_point(faults.SEGMENT_AFTER_UPLOAD)


def _msg(i):
    from sluice.models import OutgoingMessage

    return OutgoingMessage(body=f'{{"i":{i}}}'.encode())


def test_a_map_written_but_not_mirrored_is_repaired_and_brokers_still_publish(engine, queue_name):
    """Crash between the coordinator's map write and the SSM mirror: brokers keep publishing (a sealed
    head sends them to the control item) and the next coordinator pass repairs the mirror."""
    from sluice.engine import keys

    queue = engine.queues.create(queue_name)

    def add_and_seal(q):
        return q.model_copy(
            update={
                "shards": [
                    q.shards[0].model_copy(update={"state": "sealed"}),
                    q.shards[0].model_copy(update={"id": 1}),
                ],
                "next_shard_id": 2,
            }
        )

    with faults.armed(faults.COORDINATOR_AFTER_MAP_WRITE), pytest.raises(faults.InjectedCrash):
        engine.queues.modify(queue_name, add_and_seal, fence=1)
    table = engine.backend.table_for(queue.shards[0])
    table.update(keys.shard_pk(queue, 0), keys.HEAD_SK, "SET sealed = :t", values={":t": True})
    from sluice.models import OutgoingMessage

    assert engine.publisher.publish(queue_name, [OutgoingMessage(body=b"1")]).shard == 1
    current = engine.queues.get(queue_name)
    assert engine.queues.repair_mirror(current) is True
    assert engine.queues.repair_mirror(current) is False
