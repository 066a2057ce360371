"""A push worker's delivered batch is acked by its next pull (one state write for both), and the last
batch by an ack of its own when the worker stops: every message delivered once and acked."""

from __future__ import annotations

from typing import Any

from sluice.models import OutgoingMessage


def _push_consumer(engine: Any, api: Any, queue_name: str) -> str:
    """A queue with a push consumer of batches of 10 that never waits for a batch to fill."""
    engine.queues.create(queue_name)
    config = {
        "type": "webhook",
        "url": "https://example.com/hook",
        "max_batch_size": 10,
        "max_batch_timeout_ms": 0,
    }
    status, body = api("POST", f"/v1/queues/{queue_name}/consumers", config)
    assert status == 201, body
    return body["result"]["id"]


def test_delivered_batches_are_acked_by_the_next_pull_and_the_last_by_one_ack(engine, api, queue_name):
    consumer_id = _push_consumer(engine, api, queue_name)
    engine.publisher.publish(queue_name, [OutgoingMessage(body=f"{n}".encode()) for n in range(25)])
    delivered: list[list[str]] = []
    carried: list[list[str] | None] = []
    ack_calls: list[list[str]] = []
    pull, ack = engine.consumer.pull, engine.consumer.ack

    def pulled(*args: Any, **kwargs: Any) -> Any:
        carried.append(kwargs.get("acks"))
        return pull(*args, **kwargs)

    def acked(queue: str, lease_ids: list[str], *args: Any, **kwargs: Any) -> Any:
        ack_calls.append(list(lease_ids))
        return ack(queue, lease_ids, *args, **kwargs)

    engine.consumer.pull, engine.consumer.ack = pulled, acked
    report = engine.pusher.run(
        queue_name,
        consumer_id,
        0,
        lambda _consumer: lambda payload: delivered.append([m["id"] for m in payload["messages"]]),
        lambda: 60_000,
    )
    assert (report.batches, report.delivered, report.stopped) == (3, 25, "backlog empty")
    assert sorted(len(b) for b in delivered) == [5, 10, 10]
    assert [len(a) for a in carried if a] == [10, 10, 5]  # each batch rode on the pull after it
    assert ack_calls == []  # the last one on the pull that found the backlog empty
    engine.consumer.pull, engine.consumer.ack = pull, ack
    after = engine.consumer.pull(queue_name, group="default", batch_size=10)
    assert after.messages == [] and after.backlog_exact and after.message_backlog_count == 0


def test_a_worker_that_runs_out_of_time_acks_its_last_batch_itself(engine, api, queue_name):
    consumer_id = _push_consumer(engine, api, queue_name)
    engine.publisher.publish(queue_name, [OutgoingMessage(body=f"{n}".encode()) for n in range(25)])
    budget = iter([60_000, 0])  # one batch, then the invocation's time is up
    report = engine.pusher.run(
        queue_name, consumer_id, 0, lambda _c: lambda _p: None, lambda: next(budget, 0)
    )
    assert (report.batches, report.delivered, report.stopped) == (1, 10, "invocation time running out")
    rest = engine.consumer.pull(queue_name, group="default", batch_size=100, visibility_ms=60_000)
    assert len(rest.messages) == 15 and rest.message_backlog_count == 15  # the 10 delivered were acked
