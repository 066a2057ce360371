"""The segment format the engine writes and the Glue jobs read (sluice.segmentformat)."""

from __future__ import annotations

from dataclasses import dataclass

from sluice.segmentformat import (
    NO_END,
    Record,
    SegmentName,
    covering,
    decode_segment,
    encode_segment,
    read_ranges,
    read_records,
    segment_key,
)


def rec(seq: int, content_type: str = "json", body: bytes = b'{"a":1}') -> Record:
    return Record(shard=3, seq=seq, id=f"m{seq}", timestamp_ms=1_000 + seq, content_type=content_type,
                  body=body, partition_key="k" if seq % 2 else None, attributes={"n": str(seq)})  # fmt: skip


def test_a_key_names_its_segment_and_stray_keys_name_none():
    key = segment_key("orders", "0000beef", 3, 100, 199)
    assert key == "segments/orders/0000beef/3/0000000000000100-0000000000000199.ndjson.gz"
    assert SegmentName.parse(key) == SegmentName(key, "orders", "0000beef", 3, 100, 199)
    for stray in (key + ".tmp", "segments/orders/0000beef/3/100-199.ndjson.gz", "segments/orders/x.txt"):
        assert SegmentName.parse(stray) is None


def test_records_round_trip_through_gzip_ndjson_deterministically():
    records = [rec(5), rec(6, "bytes", b"\x00\xff"), rec(8, "text", "é".encode())]
    data = encode_segment(records)
    assert data == encode_segment(records) and data[:2] == b"\x1f\x8b"
    lines = list(decode_segment(data))
    assert [line["offset"] for line in lines] == [r.offset for r in records]
    assert [Record.from_json(line) for line in lines] == records
    assert [r.body_text() for r in records] == ['{"a":1}', "AP8=", "é"]


def test_read_records_keeps_the_sequence_and_time_range():
    data = encode_segment(rec(s) for s in range(10, 20))
    assert [r.seq for r in read_records(data, lo=12, hi=15)] == [12, 13, 14]
    assert [r.seq for r in read_records(data, start_ms=1_015, end_ms=1_017)] == [15, 16]
    assert [r.seq for r in read_records(data, lo=18)] == [18, 19]


@dataclass(frozen=True)
class Span:
    first: int
    last: int


def test_covering_prefers_the_compacted_segment_and_read_ranges_read_each_sequence_once():
    level0 = [Span(0, 99), Span(100, 199), Span(200, 299)]
    compacted = Span(0, 199)
    partial = Span(150, 260)  # a later compaction seen mid-swap: overlaps what is already chosen
    spans = [*level0, compacted, partial]
    assert covering(spans) == [compacted, partial, Span(200, 299)]
    assert covering(spans, 261) == [Span(200, 299)]
    assert read_ranges(spans) == [(compacted, 0, 200), (partial, 200, 261), (Span(200, 299), 261, 300)]
    assert read_ranges(spans, 120, 230) == [(compacted, 120, 200), (partial, 200, 230)]
    assert read_ranges(spans, 300, NO_END) == []


def test_compaction_is_bounded_by_the_uncompressed_size_not_the_compressed_one():
    """JSON bodies compress 3-30x and decoding holds ~1.4x the uncompressed text: four segments of 1 MB
    compressed holding 12 MB of text each are not merged (48 MB > MAX_SEGMENT_TEXT_BYTES), four of 8 MB
    are; an entry written before `text_bytes` was recorded counts LEGACY_TEXT_RATIO x its bytes."""
    from sluice.engine.shardwork import MAX_SEGMENT_TEXT_BYTES, _pick_run
    from sluice.segments import LEGACY_TEXT_RATIO, SegmentRef

    mb = 1024 * 1024

    def ref(i: int, text: int, compressed: int = mb) -> SegmentRef:
        return SegmentRef("q", "0", 0, 100 * i, 100 * i + 99, f"k{i}", 100, compressed, 0, 0, 0, None, text)

    assert 32 * mb == MAX_SEGMENT_TEXT_BYTES
    assert _pick_run([ref(i, 12 * mb) for i in range(4)]) == []
    big_then_small = [ref(0, 12 * mb), *(ref(i, 8 * mb) for i in range(1, 5))]
    assert [r.first for r in _pick_run(big_then_small)] == [100, 200, 300, 400]
    legacy = [ref(i, 0, compressed=mb) for i in range(4)]
    assert legacy[0].text_size == LEGACY_TEXT_RATIO * mb
    assert _pick_run(legacy) == []  # taken as 4 x 10 MB
    small_legacy = [ref(i, 0, compressed=mb // 2) for i in range(4)]
    assert _pick_run(small_legacy) == small_legacy  # taken as 4 x 5 MB


def test_the_readers_segment_cache_is_bounded_by_uncompressed_size(monkeypatch):
    """Decoded segments are kept while their uncompressed sizes fit _CACHED_TEXT_BYTES (the newest
    always): two of 12 MiB stay, a third of 20 MiB evicts the oldest; one read again is not decoded
    again."""
    from sluice.engine import streams
    from sluice.segments import SegmentRef

    mib = 1024 * 1024
    decoded: list[str] = []

    def read_segment(_backend, ref):
        decoded.append(ref.key)
        return [rec(ref.first)]

    monkeypatch.setattr(streams, "read_segment", read_segment)
    reader = streams.StreamReader(None, None, None)  # only _segment is used: no backend needed

    def ref(i: int, text: int) -> SegmentRef:
        return SegmentRef("q", "0", 0, 100 * i, 100 * i + 99, f"k{i}", 1, 1, 0, 0, 0, None, text)

    a, b, c = ref(0, 12 * mib), ref(1, 12 * mib), ref(2, 20 * mib)
    for r in (a, b, a):
        reader._segment(r)
    assert decoded == ["k0", "k1"]  # 24 MiB fit: the third read is the cache's
    reader._segment(c)  # 44 MiB: the least recently used (b) goes
    reader._segment(a)
    reader._segment(b)
    assert decoded == ["k0", "k1", "k2", "k1"]
    assert 32 * mib == streams._CACHED_TEXT_BYTES
