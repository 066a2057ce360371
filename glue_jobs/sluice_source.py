"""`sluice` — a Spark 4 Python data source (Glue 6, EMR 8; not Glue 5 / EMR 7: Spark 3.5 has no Python
data source API, use glue_jobs/segment_reader.py there).

    from glue_jobs.sluice_source import SluiceDataSource
    spark.dataSource.register(SluiceDataSource)

    # batch: an offset or time range; flushed segments straight from S3, the hot tail through the API
    df = (spark.read.format("sluice").option("queue", "orders").option("bucket", "sluice-prod-segments")
          .option("url", "https://api...").option("token", T)
          .option("startTimestamp", "1700000000000").option("endTimestamp", "1700003600000").load())

    # stream: per-shard sequence offsets {"<shard>": <next seq>} in the checkpoint
    q = (spark.readStream.format("sluice").option("queue", "orders").option("bucket", ...)
         .load().writeStream.format("parquet").option("checkpointLocation", ck)
         .trigger(availableNow=True).start(out))

Options (case-insensitive):
  queue (required); bucket, endpointUrl, region: the segment bucket (S3); incarnation [the newest listed]
  url + token | tokenSecretArn | auth=iam: the API, for the hot tail past the last flushed segment
  tail: api [when url is given] | none
  startingOffsets: earliest [default] | latest (stream) | JSON {"<shard>": seq or 32-digit offset}, inclusive
  endingOffsets (batch): latest [default] | JSON {"<shard>": seq or offset}, exclusive
  startTimestamp / endTimestamp (batch): keep timestamp_ms in [start, end)

Offsets are replayable (a range of sequences reads the same records every time: segments are immutable,
compaction keeps their contents), so a micro-batch re-run after a failure reads exactly what it read
before: with an idempotent or transactional sink (the file sink, Delta, Iceberg) the stream is
exactly-once. The source never acks anything. Spark calls `commit(end)` for a batch only when it plans
the next one (the last batch of an `availableNow` run is committed at the next run), so anything done
in `commit` lags one batch; nothing here depends on it.

The hot tail uses the records API (docs: "Stream reads"): `GET /v1/queues/{q}/shards` for per-shard
heads and `GET /v1/queues/{q}/records?shard=&offset=&limit=` (records strictly after `offset`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition

from glue_jobs.common import (
    SEGMENT_COLUMNS,
    ApiConfig,
    S3Config,
    SegmentObject,
    SegmentTask,
    body_text,
    ingest_date,
    list_segments,
    plan_segment_tasks,
    read_segment,
    resolve_token,
    segment_row,
)
from sluice import offsets

TAIL_PAGE = 1000


@dataclass(frozen=True)
class SegmentPartition(InputPartition):
    tasks: tuple[SegmentTask, ...]


@dataclass(frozen=True)
class TailPartition(InputPartition):
    """Sequences [lo, hi) of one shard through the records API."""

    shard: int
    lo: int
    hi: int
    start_ms: int | None = None
    end_ms: int | None = None


class _Source:
    """Options parsed once on the driver; shipped (pickled) to the executors with the reader."""

    def __init__(self, options: dict[str, str]) -> None:
        opts = {k.lower(): v for k, v in options.items()}
        self.queue = opts.get("queue") or ""
        if not self.queue:
            raise ValueError("the sluice data source needs option('queue', <name>)")
        bucket = opts.get("bucket")
        self.s3 = S3Config(bucket, opts.get("endpointurl"), opts.get("region")) if bucket else None
        self.incarnation = opts.get("incarnation")
        url = opts.get("url")
        tail = opts.get("tail", "api" if url else "none")
        self.api: ApiConfig | None = None
        if tail == "api":
            if not url:
                raise ValueError("option tail=api needs option('url', <API base URL>)")
            token = resolve_token(opts.get("token"), opts.get("tokensecretarn"), opts.get("region"))
            self.api = ApiConfig(url, token, opts.get("auth", "token"), opts.get("region"))
        if self.s3 is None and self.api is None:
            raise ValueError("give option('bucket', ...) for segments and/or option('url', ...) for the API")
        self.starting = opts.get("startingoffsets", "earliest")
        self.ending = opts.get("endingoffsets", "latest")
        self.start_ms = int(opts["starttimestamp"]) if opts.get("starttimestamp") else None
        self.end_ms = int(opts["endtimestamp"]) if opts.get("endtimestamp") else None

    # --- planning (driver) ----------------------------------------------------------------------------

    def segments(self) -> list[SegmentObject]:
        if self.s3 is None:
            return []
        found = list_segments(self.s3, self.queue, self.incarnation)
        if not self.incarnation and found:
            newest = max(found, key=lambda s: s.last_modified_ms).incarnation
            found = [s for s in found if s.incarnation == newest]
        return found

    def heads(self, segments: list[SegmentObject]) -> dict[int, int]:
        """shard -> next sequence (one past the last record that exists now)."""
        heads: dict[int, int] = {}
        for seg in segments:
            heads[seg.shard] = max(heads.get(seg.shard, 0), seg.last + 1)
        if self.api is not None:
            for shard, nxt in self._api_heads(self.api).items():
                heads[shard] = max(heads.get(shard, 0), nxt)
        return heads

    def _api_heads(self, api: ApiConfig) -> dict[int, int]:
        client = api.client()
        try:
            result = client.request("GET", f"/v1/queues/{self.queue}/shards")
        finally:
            client.close()
        shards = result.get("shards", result) if isinstance(result, dict) else result
        heads = {}
        for item in shards:
            shard = int(item.get("shard", item.get("id", 0)))
            if "next_seq" in item:
                heads[shard] = int(item["next_seq"])
            elif item.get("next_offset"):
                heads[shard] = offsets.sequence(item["next_offset"])
            elif item.get("last_offset"):
                heads[shard] = offsets.sequence(item["last_offset"]) + 1
        return heads

    def plan(
        self, segments: list[SegmentObject], ranges: dict[int, tuple[int, int]], max_tasks_per_part: int = 1
    ) -> list[InputPartition]:
        """Segment tasks for what S3 holds, a tail partition per shard for the rest of its range."""
        tasks = plan_segment_tasks(segments, ranges, self.start_ms, self.end_ms)
        parts: list[InputPartition] = [
            SegmentPartition(tuple(tasks[i : i + max_tasks_per_part]))
            for i in range(0, len(tasks), max_tasks_per_part)
        ]
        flushed: dict[int, int] = {}
        for seg in segments:
            flushed[seg.shard] = max(flushed.get(seg.shard, -1), seg.last)
        if self.api is not None:
            for shard, (lo, hi) in sorted(ranges.items()):
                tail_lo = max(lo, flushed.get(shard, -1) + 1)
                if tail_lo < hi:
                    parts.append(TailPartition(shard, tail_lo, hi, self.start_ms, self.end_ms))
        return parts

    # --- reading (executors) ----------------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        if isinstance(partition, SegmentPartition):
            if self.s3 is None or not partition.tasks:
                return  # the placeholder partition of a read that planned nothing (maybe without a bucket)
            client = self.s3.client()
            for task in partition.tasks:
                for rec in read_segment(self.s3, task, client):
                    yield segment_row(rec)
        elif isinstance(partition, TailPartition) and self.api is not None:
            yield from self._read_tail(self.api, partition)

    def _read_tail(self, api: ApiConfig, part: TailPartition) -> Iterator[tuple[Any, ...]]:
        client = api.client()
        # Records strictly after `offset`: the offset just before `lo` (its time part is unknown here, so
        # a 0 prefix; records before `lo` that come back are skipped).
        offset = offsets.BEGINNING if part.lo == 0 else offsets.encode(0, part.lo - 1)
        try:
            while True:
                result = client.request(
                    "GET",
                    f"/v1/queues/{self.queue}/records",
                    query={"shard": part.shard, "offset": offset, "limit": TAIL_PAGE},
                )
                records = result.get("records") or []
                for rec in records:
                    seq = offsets.sequence(rec["offset"])
                    if seq >= part.hi:
                        return
                    ts = rec["timestamp_ms"]
                    if seq < part.lo or (part.start_ms is not None and ts < part.start_ms):
                        continue
                    if part.end_ms is not None and ts >= part.end_ms:
                        continue
                    yield _tail_row(rec, part.shard, seq)
                nxt = result.get("next_offset")
                if not records or not nxt or nxt == offset:
                    return
                offset = nxt
        finally:
            client.close()


def _tail_row(rec: dict[str, Any], shard: int, seq: int) -> tuple[Any, ...]:
    content_type = rec.get("content_type", "json")
    return (
        rec["id"],
        body_text(rec["body"], content_type),
        content_type,
        rec.get("attributes") or {},
        rec.get("partition_key"),
        rec["timestamp_ms"],
        None,
        rec["offset"],
        shard,
        seq,
        ingest_date(rec["timestamp_ms"]),
    )


def _offsets_arg(value: str, heads: dict[int, int], default: int | None) -> dict[int, int]:
    """earliest / latest / JSON per shard → shard -> seq."""
    if value in ("", "earliest"):
        return {s: 0 for s in heads} if default is None else {s: default for s in heads}
    if value == "latest":
        return dict(heads)
    return {int(k): offsets.sequence(v) for k, v in json.loads(value).items()}


class SluiceBatchReader(DataSourceReader):
    def __init__(self, source: _Source) -> None:
        self.source = source
        segments = source.segments()
        heads = source.heads(segments)
        start = _offsets_arg(source.starting, heads, 0)
        end = dict(heads) if source.ending == "latest" else _offsets_arg(source.ending, heads, None)
        ranges = {s: (start.get(s, 0), end.get(s, heads.get(s, 0))) for s in set(heads) | set(end)}
        self._partitions = source.plan(segments, ranges)

    def partitions(self) -> list[InputPartition]:
        return self._partitions or [SegmentPartition(())]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        yield from self.source.read(partition)


class SluiceStreamReader(DataSourceStreamReader):
    """Offsets: {"<shard>": next sequence to read}. Each micro-batch reads [start, end) per shard."""

    def __init__(self, source: _Source) -> None:
        self.source = source

    def initialOffset(self) -> dict:
        heads = self.source.heads(self.source.segments())
        if self.source.starting == "latest":
            return {str(s): n for s, n in heads.items()}
        return {str(s): n for s, n in _offsets_arg(self.source.starting, heads, 0).items()}

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        """Spark 4.0/4.1 call this with no arguments, 4.2 with (start, read limit): accept both."""
        heads = self.source.heads(self.source.segments())
        latest = {str(s): n for s, n in heads.items()}
        if start:
            latest = {s: max(n, int(start.get(s, 0))) for s, n in latest.items()}
        return latest

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        ranges = {
            int(s): (int(start.get(s, 0)), int(n)) for s, n in end.items() if int(n) > int(start.get(s, 0))
        }
        if not ranges:
            return []
        segments = [seg for seg in self.source.segments() if seg.shard in ranges]
        return self.source.plan(segments, ranges)

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        yield from self.source.read(partition)

    def commit(self, end: dict) -> None:
        """Nothing to release: the source holds no leases (see the module docstring on timing)."""


class SluiceDataSource(DataSource):
    """spark.read.format("sluice") / spark.readStream.format("sluice")."""

    @classmethod
    def name(cls) -> str:
        return "sluice"

    def schema(self) -> str:
        return SEGMENT_COLUMNS

    def reader(self, schema: Any) -> DataSourceReader:
        return SluiceBatchReader(_Source(dict(self.options)))

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return SluiceStreamReader(_Source(dict(self.options)))


def register(spark: Any) -> None:
    spark.dataSource.register(SluiceDataSource)
