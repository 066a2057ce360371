"""Segments: sizes, compaction write amplification on 10,000 records, and read latency from the hot
tier vs S3 in the local runtime (moto server over HTTP, reads through the HTTP API and the real
consumer handler).

    python -m bench.segments            # prints the figures
    from bench.segments import measure  # returns them as a dict

Figures, not asserts: they depend on the machine.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from typing import Any

import urllib3

RECORDS = 10_000
BODY_BYTES = 200


def _body(i: int) -> bytes:
    head = json.dumps({"n": i, "pad": ""})
    return json.dumps({"n": i, "pad": "x" * (BODY_BYTES - len(head))}).encode()


class _Clock:
    def __init__(self) -> None:
        self.offset_ms = 0

    def __call__(self) -> int:
        return int(time.time() * 1000) + self.offset_ms


def _publish(engine: Any, queue: str, count: int = RECORDS, batch: int = 100) -> None:
    from sluice.models import OutgoingMessage

    for start in range(0, count, batch):
        engine.publisher.publish(queue, [OutgoingMessage(body=_body(i)) for i in range(start, start + batch)])


def _write_amplification(engine: Any, flush_every: int) -> dict[str, Any]:
    """Publish 10,000 records, flushing every `flush_every` records and compacting after each flush
    (as the timer does): bytes and records written by flushes + compactions over what remains."""
    from sluice.engine.shardwork import WorkReport
    from sluice.models import OutgoingMessage
    from sluice.segments import list_segments

    name = f"bench-wa-{uuid.uuid4().hex[:6]}"
    engine.queues.create(name, {"bottomless": True})
    queue = engine.queues.get(name)
    shard = queue.shards[0]
    report = WorkReport()
    for start in range(0, RECORDS, 100):
        engine.publisher.publish(name, [OutgoingMessage(body=_body(i)) for i in range(start, start + 100)])
        if (start + 100) % flush_every == 0:
            engine.shard_worker.flush(queue, shard, report)
            while engine.shard_worker.compact(queue, shard, report):
                pass
    final = list_segments(engine.backend, queue, 0)
    final_bytes = sum(r.bytes for r in final)
    return {
        "flush_every_records": flush_every,
        "flushes": report.segments_written,
        "compactions": report.compactions,
        "final_segments": [(r.first, r.last, r.level, r.bytes) for r in final],
        "final_bytes": final_bytes,
        "bytes_written": report.flushed_bytes + report.compacted_bytes,
        "write_amplification_bytes": round((report.flushed_bytes + report.compacted_bytes) / final_bytes, 2),
        "write_amplification_records": round(
            (report.flushed_records + report.compacted_records) / RECORDS, 2
        ),
    }


def _latencies(http: urllib3.PoolManager, url: str, headers: dict[str, str], pages: int) -> dict[str, Any]:
    offset, times, got = "-", [], 0  # times[0]: the first request (cold caches)
    for _ in range(pages):
        started = time.perf_counter()
        resp = http.request("GET", f"{url}&offset={offset}", headers=headers)
        times.append((time.perf_counter() - started) * 1000)
        result = json.loads(resp.data)["result"]
        got += len(result["records"])
        offset = result["next_offset"]
    first = times[0]
    times.sort()
    return {
        "first_ms": round(first, 1),
        "requests": len(times),
        "records": got,
        "p50_ms": round(statistics.median(times), 1),
        "p95_ms": round(times[int(len(times) * 0.95) - 1], 1),
        "mean_ms": round(statistics.fmean(times), 1),
    }


def _segment_fetch(engine: Any, queue: Any) -> list[dict[str, Any]]:
    """Uncached: S3 GET + gunzip + parse of one segment, by size (engine-level, over moto's HTTP)."""
    from sluice.segments import Record, list_segments, read_segment

    out = []
    for ref in list_segments(engine.backend, queue, 0):
        times = []
        for _ in range(5):
            started = time.perf_counter()
            records: list[Record] = list(read_segment(engine.backend, ref))
            times.append((time.perf_counter() - started) * 1000)
        out.append(
            {"records": len(records), "bytes": ref.bytes, "p50_ms": round(statistics.median(times), 1)}
        )
    return out


def codec_memory(records: int = 50_000) -> dict[str, Any]:
    """Python heap at its peak (tracemalloc) while a segment of `records` is decoded as a stream read
    does (every record kept), and while a compaction decodes and re-encodes it, with the decode's CPU
    time; projected to a segment of `MAX_SEGMENT_TEXT_BYTES` uncompressed (what a consumer's or shard
    function's memory must hold beside the runtime, and how long it reads one)."""
    import tracemalloc

    from sluice.engine.shardwork import MAX_SEGMENT_TEXT_BYTES
    from sluice.segmentformat import Record, encode_segment, read_records, text_size

    data = encode_segment(
        Record(shard=0, seq=i, id=uuid.uuid4().hex, timestamp_ms=i, content_type="json", body=_body(i))
        for i in range(records)
    )
    mb, text = len(data) / 1e6, text_size(data)
    started = time.process_time()
    list(read_records(data))
    read_cpu_s = time.process_time() - started
    tracemalloc.start()
    try:
        kept = list(read_records(data))
        read_peak = tracemalloc.get_traced_memory()[1] / 1e6
        del kept
        tracemalloc.reset_peak()
        encode_segment(list(read_records(data)))
        compact_peak = tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()
    at_max = MAX_SEGMENT_TEXT_BYTES / text
    return {
        "records": records,
        "object_mb": round(mb, 2),
        "text_mb": round(text / 1e6, 2),
        "read_peak_mb": round(read_peak, 1),
        "compact_peak_mb": round(compact_peak, 1),
        "max_text_mb": round(MAX_SEGMENT_TEXT_BYTES / 1e6, 1),
        "read_peak_at_max_mb": round(read_peak * at_max),
        "compact_peak_at_max_mb": round(compact_peak * at_max),
        "read_cpu_s_at_max": round(read_cpu_s * at_max, 1),
    }


def measure() -> dict[str, Any]:
    from sluice.local.runtime import LocalRuntime
    from sluice.segments import list_segments
    from sluice.service import Sluice

    token = "bench-" + uuid.uuid4().hex
    runtime = LocalRuntime(
        port=0, admin_token=token, run_schedules=False, ttl_sweep_seconds=None, concurrency={"consumer": 1}
    )
    runtime.start()
    try:
        clock = _Clock()
        engine = Sluice.from_settings(runtime.settings, clock=clock)
        out: dict[str, Any] = {"records": RECORDS, "body_bytes": BODY_BYTES}
        out["compaction"] = [_write_amplification(engine, n) for n in (1000, 100)]

        name = f"bench-read-{uuid.uuid4().hex[:6]}"
        engine.queues.create(name, {"bottomless": True})
        _publish(engine, name)
        http = urllib3.PoolManager()
        headers = {"Authorization": f"Bearer {token}"}
        url = f"{runtime.url}/v1/queues/{name}/records?limit=100"
        out["read_hot"] = _latencies(http, url, headers, RECORDS // 100)
        queue = engine.queues.get(name)
        engine.shard_worker.run("flush", name)
        while engine.shard_worker.compact(queue, queue.shards[0]):
            pass
        clock.offset_ms = (queue.settings.retention_seconds + 1) * 1000  # force the TTL
        swept = engine.shard_worker.run("sweep", name).swept_items
        out["hot_items_swept"] = swept
        out["read_s3_first_pass"] = _latencies(http, url, headers, RECORDS // 100)  # fetch + decode
        out["read_s3_cached"] = _latencies(http, url, headers, RECORDS // 100)  # segment cache warm
        out["read_segments"] = [
            (r.first, r.last, r.level, r.bytes) for r in list_segments(engine.backend, queue, 0)
        ]
        out["segment_fetch"] = _segment_fetch(engine, queue)
        out["codec_memory"] = codec_memory()
        return out
    finally:
        runtime.stop()


def main() -> None:
    figures = measure()
    print(f"{figures['records']} records of {figures['body_bytes']} B bodies")
    for wa in figures["compaction"]:
        print(
            f"flush every {wa['flush_every_records']} records: {wa['flushes']} flushes, "
            f"{wa['compactions']} compactions, final segments (first, last, level, bytes) "
            f"{wa['final_segments']}; {wa['final_bytes']} B stored, {wa['bytes_written']} B written: "
            f"write amplification {wa['write_amplification_bytes']}x by bytes, "
            f"{wa['write_amplification_records']}x by records"
        )
    print(f"segments read in the latency test: {figures['read_segments']}")
    mem = figures["codec_memory"]
    print(
        f"codec heap peak, {mem['records']} records ({mem['object_mb']} MB object, {mem['text_mb']} MB "
        f"uncompressed): read {mem['read_peak_mb']} MB, compaction {mem['compact_peak_mb']} MB; at "
        f"MAX_SEGMENT_TEXT_BYTES ({mem['max_text_mb']} MB): read ~{mem['read_peak_at_max_mb']} MB in "
        f"~{mem['read_cpu_s_at_max']} s of CPU, compaction ~{mem['compact_peak_at_max_mb']} MB"
    )
    for seg in figures["segment_fetch"]:
        print(
            f"uncached segment fetch ({seg['records']} records, {seg['bytes']} B): "
            f"S3 GET + gunzip + parse p50 {seg['p50_ms']} ms"
        )
    for key in ("read_hot", "read_s3_first_pass", "read_s3_cached"):
        r = figures[key]
        print(
            f"{key}: {r['requests']} GET /records?limit=100 ({r['records']} records): "
            f"first {r['first_ms']} ms, p50 {r['p50_ms']} ms, p95 {r['p95_ms']} ms, mean {r['mean_ms']} ms"
        )


if __name__ == "__main__":
    main()
