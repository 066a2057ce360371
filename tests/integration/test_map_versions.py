"""Containers learn of map changes from the HEAD items, not by polling SSM (docs/design.md "Map versions
on HEAD items"): a broker or a puller that holds an older map adopts new shards from the stamp the change
left on the HEADs; a settings change makes it read the document once; in steady traffic nothing reads
SSM; a broker whose shards throttle wakes the coordinator, once for the whole fleet."""

from __future__ import annotations

from typing import Any

import pytest

from sluice import errors
from sluice.engine import keys
from sluice.engine.coordinator import Coordinator, CoordinatorConfig
from sluice.engine.scaling import ScalingPolicy
from sluice.models import OutgoingMessage
from sluice.service import Sluice
from tests.integration.test_coordinator import RecordingInvoker, head, send


class CountingMirror:
    """An SSM reader that counts (a container's directory reads through it)."""

    def __init__(self, engine: Sluice) -> None:
        self.engine = engine
        self.reads = 0

    def __call__(self, name: str) -> str | None:
        self.reads += 1
        return self.engine.backend.mirror.read(name)


def container(engine: Sluice) -> tuple[Sluice, CountingMirror]:
    """Another Lambda container over the same tables: its own document cache."""
    mirror = CountingMirror(engine)
    return Sluice(engine.backend, read_mirror=mirror), mirror


def grow(engine: Sluice, queue_name: str, clock: Any) -> list[int]:
    """The coordinator adds shards (its map change stamps this region's HEADs)."""
    config = CoordinatorConfig(
        policy=ScalingPolicy(shard_wcu_ceiling=10.0),
        ownership_sk=f"LEASE-{queue_name}",
        queues=[queue_name],
    )
    coord = Coordinator(engine.backend, engine.queues, None, config)
    coord.run_once()
    send(engine, queue_name, 30)
    clock.advance(1_000)
    return coord.run_once().queues[0].added


def test_a_broker_adopts_new_shards_from_the_head_without_reading_ssm(clocked, clock, queue_name):
    clocked.queues.create(queue_name, {"max_shards": 8})
    broker, mirror = container(clocked)
    broker.publisher.publish(queue_name, [OutgoingMessage(body=b'"first"')])
    assert mirror.reads == 1  # a cold container reads the document once
    added = grow(clocked, queue_name, clock)
    assert added
    assert head(clocked, clocked.queues.get(queue_name), 0)[keys.HEAD_MAP_VERSION] > 1
    shards = {broker.publisher.publish(queue_name, [OutgoingMessage(body=b'"x"')]).shard for _ in range(40)}
    assert mirror.reads == 1  # the stamp on HEAD 0 carried the new shards
    assert shards & set(added)  # and the sends spread onto them
    assert [s.id for s in broker.directory.get(queue_name).open_shards] == [0, *added]


def test_in_steady_traffic_no_container_reads_ssm(clocked, queue_name):
    clocked.queues.create(queue_name, {"min_shards": 4})
    clocked.groups.create(queue_name, "g")
    broker, broker_mirror = container(clocked)
    puller, puller_mirror = container(clocked)
    for _ in range(30):
        broker.publisher.publish(queue_name, [OutgoingMessage(body=b'"m"') for _ in range(5)])
        got = puller.consumer.pull(queue_name, group="g", batch_size=10)
        puller.consumer.ack(queue_name, [m.lease_id for m in got.messages])
    assert (broker_mirror.reads, puller_mirror.reads) == (1, 1)


def test_a_settings_change_reaches_another_container_at_its_next_send(clocked, queue_name):
    clocked.queues.create(queue_name, {"max_message_bytes": 100})
    broker, mirror = container(clocked)
    big = [OutgoingMessage(body=b'"' + b"x" * 150 + b'"')]
    with pytest.raises(errors.MessageTooLarge):
        broker.publisher.publish(queue_name, big)
    clocked.queues.update_settings(queue_name, {"max_message_bytes": 1000})  # another container's change
    broker.publisher.publish(queue_name, [OutgoingMessage(body=b'"small"')])  # sees the stamp
    assert mirror.reads == 2  # the digest changed: the document is read once
    broker.publisher.publish(queue_name, big)


def test_a_puller_reads_new_shards_after_seeing_a_stamp(clocked, clock, queue_name):
    clocked.queues.create(queue_name, {"max_shards": 8})
    clocked.groups.create(queue_name, "g")
    puller, mirror = container(clocked)
    assert puller.consumer.pull(queue_name, group="g", batch_size=10).messages == []
    added = grow(clocked, queue_name, clock)  # sends 300 messages, on shard 0
    sent = send(clocked, queue_name, 20, tag="after")  # spread over the new shards too
    assert {m for s in added for m in sent if int(m[8:12], 16) == s}  # some landed on a new shard
    got: set[str] = set()
    for _ in range(100):
        batch = puller.consumer.pull(queue_name, group="g", batch_size=100)
        puller.consumer.ack(queue_name, [m.lease_id for m in batch.messages])
        got |= {m.id for m in batch.messages}
        if set(sent) <= got:
            break
    assert set(sent) <= got
    assert mirror.reads == 1


def test_throttled_shards_wake_the_coordinator_once_for_the_whole_fleet(
    clocked, queue_name, monkeypatch, settings
):
    clocked.queues.create(queue_name)
    invoker = RecordingInvoker()
    woken = settings.model_copy(update={"coordinator_function": "coordinator"})
    brokers = []
    for _ in range(3):
        backend = clocked.backend.__class__(**{**clocked.backend.__dict__, "settings": woken})
        brokers.append(Sluice(backend, invoker=invoker))
    table = clocked.backend.table_for(clocked.queues.get(queue_name).shards[0])

    def throttled(*_args: Any, **_kwargs: Any) -> Any:
        raise errors.Throttled("DynamoDB is throttled; retry after a short pause")

    monkeypatch.setattr(table, "update", throttled)  # the shard table only: the wake item is writable
    for broker in brokers:
        for _ in range(3):
            with pytest.raises(errors.Throttled):
                broker.publisher.publish(queue_name, [OutgoingMessage(body=b'"x"')])
    assert [(fn, event["woken_by"]) for fn, event in invoker.calls] == [("coordinator", queue_name)]


def test_a_pause_reaches_a_puller_at_its_next_pull(clocked, queue_name):
    clocked.queues.create(queue_name)
    clocked.groups.create(queue_name, "g")
    send(clocked, queue_name, 2)
    puller, mirror = container(clocked)
    assert puller.consumer.pull(queue_name, group="g", batch_size=1).messages  # the puller caches it
    clocked.queues.set_paused(queue_name, True)  # another container's change
    with pytest.raises(errors.QueuePaused):  # at once: the HEAD's stamp says so (its cache did not)
        puller.consumer.pull(queue_name, group="g", batch_size=10)
    with pytest.raises(errors.QueuePaused):
        puller.consumer.pull(queue_name, group="g", batch_size=10)
    clocked.queues.set_paused(queue_name, False)
    assert puller.consumer.pull(queue_name, group="g", batch_size=10).messages
    assert mirror.reads == 3  # the first read, then once for the pause and once for the resume
