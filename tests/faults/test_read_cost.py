"""A pull reads no more batch items than the messages it may return could fill."""

from __future__ import annotations

from sluice.adapters.dynamo import Table
from sluice.models import OutgoingMessage


def test_pull_of_one_reads_one_item_not_eight(engine, queue_name, monkeypatch):
    engine.queues.create(queue_name)
    for i in range(10):
        engine.publisher.publish(queue_name, [OutgoingMessage(body=b'"' + b"x" * 10_000 + b'%d"' % i)])
    limits = []
    original = Table.query

    def spy(self, pk, **kwargs):
        limits.append(kwargs.get("limit"))
        return original(self, pk, **kwargs)

    monkeypatch.setattr(Table, "query", spy)
    got = []
    while batch := engine.consumer.pull(queue_name, group="default", batch_size=1).messages:
        got += batch
        engine.consumer.ack(queue_name, [d.lease_id for d in batch])
    assert len(got) == 10
    assert max(limits) == 1, limits
