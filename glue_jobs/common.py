"""What the Glue/EMR jobs and the Spark data source share: `--key value` arguments, the session (Glue or
plain Spark), API clients built on the executors (Bearer token or SigV4 with the job role), the output
row shape, and reading S3 segment objects (docs/design.md "Segments").

Runs on Spark 3.5 (Glue 5 / EMR 7) and 4.x: only RDD/DataFrame APIs here. Executors import this module
from the zip given to Glue with `--extra-py-files` (stacks/glue_artifact.py builds it).
"""

from __future__ import annotations

import base64
import datetime as dt
import gzip
import json
import logging
import os
import re
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

LOG = logging.getLogger("sluice.jobs")

# The rows both jobs write (and the data source reads): one per message.
OUTPUT_COLUMNS = (
    "id string, body string, content_type string, attributes map<string,string>, "
    "partition_key string, timestamp_ms bigint, attempts int"
)
# Contention on one shard's group state: 409 "a concurrent change won" and 429 "too many consumers
# on this shard" (after the SDK's own retries) both mean "back off and pull again" (docs/api.md).
CONTENTION_CODES = frozenset({10115, 10429})


# --- arguments and session ---------------------------------------------------------------------------------


# The default arguments the CDK stack (stacks/glue.py) sets on the Glue jobs, as this module's names.
STACK_ARGUMENT_ALIASES = {
    "sluice_api_url": "url",
    "sluice_token_secret_arn": "token_secret_arn",
    "sluice_segment_bucket": "bucket",
    "sluice_output_path": "output",
}


def parse_args(argv: Sequence[str], defaults: dict[str, Any]) -> dict[str, Any]:
    """`--key value` / `--key=value` pairs as Glue passes them (`--JOB_NAME x --queue q ...`). Names are
    normalised to snake_case (the stack's `--sluice_api_url` etc. to `url` etc.), values converted to the
    type of the default. Unknown Glue arguments (`--TempDir`, `--job-bookmark-option`, ...) are kept but
    ignored; a bare `--flag` means true."""
    out: dict[str, Any] = dict(defaults)
    items = list(argv)
    i = 0
    while i < len(items):
        item = items[i]
        i += 1
        if not item.startswith("--"):
            continue
        name, eq, value = item[2:].partition("=")
        if not eq:
            if i < len(items) and not items[i].startswith("--"):
                value = items[i]
                i += 1
            else:
                value = "true"
        key = name.replace("-", "_")
        key = STACK_ARGUMENT_ALIASES.get(key, key)
        out[key] = _convert(value, defaults.get(key))
    return out


def _convert(value: str, default: Any) -> Any:
    if isinstance(default, bool):
        return value.lower() in ("1", "true", "yes", "on")
    if isinstance(default, int):
        return int(value)
    if isinstance(default, float):
        return float(value)
    return value


def spark_session(app_name: str, master: str | None = None) -> tuple[Any, Any]:
    """(SparkSession, GlueContext or None): Glue's context when `awsglue` is there, else a plain
    SparkSession (local[*] unless a master is configured)."""
    try:
        from awsglue.context import GlueContext  # type: ignore[import-not-found]
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
    """Retry contention answers (pullers racing on one shard's state): see CONTENTION_CODES."""
    import random

    from sluice.client import SluiceApiError

    for attempt in range(attempts):
        try:
            return fn(*args, **kwargs)
        except SluiceApiError as exc:
            if exc.code not in CONTENTION_CODES or attempt == attempts - 1:
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


def body_text_from_stored(raw: bytes, content_type: str) -> str:
    """The `body` column from stored bytes (segments keep them as `body_b64`)."""
    if content_type == "bytes":
        return base64.b64encode(raw).decode()
    return raw.decode()


def ingest_date(timestamp_ms: int) -> str:
    """The partition column: the message's publish date (UTC), so a redelivered duplicate lands in the
    same partition as its first copy."""
    return dt.datetime.fromtimestamp(timestamp_ms / 1000, dt.UTC).strftime("%Y-%m-%d")


# --- segments (docs/design.md: `segments/<queue>/<incarnation>/<shard>/<first>-<last>.ndjson.gz`) ------

SEGMENT_KEY_RE = re.compile(
    r"^segments/(?P<queue>[^/]+)/(?P<inc>[^/]+)/(?P<shard>\d+)/(?P<first>\d{16})-(?P<last>\d{16})\.ndjson\.gz$"
)


