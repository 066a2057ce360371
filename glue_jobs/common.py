"""What the Glue/EMR jobs and the Spark data source share: the session (Glue or plain Spark), API clients
built on the executors (Bearer token or SigV4 with the job role), the output row shape, and listing and
getting S3 segment objects. The segment format itself (keys, NDJSON, covering) is `sluice.segmentformat`,
the engine's own; the arguments are glue_jobs/arguments.py.

Runs on Spark 3.5 (Glue 5 / EMR 7) and 4.x: only RDD/DataFrame APIs here. Executors import this module
from the zip given to Glue with `--extra-py-files` (stacks/glue_artifact.py builds it).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sluice.segmentformat import NO_END, Record, SegmentName, queue_prefix, read_ranges, read_records

LOG = logging.getLogger(__name__)

# The rows both jobs write (and the data source reads): one per message.
OUTPUT_COLUMNS = (
    "id string, body string, content_type string, attributes map<string,string>, "
    "partition_key string, timestamp_ms bigint, attempts int"
)
# Contention on one shard's group state: 409 "a concurrent change won" and 429 "too many consumers
# on this shard" (after the SDK's own retries) both mean "back off and pull again" (docs/api.md); so
# does any answer the SDK calls transient (API Gateway's 429 past its quota, a 503): `backs_off`.
CONTENTION_CODES = frozenset({10115, 10429})


def backs_off(exc: Any) -> bool:
    """Whether a `SluiceApiError` means "pause and go again" rather than a failure of the request."""
    return exc.code in CONTENTION_CODES or exc.transient


# --- session ---------------------------------------------------------------------------------


def spark_session(app_name: str, master: str | None = None) -> tuple[Any, Any]:
    """(SparkSession, GlueContext or None): Glue's context when `awsglue` is there, else a plain
    SparkSession (local[*] unless a master is configured)."""
    try:
        from awsglue.context import GlueContext
        from pyspark.context import SparkContext

        glue = GlueContext(SparkContext.getOrCreate())
        return glue.spark_session, glue
    except ImportError:
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.appName(app_name)
        if master:
            builder = builder.master(master)
        elif "spark.master" not in os.environ.get("PYSPARK_SUBMIT_ARGS", "") and not _submitted():
            builder = builder.master("local[*]")
        return builder.getOrCreate(), None


def _submitted() -> bool:
    """True under spark-submit / EMR steps, which set the master themselves."""
    return "SPARK_ENV_LOADED" in os.environ or any("pyspark-shell" in a for a in sys.argv)


def configure_logging() -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    for noisy in ("py4j", "botocore", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


# --- the API from executors ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ApiConfig:
    """Everything an executor needs to build its own client (picklable: no sockets, no credentials
    except the Bearer token; SigV4 credentials come from the executor's own role)."""

    url: str
    token: str | None = None
    auth: str = "token"  # "token" | "iam"
    region: str | None = None

    def client(self, **kwargs: Any) -> Any:
        from sluice.client import SluiceClient

        signer = sigv4_auth(self.region) if self.auth == "iam" else None
        return SluiceClient(self.url, self.token if self.auth != "iam" else None, auth=signer, **kwargs)


def resolve_token(token: str | None, secret_arn: str | None, region: str | None = None) -> str | None:
    """`--token`, or the secret behind `--token-secret-arn` (a plain string, or JSON with `token`)."""
    if token:
        return token
    if not secret_arn:
        return None
    import boto3

    region = region or _arn_region(secret_arn)
    secret = boto3.client("secretsmanager", region_name=region).get_secret_value(SecretId=secret_arn)
    value = secret.get("SecretString") or secret["SecretBinary"].decode()
    try:
        doc = json.loads(value)
    except ValueError:
        return value.strip()
    return doc["token"] if isinstance(doc, dict) else str(doc)


def _arn_region(arn: str) -> str | None:
    parts = arn.split(":")
    return parts[3] if len(parts) > 3 and parts[3] else None


def sigv4_auth(region: str | None) -> Any:
    """A `sluice.client` auth hook signing each request with SigV4 (`execute-api`) as the job role."""
    import boto3
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    session = boto3.Session()
    region_name = region or session.region_name or "us-east-1"

    def sign(method: str, url: str, headers: dict[str, str], body: bytes | None) -> dict[str, str]:
        credentials = session.get_credentials().get_frozen_credentials()
        request = AWSRequest(method=method, url=url, data=body or b"", headers=headers)
        SigV4Auth(credentials, "execute-api", region_name).add_auth(request)
        return dict(request.headers.items())

    return sign


def call_with_conflict_retry(fn: Any, *args: Any, attempts: int = 30, **kwargs: Any) -> Any:
    """Retry contention and throttling answers (pullers racing on one shard's state, a busy front
    door): see `backs_off`."""
    import random

    from sluice.client import SluiceApiError

    for attempt in range(attempts):
        try:
            return fn(*args, **kwargs)
        except SluiceApiError as exc:
            if not backs_off(exc) or attempt == attempts - 1:
                raise
            time.sleep(random.uniform(0.01, 0.05 * 2 ** min(attempt, 5)))
    raise AssertionError("unreachable")


# --- rows --------------------------------------------------------------------------------------------------


def body_text(body: Any, content_type: str) -> str:
    """The `body` column from a native-face body: JSON text for json, the string for text, base64 for
    bytes (the API already sends bytes as base64)."""
    if content_type == "json":
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    return body


def ingest_date(timestamp_ms: int) -> str:
    """The partition column: the message's publish date (UTC), so a redelivered duplicate lands in the
    same partition as its first copy."""
    return dt.datetime.fromtimestamp(timestamp_ms / 1000, dt.UTC).strftime("%Y-%m-%d")


# --- segment objects in S3 -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SegmentObject(SegmentName):
    """A listed segment object: its name, and when it was written (0: unknown)."""

    last_modified_ms: int = 0


@dataclass(frozen=True)
class SegmentTask:
    """Read `key`, keep records with lo <= seq < hi (and inside the time range)."""

    key: str
    shard: int
    lo: int
    hi: int
    start_ms: int | None = None
    end_ms: int | None = None


@dataclass(frozen=True)
class S3Config:
    bucket: str
    endpoint_url: str | None = None
    region: str | None = None

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint_url, region_name=self.region)


