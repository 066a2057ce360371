"""Payload-tier queues read by Spark: 64 KB messages sent in batches of 10 through `sluice local` (their
bodies in S3 payload objects), flushed and compacted by the shard worker, then read by the segment
reader (both Glue lines) and, on Spark 4, by the `sluice` data source over segments and the hot tail."""

from __future__ import annotations

import importlib.util
import os

import pytest

from glue_jobs import segment_reader
from sluice.engine import keys
from sluice.service import Sluice

BODY = 64 * 1024


def _text(n: int) -> str:
    return f"{n:06d}:" + os.urandom(BODY).hex()[: BODY - 7]


@pytest.fixture(scope="module")
def tier_queue(local):
    """100 messages of 64 KB in sends of 10, all in the payload tier; 80 flushed in four flushes and
    compacted into one level-1 segment, the last 20 in the hot tier unless the runtime's scheduled shard
    work (the coordinator's minute tick, flushing by age) flushed them before the reader runs."""
    name = local.new_queue(payload_tier="s3", max_shards=1)
    engine = Sluice.from_settings(local.runtime.settings)
    queue = engine.queues.get(name)
    sent: list[str] = []
    for flush in range(5):
        for _ in range(2):
            batch = [_text(len(sent) + i) for i in range(10)]
            local.client.send_batch(name, [{"body": b, "content_type": "text"} for b in batch])
            sent += batch
        if flush < 4:
            engine.shard_worker.flush(queue, queue.shards[0])
    assert engine.shard_worker.compact(queue, queue.shards[0]) is not None
    items = engine.backend.table_for(queue.shards[0]).query(
        keys.shard_pk(queue, 0), sk_from=keys.msg_sk(0), sk_to=keys.MSG_SK_END
    )
    assert all(keys.ITEM_PAYLOAD in item for item in items)
    return name, sent


def test_the_segment_reader_replays_tier_batches_after_flush_and_compaction(spark, local, tier_queue):
    name, sent = tier_queue
    settings = local.runtime.settings
    args = segment_reader.ReaderArgs(
        bucket=settings.segment_bucket, queue=name, endpoint_url=settings.aws_endpoint_url
    )
    rows = sorted(segment_reader.read(spark, args).collect(), key=lambda r: r.seq)
    # The four explicit flushes, plus the last 20 when a scheduled tick flushed them by age (it did in a
    # slow CI run): a contiguous prefix either way, none lost or repeated.
    assert len(rows) in (80, 100)
    assert [r.seq for r in rows] == list(range(len(rows)))
    assert [r.body for r in rows] == sent[: len(rows)]


@pytest.mark.skipif(
    importlib.util.find_spec("pyspark.sql.datasource") is None,
    reason="Spark 3.5 (Glue 5) has no Python data source API",
)
def test_the_data_source_reads_segments_and_the_tier_hot_tail(spark, local, tier_queue):
    from glue_jobs.sluice_source import register

    name, sent = tier_queue
    settings = local.runtime.settings
    register(spark)
    rows = (
        spark.read.format("sluice")
        .option("queue", name).option("bucket", settings.segment_bucket)
        .option("endpointUrl", settings.aws_endpoint_url)
        .option("url", local.url).option("token", local.token)
        .load().collect()
    )  # fmt: skip
    assert [r.body for r in sorted(rows, key=lambda r: r.seq)] == sent