@dataclass(frozen=True)
class SegmentObject:
    key: str
    incarnation: str
    shard: int
    first: int
    last: int  # inclusive
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
    extra: dict[str, str] = field(default_factory=dict)

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint_url, region_name=self.region)


def list_segments(s3: S3Config, queue: str, incarnation: str | None = None) -> list[SegmentObject]:
    prefix = f"segments/{queue}/" + (f"{incarnation}/" if incarnation else "")
    client = s3.client()
    found: list[SegmentObject] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=s3.bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            match = SEGMENT_KEY_RE.match(obj["Key"])
            if match and match["queue"] == queue:
                found.append(
                    SegmentObject(
                        key=obj["Key"],
                        incarnation=match["inc"],
                        shard=int(match["shard"]),
                        first=int(match["first"]),
                        last=int(match["last"]),
                        last_modified_ms=int(obj["LastModified"].timestamp() * 1000),
                    )
                )
    return found


def covering(segments: Sequence[SegmentObject]) -> list[SegmentObject]:
    """Per (incarnation, shard), the segments to read so each sequence is read once: a compacted
    segment and the level-0 ones it replaced may both still be listed; the widest wins, and a partial
    overlap is trimmed by the caller through `lo`."""
    by_shard: dict[tuple[str, int], list[SegmentObject]] = {}
    for seg in segments:
        by_shard.setdefault((seg.incarnation, seg.shard), []).append(seg)
    chosen: list[SegmentObject] = []
    for segs in by_shard.values():
        segs.sort(key=lambda s: (s.first, -s.last))
        covered = -1
        for seg in segs:
            if seg.last <= covered:
                continue  # inside a wider segment already chosen
            chosen.append(seg)
            covered = seg.last
    return chosen


def plan_segment_tasks(
    segments: Sequence[SegmentObject],
    ranges: dict[int, tuple[int, int]] | None = None,
    start_ms: int | None = None,
    end_ms: int | None = None,
    clock_skew_ms: int = 300_000,
) -> list[SegmentTask]:
    """One task per object that can hold records of the range. `ranges`: shard -> [lo, hi) sequences
    (absent shard: everything). Objects last written before `start_ms` (less a clock-skew margin) hold
    only older records and are skipped without being read."""
    tasks: list[SegmentTask] = []
    covered: dict[tuple[str, int], int] = {}
    for seg in sorted(covering(segments), key=lambda s: (s.incarnation, s.shard, s.first)):
        lo, hi = (ranges or {}).get(seg.shard, (0, 2**63))
        lo = max(lo, seg.first, covered.get((seg.incarnation, seg.shard), -1) + 1)
        hi = min(hi, seg.last + 1)
        covered[(seg.incarnation, seg.shard)] = seg.last
        if lo >= hi:
            continue
        if start_ms is not None and seg.last_modified_ms and seg.last_modified_ms < start_ms - clock_skew_ms:
            continue
        tasks.append(SegmentTask(seg.key, seg.shard, lo, hi, start_ms, end_ms))
    return tasks


def read_segment(s3: S3Config, task: SegmentTask, client: Any = None) -> Iterator[dict[str, Any]]:
    """Decode one gzip NDJSON segment object and yield the records of the task's range."""
    client = client or s3.client()
    raw = client.get_object(Bucket=s3.bucket, Key=task.key)["Body"].read()
    for line in gzip.decompress(raw).splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        seq = rec["seq"]
        if seq < task.lo or seq >= task.hi:
            continue
        ts = rec["timestamp_ms"]
        if (task.start_ms is not None and ts < task.start_ms) or (
            task.end_ms is not None and ts >= task.end_ms
        ):
            continue
        yield rec


def segment_row(rec: dict[str, Any]) -> tuple[Any, ...]:
    """A segment record as an output row: the common columns, then offset, shard, seq."""
    content_type = rec.get("content_type", "json")
    body = body_text_from_stored(base64.b64decode(rec["body_b64"]), content_type)
    return (
        rec["id"],
        body,
        content_type,
        rec.get("attributes") or {},
        rec.get("partition_key"),
        rec["timestamp_ms"],
        None,
        rec["offset"],
        rec["shard"],
        rec["seq"],
        ingest_date(rec["timestamp_ms"]),
    )


SEGMENT_COLUMNS = OUTPUT_COLUMNS + ", offset string, shard int, seq bigint, ingest_date string"
