"""Stream reads over both tiers, the shard worker (flush, compaction, TTL, retention) and gap repair."""

from __future__ import annotations

import gzip
import json

import pytest

from sluice import errors, faults, offsets
from sluice.engine import keys
from sluice.engine.publish import Allocation
from sluice.engine.streams import Position, parse_position
from sluice.models import OutgoingMessage
from sluice.segments import decode_segment, list_segments

TOTAL = 10_000


def _msgs(start: int, count: int) -> list[OutgoingMessage]:
    return [OutgoingMessage(body=json.dumps({"n": i}).encode()) for i in range(start, start + count)]


def _read_all(engine, queue_name: str, limit: int) -> list[int]:
    queue = engine.directory.get(queue_name)
    out: list[int] = []
    position = parse_position("-")
    while True:
        page = engine.reader.read(queue_name, position, limit=limit, queue=queue)
        if not page.records:
            return out
        assert len(page.records) <= limit
        out += [json.loads(r.body)["n"] for r in page.records]
        position = parse_position(page.next_offset)


def _hot_items(engine, queue) -> list[dict]:
    shard = queue.shards[0]
    table = engine.backend.table_for(shard)
    return list(table.query(keys.shard_pk(queue, shard.id), sk_prefix=keys.MSG_SK_PREFIX))


@pytest.fixture(scope="module")
def private_clocked(aws):
    """The 10,000-record stream gets tables of its own: moto's Query scans the whole table, so these
    items must not slow every later test that uses the session tables."""
    from sluice.local.provision import provision
    from sluice.service import Sluice
    from tests.conftest import FakeClock

    clock = FakeClock()
    return Sluice.from_settings(provision(None, "streams10k"), clock=clock), clock


@pytest.fixture
def big_stream(private_clocked, queue_name):
    """10,000 records on a one-shard bottomless queue: 9,900 flushed in 4 flushes and compacted once,
    100 still only in the hot tier (each hot page costs 2 moto calls; the S3 part is cached).
    Returns (queue name, a time between records 4,999 and 5,000)."""
    clocked, clock = private_clocked
    clocked.queues.create(queue_name, {"bottomless": True})
    worker = clocked.shard_worker
    queue = clocked.queues.get(queue_name)
    shard = queue.shards[0]
    flushes = 0
    split_ms = None
    for start in range(0, TOTAL, 100):
        if start == 5000:
            clock.advance(5)
            split_ms = clock.now
        clocked.publisher.publish(queue_name, _msgs(start, 100))
        clock.advance(1)
        if start + 100 in (2500, 5000, 7500, 9900):
            assert worker.flush(queue, shard) > 0
            flushes += 1
    assert flushes == 4
    assert worker.compact(queue, shard) is not None
    return queue_name, split_ms


def test_ten_thousand_records_through_flushes_compaction_and_ttl(private_clocked, big_stream):
    """Every record once and in order from `-` at limits 1, 7 and 1000 across segments and the hot
    tier; a time prefix returns exactly what came after it; once the hot tier expired (forced), a
    reader with cold caches gets everything from S3. One test: the 10,000 records are built once."""
    queue_name, split_ms = big_stream
    clocked, clock = private_clocked
    queue = clocked.queues.get(queue_name)
    refs = list_segments(clocked.backend, queue, 0)
    assert [(r.first, r.last, r.level) for r in refs] == [(0, 9899, 1)]  # 4 level-0 flushes merged
    stored = clocked.backend.bucket_for(queue.shards[0]).get(refs[0].key)
    assert stored is not None and refs[0].text_bytes == len(gzip.decompress(stored))  # from the index
    for limit in (1000, 7, 1):
        assert _read_all(clocked, queue_name, limit) == list(range(TOTAL)), limit

    position = parse_position(f"{split_ms:016d}")
    got: list[int] = []
    while (page := clocked.reader.read(queue_name, position, limit=1000)).records:
        got += [json.loads(r.body)["n"] for r in page.records]
        position = parse_position(page.next_offset)
    assert got == list(range(5000, TOTAL))

    clocked.shard_worker.run("flush", queue_name)
    # Nothing unflushed ever carries a TTL on a bottomless queue; flushed items now do.
    assert all("exp" in item for item in _hot_items(clocked, queue))
    clock.advance(queue.settings.retention_seconds * 1000 + 1)
    report = clocked.shard_worker.run("sweep", queue_name)
    assert report.swept_items == TOTAL // 100
    assert _hot_items(clocked, queue) == []
    fresh = type(clocked)(clocked.backend)  # a reader with cold caches
    assert _read_all(fresh, queue_name, 1000) == list(range(TOTAL))