def list_segments(s3: S3Config, queue: str, incarnation: str | None = None) -> list[SegmentObject]:
    client = s3.client()
    found: list[SegmentObject] = []
    pages = client.get_paginator("list_objects_v2").paginate(
        Bucket=s3.bucket, Prefix=queue_prefix(queue, incarnation)
    )
    for page in pages:
        for obj in page.get("Contents", []):
            seg = SegmentObject.parse(obj["Key"])
            if seg is not None and seg.queue == queue:
                found.append(replace(seg, last_modified_ms=int(obj["LastModified"].timestamp() * 1000)))
    return found


def plan_segment_tasks(
    segments: Sequence[SegmentObject],
    ranges: dict[int, tuple[int, int]] | None = None,
    start_ms: int | None = None,
    end_ms: int | None = None,
    clock_skew_ms: int = 300_000,
) -> list[SegmentTask]:
    """One task per object that can hold records of the range, each sequence in one task only (a
    compacted segment and the ones it replaced may both be listed). `ranges`: shard -> [lo, hi)
    sequences (absent shard: everything). Objects last written before `start_ms` (less a clock-skew
    margin) hold only older records and are skipped without being read."""
    by_shard: dict[tuple[str, int], list[SegmentObject]] = {}
    for seg in segments:
        by_shard.setdefault((seg.incarnation, seg.shard), []).append(seg)
    tasks: list[SegmentTask] = []
    for (_incarnation, shard), segs in sorted(by_shard.items()):
        lo, hi = (ranges or {}).get(shard, (0, NO_END))
        for seg, seg_lo, seg_hi in read_ranges(segs, lo, hi):
            if (
                start_ms is not None
                and seg.last_modified_ms
                and seg.last_modified_ms < start_ms - clock_skew_ms
            ):
                continue
            tasks.append(SegmentTask(seg.key, shard, seg_lo, seg_hi, start_ms, end_ms))
    return tasks


def read_segment(s3: S3Config, task: SegmentTask, client: Any = None) -> Iterator[Record]:
    """The records of the task's range in one segment object."""
    client = client or s3.client()
    data = client.get_object(Bucket=s3.bucket, Key=task.key)["Body"].read()
    return read_records(data, task.lo, task.hi, task.start_ms, task.end_ms)


def segment_row(rec: Record) -> tuple[Any, ...]:
    """A segment record as an output row: the common columns, then offset, shard, seq."""
    return (
        rec.id,
        rec.body_text(),
        rec.content_type,
        rec.attributes,
        rec.partition_key,
        rec.timestamp_ms,
        None,
        rec.offset,
        rec.shard,
        rec.seq,
        ingest_date(rec.timestamp_ms),
    )


SEGMENT_COLUMNS = OUTPUT_COLUMNS + ", offset string, shard int, seq bigint, ingest_date string"
