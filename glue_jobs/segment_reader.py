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
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from glue_jobs.common import (
    SEGMENT_COLUMNS,
    S3Config,
    SegmentTask,
    configure_logging,
    list_segments,
    parse_args,
    plan_segment_tasks,
    read_segment,
    segment_row,
    spark_session,
)

LOG = logging.getLogger("sluice.segment_reader")

DEFAULTS: dict[str, Any] = {
    "bucket": "",
    "queue": "",
    "output": "",
    "incarnation": "",
    "shards": "",
    "start_time_ms": 0,
    "end_time_ms": 0,
    "starting_offsets": "",
    "ending_offsets": "",
    "endpoint_url": "",
    "region": "",
    "max_tasks": 0,
    "mode": "append",
    "master": "",
}


def _seq(value: Any) -> int:
    """A 32-digit offset's sequence (its last 16 digits), or a plain sequence number."""
    text = str(value)
    return int(text[16:]) if len(text) == 32 and text.isdigit() else int(text)


def sequence_ranges(starting: str, ending: str) -> dict[int, tuple[int, int]]:
    """shard -> [lo, hi) from the offset arguments (a shard named in neither: everything)."""
    start = {int(k): _seq(v) for k, v in json.loads(starting).items()} if starting else {}
    end = {int(k): _seq(v) for k, v in json.loads(ending).items()} if ending else {}
    return {s: (start.get(s, 0), end.get(s, 2**63)) for s in set(start) | set(end)}


def read(spark: Any, args: dict[str, Any]) -> Any:
    """The records of the range as a DataFrame (SEGMENT_COLUMNS); nothing is read on the driver."""
    a = {**DEFAULTS, **args}
    for required in ("bucket", "queue"):
        if not a[required]:
            raise SystemExit(f"--{required} is required")
    s3 = S3Config(a["bucket"], a["endpoint_url"] or None, a["region"] or None)
    ranges = sequence_ranges(a["starting_offsets"], a["ending_offsets"])
    segments = list_segments(s3, a["queue"], a["incarnation"] or None)
    if a["shards"]:
        wanted = {int(x) for x in str(a["shards"]).split(",") if x.strip()}
        segments = [seg for seg in segments if seg.shard in wanted]
    tasks = plan_segment_tasks(
        segments, ranges, a["start_time_ms"] or None, a["end_time_ms"] or None
    )  # fmt: skip
    LOG.info("%d segment objects listed, %d to read", len(segments), len(tasks))
    if not tasks:
        return spark.createDataFrame([], SEGMENT_COLUMNS)
    slices = min(len(tasks), a["max_tasks"]) if a["max_tasks"] else len(tasks)

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
    args = parse_args(sys.argv[1:] if argv is None else argv, DEFAULTS)
    if not args["output"]:
        raise SystemExit("--output is required")
    spark, _glue = spark_session("sluice-segment-reader", args["master"] or None)
    frame = read(spark, args)
    frame.write.mode(args["mode"]).partitionBy("ingest_date").parquet(args["output"])
    LOG.info("wrote the range to %s in %.1f s", args["output"], time.monotonic() - t0)


__all__ = ["DEFAULTS", "SegmentTask", "main", "read", "sequence_ranges"]

if __name__ == "__main__":
    main()
