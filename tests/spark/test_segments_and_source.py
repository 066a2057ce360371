"""segment_reader.py and the `sluice` data source over segment objects in moto S3 (server mode, so the
executors reach it) and a fake records API for the hot tail. The data source needs Spark 4 (Glue 6); the
segment reader runs on both Glue runtimes."""

from __future__ import annotations

import importlib.util
import json
import uuid

import pytest

from glue_jobs import segment_reader
from tests.spark.segdata import BASE_MS, FakeRecordsApi, put_segment, record

needs_data_source = pytest.mark.skipif(
    importlib.util.find_spec("pyspark.sql.datasource") is None,
    reason="Spark 3.5 (Glue 5) has no Python data source API",
)


@pytest.fixture(scope="module")
def s3(local):
    import boto3

    endpoint = local.runtime.settings.aws_endpoint_url
    return endpoint, local.runtime.settings.segment_bucket, boto3.client("s3", endpoint_url=endpoint)


@pytest.fixture
def seg_queue(s3):
    """Two shards: shard 0 has level-0 segments [0-99], [100-199] and the compacted [0-199] that replaced
    them (all three still listed), then [200-249] with a gap at 210; shard 1 has [0-149], [150-299]."""
    _endpoint, bucket, client = s3
    queue = f"seg-{uuid.uuid4().hex[:8]}"
    recs = {}
    put_segment(client, bucket, queue, 0, 0, 99)
    put_segment(client, bucket, queue, 0, 100, 199)
    for r in put_segment(client, bucket, queue, 0, 0, 199):
        recs[r["id"]] = r
    for r in put_segment(client, bucket, queue, 0, 200, 249, skip={210}):
        recs[r["id"]] = r
    for first, last in ((0, 149), (150, 299)):
        for r in put_segment(client, bucket, queue, 1, first, last):
            recs[r["id"]] = r
    return queue, recs


def test_segment_reader_time_range_returns_exactly_the_records_in_it(spark, s3, seg_queue, tmp_path):
    endpoint, bucket, _ = s3
    queue, recs = seg_queue
    start, end = BASE_MS + 1000, BASE_MS + 2200  # shard 0 seqs 100..219 (ts = base + 10*seq + shard)
    out = tmp_path / "replay"
    segment_reader.main(
        ["--bucket", bucket, "--queue", queue, "--endpoint-url", endpoint, "--output", str(out),
         "--start-time-ms", str(start), "--end-time-ms", str(end)]
    )  # fmt: skip
    rows = spark.read.parquet(str(out)).collect()
    expected = {i for i, r in recs.items() if start <= r["timestamp_ms"] < end}
    assert len(rows) == len(expected) == len({r.id for r in rows})  # each record once, despite compaction
    assert {r.id for r in rows} == expected
    one = next(r for r in rows if r.seq == 150 and r.shard == 0)
    assert json.loads(one.body) == {"shard": 0, "seq": 150} and one.attributes == {"seq": "150"}
    assert one.offset == record(0, 150)["offset"] and one.attempts is None


def test_segment_reader_offset_range_per_shard(spark, s3, seg_queue):
    endpoint, bucket, _ = s3
    queue, _ = seg_queue
    args = segment_reader.ReaderArgs(
        bucket=bucket, queue=queue, endpoint_url=endpoint, shards=(0,),
        starting_offsets=json.dumps({"0": record(0, 195)["offset"]}), ending_offsets='{"0": 215}',
    )  # fmt: skip
    seqs = sorted(r.seq for r in segment_reader.read(spark, args).collect())
    assert seqs == [s for s in range(195, 215) if s != 210]


@pytest.fixture
def source(spark):
    from glue_jobs.sluice_source import register

    register(spark)
    return spark


@pytest.fixture
def fake_api():
    api = FakeRecordsApi()
    yield api
    api.close()


@needs_data_source
def test_batch_read_reads_segments_from_s3_and_the_hot_tail_through_the_api(source, s3, seg_queue, fake_api):
    endpoint, bucket, _ = s3
    queue, recs = seg_queue
    # hot tier: shard 0 holds 240..279 (overlapping the flushed 240..249), shard 1 holds 300..309
    fake_api.hot = {0: [record(0, s) for s in range(240, 280)], 1: [record(1, s) for s in range(300, 310)]}
    reader = (
        source.read.format("sluice")
        .option("queue", queue).option("bucket", bucket).option("endpointUrl", endpoint)
        .option("url", fake_api.url).option("token", "t")
    )  # fmt: skip
    rows = reader.load().collect()
    expected = set(recs) | {r["id"] for recs_ in fake_api.hot.values() for r in recs_}
    assert len(rows) == len(expected) and {r.id for r in rows} == expected
    ranged = reader.option("startingOffsets", '{"0": 245, "1": 305}').option("endingOffsets", '{"0": 260}')
    got = sorted((r.shard, r.seq) for r in ranged.load().collect())
    assert got == [(0, s) for s in range(245, 260)] + [(1, s) for s in range(305, 310)]


@needs_data_source
def test_read_stream_available_now_twice_yields_each_record_exactly_once(source, s3, fake_api, tmp_path):
    endpoint, bucket, client = s3
    queue = f"stream-{uuid.uuid4().hex[:8]}"
    expected = [r["id"] for r in put_segment(client, bucket, queue, 0, 0, 99)]
    expected += [r["id"] for r in put_segment(client, bucket, queue, 1, 0, 49)]
    fake_api.hot = {0: [record(0, s) for s in range(100, 120)]}
    expected += [r["id"] for r in fake_api.hot[0]]
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def run_once() -> None:
        query = (
            source.readStream.format("sluice")
            .option("queue", queue).option("bucket", bucket).option("endpointUrl", endpoint)
            .option("url", fake_api.url).option("token", "t")
            .load()
            .writeStream.format("parquet").option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True).start(str(out))
        )  # fmt: skip
        query.awaitTermination(180)
        assert query.exception() is None

    run_once()
    first = [r.id for r in source.read.parquet(str(out)).select("id").collect()]
    assert sorted(first) == sorted(expected)
    # the stream grows: the hot records are flushed (with more), shard 1 gets a segment, a new hot tail
    more = [r["id"] for r in put_segment(client, bucket, queue, 0, 100, 149)][20:]
    more += [r["id"] for r in put_segment(client, bucket, queue, 1, 50, 79)]
    fake_api.hot = {0: [record(0, s) for s in range(140, 160)]}
    more += [r["id"] for r in fake_api.hot[0] if r["seq"] >= 150]
    run_once()
    ids = [r.id for r in source.read.parquet(str(out)).select("id").collect()]
    assert len(ids) == len(set(ids)) == len(expected) + len(more)
    assert set(ids) == set(expected) | set(more)