def test_unflushed_items_on_bottomless_queues_never_expire(clocked, clock, queue_name):
    clocked.queues.create(queue_name, {"bottomless": True})
    clocked.publisher.publish(queue_name, _msgs(0, 5))
    queue = clocked.queues.get(queue_name)
    clock.advance(10 * 86_400_000)
    clocked.shard_worker.run("sweep", queue_name)
    assert len(_hot_items(clocked, queue)) == 1
    assert _read_all(clocked, queue_name, 10) == list(range(5))


def test_retention_deletes_old_segments_of_ordinary_queues(clocked, clock, queue_name):
    clocked.queues.create(queue_name, {"retention_seconds": 60})
    clocked.publisher.publish(queue_name, _msgs(0, 3))
    clocked.shard_worker.run("flush", queue_name)
    clock.advance(30_000)
    clocked.publisher.publish(queue_name, _msgs(3, 3))
    clocked.shard_worker.run("flush", queue_name)
    queue = clocked.queues.get(queue_name)
    assert len(list_segments(clocked.backend, queue, 0)) == 2
    clock.advance(45_000)  # the first segment is 75 s old, the second 45 s
    report = clocked.shard_worker.run("all", queue_name)
    assert report.expired_segments == 1
    assert _read_all(clocked, queue_name, 10) == [3, 4, 5]


def test_a_dead_brokers_gap_is_sealed_readers_pass_it_and_the_late_write_fails(clocked, clock, queue_name):
    clocked.queues.create(queue_name, {"bottomless": True})
    clocked.publisher.publish(queue_name, _msgs(0, 3))
    with faults.armed(faults.PUBLISH_AFTER_ALLOCATE), pytest.raises(faults.InjectedCrash):
        clocked.publisher.publish(queue_name, _msgs(100, 2))  # allocated seqs 3-4, never written
    dead_ts = clock.now
    clocked.publisher.publish(queue_name, _msgs(3, 2))  # seqs 5-6
    # Young gap: the read stops before it, and so does the flusher.
    page = clocked.reader.read(queue_name, parse_position("-"), limit=10)
    assert [json.loads(r.body)["n"] for r in page.records] == [0, 1, 2]
    assert clocked.reader.read(queue_name, parse_position(page.next_offset), limit=10).records == []
    queue = clocked.queues.get(queue_name)
    clocked.shard_worker.flush(queue, queue.shards[0])
    clock.advance(15_000)
    page = clocked.reader.read(queue_name, parse_position(page.next_offset), limit=10)
    assert [json.loads(r.body)["n"] for r in page.records] == [3, 4]
    # The late write of the dead broker fails: its client gets an error, nothing it was told is lost.
    with pytest.raises(errors.WriteRaced):
        clocked.publisher._write(
            queue, queue.shards[0], Allocation(first_seq=3, timestamp_ms=dead_ts), _msgs(100, 2)
        )
    clocked.shard_worker.run("all", queue_name)
    assert _read_all(clocked, queue_name, 2) == [0, 1, 2, 3, 4]


def test_the_flusher_seals_an_old_tail_gap(clocked, clock, queue_name):
    clocked.queues.create(queue_name, {"bottomless": True})
    clocked.publisher.publish(queue_name, _msgs(0, 2))
    with faults.armed(faults.PUBLISH_AFTER_ALLOCATE), pytest.raises(faults.InjectedCrash):
        clocked.publisher.publish(queue_name, _msgs(2, 2))
    queue = clocked.queues.get(queue_name)
    assert clocked.shard_worker.flush(queue, queue.shards[0]) == 2  # stops at the young tail gap
    clock.advance(15_000)
    assert clocked.shard_worker.flush(queue, queue.shards[0]) == 2  # sealed and moved past it
    head = clocked.backend.table_for(queue.shards[0]).get(keys.shard_pk(queue, 0), keys.HEAD_SK)
    assert head["flushed"] == 4


