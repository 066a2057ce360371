"""Glue / EMR job: read a queue's S3 segments directly for an offset or time range (replay, backfill),
in parallel, without calling the API.

Runs on Glue 5 / EMR 7 (Spark 3.5), Glue 6 / EMR 8 (Spark 4.x) and locally:
    python glue_jobs/segment_reader.py --bucket sluice-prod-segments --queue orders \
        --start-time-ms 1700000000000 --end-time-ms 1700003600000 --output s3://lake/orders-replay/

Arguments (`--key value`):
  --bucket             the segment bucket (required)
  --queue              queue name (required)
  --output             Parquet output path (required unless called as a library)
  --incarnation        only this incarnation of the queue (8 hex) [all listed]
  --shards             comma-separated shard ids [all]
  --start-time-ms      keep records with timestamp_ms >= this [no bound]
  --end-time-ms        keep records with timestamp_ms < this [no bound]
  --starting-offsets   JSON {"<shard>": "<32-digit offset>" | seq}: from this record, inclusive [earliest]
  --ending-offsets     JSON {"<shard>": "<32-digit offset>" | seq}: up to this record, exclusive [latest]
  --endpoint-url       S3 endpoint (moto, MinIO) [AWS]
  --region             [from the environment]
  --max-tasks          at most this many read tasks [one per segment object]
  --mode               append [default] | overwrite
  --master             Spark master outside spark-submit/Glue [local[*]]

How: the driver lists `segments/<queue>/` (docs/design.md key scheme
`segments/<queue>/<incarnation>/<shard>/<first seq>-<last seq>.ndjson.gz`), keeps per shard the objects
that overlap the sequence range (a compacted segment wins over the level-0 segments it replaced; a
partial overlap is trimmed so each sequence is read once), skips objects written before the start time,
and runs one task per object: get, gunzip, decode NDJSON, filter by sequence and time. Output columns:
the pull consumer's (id, body, content_type, attributes, partition_key, timestamp_ms, attempts = null)
plus offset, shard, seq and the partition column ingest_date. Records past the last flushed segment
(the hot tail) are not in S3 yet: read them through the API (`spark.read.format("sluice")` on Spark 4).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from glue_jobs.arguments import ArgumentError, check, parse_args
from glue_jobs.common import (
    SEGMENT_COLUMNS,
    S3Config,
    SegmentTask,
    configure_logging,
    list_segments,
    plan_segment_tasks,
    read_segment,
    segment_row,
    spark_session,
)
from sluice import offsets
from sluice.segmentformat import NO_END

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReaderArgs:
    """The job's arguments (see the module docstring); `output` is needed only to run it as a job."""

    bucket: str
    queue: str
    output: str | None = None
    incarnation: str | None = None
    shards: tuple[int, ...] = ()
    start_time_ms: int | None = None
    end_time_ms: int | None = None
    starting_offsets: str | None = None
    ending_offsets: str | None = None
    endpoint_url: str | None = None
    region: str | None = None
    max_tasks: int = 0
    mode: str = "append"
    master: str | None = None
    job_name: str = "sluice-segment-reader"

    def __post_init__(self) -> None:
        check(bool(self.bucket) and bool(self.queue), "--bucket and --queue must not be empty")
        check(self.mode in ("append", "overwrite"), f"--mode must be append or overwrite, not {self.mode!r}")
        check(self.max_tasks >= 0, "--max-tasks must be 0 (one task per object) or more")
        self.ranges()  # refuse malformed offsets before anything runs

    def ranges(self) -> dict[int, tuple[int, int]]:
        """shard -> [lo, hi) sequences from the offset arguments (a shard named in neither: everything)."""
        start = _positions("--starting-offsets", self.starting_offsets)
        end = _positions("--ending-offsets", self.ending_offsets)
        return {s: (start.get(s, 0), end.get(s, NO_END)) for s in set(start) | set(end)}


def _positions(name: str, text: str | None) -> dict[int, int]:
    """JSON {"<shard>": "<32-digit offset>" | seq} -> shard -> seq."""
    if not text:
        return {}
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
        return {int(shard): offsets.sequence(position) for shard, position in doc.items()}
    except ValueError as exc:
        raise ArgumentError(f'{name}: expected {{"<shard>": <offset or seq>}}, got {text!r} ({exc})') from exc


def read(spark: Any, args: ReaderArgs) -> Any:
    """The records of the range as a DataFrame (SEGMENT_COLUMNS); nothing is read on the driver."""
    s3 = S3Config(args.bucket, args.endpoint_url, args.region)
    segments = list_segments(s3, args.queue, args.incarnation)
    if args.shards:
        segments = [seg for seg in segments if seg.shard in args.shards]
    tasks = plan_segment_tasks(segments, args.ranges(), args.start_time_ms, args.end_time_ms)
    LOG.info("%d segment objects listed, %d to read", len(segments), len(tasks))
    if not tasks:
        return spark.createDataFrame([], SEGMENT_COLUMNS)
    slices = min(len(tasks), args.max_tasks) if args.max_tasks else len(tasks)

    def read_partition(part: Any) -> Any:
        client = s3.client()
        for task in part:
            for rec in read_segment(s3, task, client):
                yield segment_row(rec)

    rdd = spark.sparkContext.parallelize(tasks, slices).mapPartitions(read_partition)
    return spark.createDataFrame(rdd, SEGMENT_COLUMNS)


def main(argv: list[str] | None = None) -> None:
    configure_logging()
    t0 = time.monotonic()
    try:
        args = parse_args(ReaderArgs, sys.argv[1:] if argv is None else argv)
        check(bool(args.output), "--output is required")
    except ArgumentError as exc:
        raise SystemExit(f"segment_reader: {exc}") from None
    spark, _glue = spark_session("sluice-segment-reader", args.master)
    frame = read(spark, args)
    frame.write.mode(args.mode).partitionBy("ingest_date").parquet(args.output)
    LOG.info("wrote the range to %s in %.1f s", args.output, time.monotonic() - t0)


__all__ = ["ReaderArgs", "SegmentTask", "main", "read"]

if __name__ == "__main__":
    main()