def test_segment_objects_follow_the_contract(clocked, queue_name):
    clocked.queues.create(queue_name)
    clocked.publisher.publish(
        queue_name,
        [OutgoingMessage(body=b"hi", content_type="text", partition_key="k", attributes={"a": "b"})],
    )
    queue = clocked.queues.get(queue_name)
    clocked.shard_worker.run("flush", queue_name)
    (ref,) = list_segments(clocked.backend, queue, 0)
    assert ref.key == f"segments/{queue_name}/{queue.incarnation}/0/{0:016d}-{0:016d}.ndjson.gz"
    (line,) = decode_segment(clocked.backend.bucket.get(ref.key))
    assert line == {
        "offset": offsets.encode(line["timestamp_ms"], 0),
        "shard": 0,
        "seq": 0,
        "id": f"{queue.incarnation}0000{0:012x}",
        "timestamp_ms": line["timestamp_ms"],
        "content_type": "text",
        "body_b64": "aGk=",
        "partition_key": "k",
        "attributes": {"a": "b"},
    }
    item = clocked.backend.control.get(f"SEG#{queue_name}#{queue.incarnation}#0", f"{0:016d}")
    assert item["last"] == 0 and item["count"] == 1 and item["level"] == 0 and item["key"] == ref.key


def test_only_new_records_without_an_offset_and_cursors_over_shards(clocked, queue_name):
    clocked.queues.create(queue_name, {"min_shards": 3})
    clocked.publisher.publish(queue_name, _msgs(0, 2))
    start = clocked.reader.read(queue_name, Position(latest=True), limit=10)
    assert start.records == []
    for i in range(2, 12):
        clocked.publisher.publish(queue_name, _msgs(i, 1))
    got, position = [], parse_position(start.next_offset)
    while True:
        page = clocked.reader.read(queue_name, position, limit=3)
        if not page.records:
            break
        got += [json.loads(r.body)["n"] for r in page.records]
        position = parse_position(page.next_offset)
    assert sorted(got) == list(range(2, 12))
    with pytest.raises(errors.InvalidOffset):
        clocked.reader.read(queue_name, parse_position(offsets.encode(0, 1)), limit=3)


def test_a_crash_between_segment_upload_and_index_commit_loses_nothing(clocked, queue_name):
    clocked.queues.create(queue_name, {"bottomless": True})
    clocked.publisher.publish(queue_name, _msgs(0, 50))
    queue = clocked.queues.get(queue_name)
    shard = queue.shards[0]
    with faults.armed(faults.SEGMENT_AFTER_UPLOAD), pytest.raises(faults.InjectedCrash):
        clocked.shard_worker.flush(queue, shard)
    assert list_segments(clocked.backend, queue, 0) == []  # uploaded, never indexed: readers ignore it
    assert _read_all(clocked, queue_name, 7) == list(range(50))  # still served from the hot tier
    assert clocked.shard_worker.flush(queue, shard) > 0  # the next flush writes the same key again
    assert [(r.first, r.last) for r in list_segments(clocked.backend, queue, 0)] == [(0, 49)]
    assert _read_all(clocked, queue_name, 7) == list(range(50))


def test_a_flush_stops_at_its_text_bound_and_four_level_0_segments_still_merge(
    clocked, queue_name, monkeypatch
):
    """Scaled down 1,024x (32 KiB of text a segment, 8 KiB a flush): 40 bodies of 1,000 bytes (~1.5 KB
    of NDJSON each) are 8 segments, not one of 60 KB, and four of them merge under the compaction bound."""
    from sluice.engine import shardwork

    monkeypatch.setattr(shardwork, "MAX_SEGMENT_TEXT_BYTES", 32 * 1024)
    monkeypatch.setattr(shardwork, "FLUSH_MAX_TEXT_BYTES", 8 * 1024)
    clocked.queues.create(queue_name, {"bottomless": True})
    queue = clocked.queues.get(queue_name)
    shard = queue.shards[0]
    clocked.publisher.publish(queue_name, [OutgoingMessage(body=b"%04d" % n + b"b" * 996) for n in range(40)])
    report = shardwork.WorkReport()
    while clocked.shard_worker.flush(queue, shard, report):
        pass
    flushed = list_segments(clocked.backend, queue, 0)
    assert report.flushed_records == 40 and len(flushed) == report.segments_written == 8
    assert all(r.text_size <= 8 * 1024 for r in flushed), [r.text_size for r in flushed]
    assert clocked.shard_worker.compact(queue, shard) is not None  # 4 x <= 8 KiB fit 32 KiB
    read = clocked.reader.read(queue_name, parse_position("-"), limit=100, queue=queue).records
    assert [r.body[:4] for r in read] == [b"%04d" % n for n in range(40)]
