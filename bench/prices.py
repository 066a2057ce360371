"""The one price table of the bench (us-east-1, list prices, 2026-11) and what a measured run costs.

Sluice's cost is priced from what was measured (capacity units, requests, request bytes, handler CPU,
S3 requests and the bytes the hot tier keeps); SQS and Cloudflare Queues from their published
per-request rules. DynamoDB's and S3's prices are the engine's own (`sluice.engine.tierpolicy`, which
cites them): the payload tier's rule and the bench price with the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sluice.constants import (
    COORDINATOR_SCHEDULE_MINUTES,
    DEFAULT_CAPACITY_MIN_UNITS,
    DEFAULT_LAMBDA_MEMORY_MB,
)
from sluice.engine import tierpolicy
from sluice.engine.tierpolicy import (
    DDB_GB_MONTH,
    EXPRESS_GB_MONTH,
    EXPRESS_GET_PRICE,
    EXPRESS_PUT_PRICE,
    EXPRESS_RETRIEVAL_GB,
    EXPRESS_UPLOAD_GB,
    GB,
    MONTH_SECONDS,
    RRU_PRICE,
    S3_GB_MONTH,
    S3_GET_PRICE,
    S3_PUT_PRICE,
    WRU_PRICE,
)
from sluice.models import QueueSettings

# DynamoDB on demand: WRU_PRICE, RRU_PRICE (per request unit); storage DDB_GB_MONTH. S3 Standard:
# S3_PUT_PRICE (PUT, COPY, POST, LIST), S3_GET_PRICE, S3_GB_MONTH. Express One Zone: EXPRESS_*.
__all__ = [
    "DDB_GB_MONTH",
    "EXPRESS_GB_MONTH",
    "EXPRESS_GET_PRICE",
    "EXPRESS_PUT_PRICE",
    "EXPRESS_RETRIEVAL_GB",
    "EXPRESS_UPLOAD_GB",
    "RRU_PRICE",
    "S3_GB_MONTH",
    "S3_GET_PRICE",
    "S3_PUT_PRICE",
    "WRU_PRICE",
]
RETENTION_SECONDS = QueueSettings().retention_seconds  # the default: what the storage column assumes
# DynamoDB provisioned capacity: per unit-hour (a WCU is one 1 KB write per second, an RCU one 4 KB
# strongly consistent read per second or two eventually consistent ones, the same units as above).
WCU_HOUR_PRICE = 0.00065
RCU_HOUR_PRICE = 0.00013
APIGW_PRICE = 1.00 / 1e6  # HTTP API, per request, metered in 512 KB increments
APIGW_METER_BYTES = 512 * 1024
LAMBDA_REQUEST_PRICE = 0.20 / 1e6
LAMBDA_GBS_PRICE = 0.0000133334  # arm64
LAMBDA_MEMORY_MB = DEFAULT_LAMBDA_MEMORY_MB  # what the stack deploys
DDB_ROUND_TRIP_MS = 6.0  # assumed in-region DynamoDB latency per sequential call, for Lambda duration
S3_ROUND_TRIP_MS = 30.0  # S3 Standard, a request under 512 KB: "median latencies ... in the tens of ms"
CF_PRICE, CF_OPS_PER_MESSAGE, CF_METER_BYTES = 0.40 / 1e6, 3, 64 * 1024  # write + read + delete
SQS_PRICE, SQS_MAX_BATCH, SQS_METER_BYTES = 0.40 / 1e6, 10, 64 * 1024

# At rest (docs/performance.md "Cost at rest"), per region and month. Sources: the AWS pricing pages of
# each service (us-east-1, 2026-11); what is free is said where it is used (bench/rest.py).
HOURS_PER_MONTH = 730
COORDINATOR_RUNS_PER_MONTH = HOURS_PER_MONTH * 60 // COORDINATOR_SCHEDULE_MINUTES
LAMBDA_LOG_LINES_BYTES = 400  # START, END and REPORT (with X-Ray's trace id), per invocation
SNAPSTART_CACHE_GBS_PRICE = 0.0000015046  # Lambda SnapStart for Python, per GB-s cached per version
CW_ALARM_MONTH = 0.10  # per standard-resolution alarm metric
CW_DASHBOARD_MONTH = 3.00  # per dashboard beyond an account's first 3
CW_METRIC_MONTH = 0.30  # per custom metric (first 10,000), prorated by the hour
CW_LOGS_INGEST_GB = 0.50
CW_LOGS_STORE_GB_MONTH = 0.03
XRAY_TRACE_PRICE = 5.00 / 1e6  # per trace recorded beyond 100,000 a month
SECRET_MONTH = 0.40
KMS_KEY_MONTH = 1.00  # per customer managed key
DDB_STORAGE_GB_MONTH = DDB_GB_MONTH
DDB_PITR_GB_MONTH = 0.20
S3_STANDARD_GB_MONTH = S3_GB_MONTH
MIN_PROVISIONED_UNITS = DEFAULT_CAPACITY_MIN_UNITS


@dataclass
class Usage:
    """What one scenario used, per message: DynamoDB units, API requests (counted in API Gateway's
    512 KB meter), Lambda invocations and their GB-seconds (billed duration)."""

    wru: float
    rru: float
    apigw_requests: float
    invocations: float
    gb_seconds: float
    s3_puts: float = 0.0  # PUT/LIST-priced S3 requests (payload objects, overflow bodies, orphan listings)
    s3_gets: float = 0.0
    hot_item_bytes: float = 0.0  # batch item bytes written: DynamoDB storage until the item's TTL
    hot_object_bytes: float = 0.0  # payload/overflow object bytes: S3 storage until their lifecycle rule


def billed_gb_seconds(
    cpu_ms: float, sequential_calls: float, s3_calls: float = 0.0, *, memory_mb: int = LAMBDA_MEMORY_MB
) -> float:
    """One invocation's billed GB-s: handler CPU plus the assumed round trips, rounded up to 1 ms, at
    `memory_mb` (the stack's default unless a function is given its own)."""
    waited = sequential_calls * DDB_ROUND_TRIP_MS + s3_calls * S3_ROUND_TRIP_MS
    # rounded to a nanosecond first: a float's last digit (600.0000000001 ms) is no extra millisecond
    return math.ceil(round(cpu_ms + waited, 6)) / 1000 * memory_mb / 1024


def hot_storage_per_million(u: Usage, retention_seconds: int = RETENTION_SECONDS) -> float:
    """Keeping what the hot tier holds for as long as it holds it: batch items until their TTL (the
    queue's retention), payload objects until their lifecycle rule (`tierpolicy.object_days`)."""
    days = tierpolicy.object_days(retention_seconds, False)
    item_months = retention_seconds / MONTH_SECONDS
    object_months = days * tierpolicy.DAY_SECONDS / MONTH_SECONDS
    items = u.hot_item_bytes / GB * DDB_GB_MONTH * item_months
    objects = u.hot_object_bytes / GB * S3_GB_MONTH * object_months
    return 1e6 * (items + objects)


def express_per_million(u: Usage) -> float:
    """What the same S3 requests and bytes would cost on S3 Express One Zone instead (requests and
    per-GB upload/retrieval; storage left out): the alternative docs/design.md weighs."""
    uploaded = u.hot_object_bytes / GB * EXPRESS_UPLOAD_GB
    retrieved = u.hot_object_bytes / GB * EXPRESS_RETRIEVAL_GB * (u.s3_gets > 0)
    return 1e6 * (u.s3_puts * EXPRESS_PUT_PRICE + u.s3_gets * EXPRESS_GET_PRICE + uploaded + retrieved)


def billed_ms(cpu_ms: float, sequential_calls: float, minimum: int = 1) -> float:
    """One invocation's billed duration (ms): handler CPU plus the assumed round trips, rounded up."""
    return max(minimum, math.ceil(cpu_ms + sequential_calls * DDB_ROUND_TRIP_MS))


def apigw_requests(request_bytes: int) -> int:
    return math.ceil(max(1, request_bytes) / APIGW_METER_BYTES)


def on_demand_per_million(u: Usage) -> dict[str, float]:
    return _per_million(u, 1e6 * (u.wru * WRU_PRICE + u.rru * RRU_PRICE))


def provisioned_per_million(u: Usage, target_utilization: float) -> dict[str, float]:
    """Steady load on provisioned tables whose autoscaling holds consumed/provisioned at the target:
    each consumed unit per second is paid as 1/target provisioned units for that second."""
    per_unit_second = 1 / target_utilization / 3600
    dynamodb = 1e6 * per_unit_second * (u.wru * WCU_HOUR_PRICE + u.rru * RCU_HOUR_PRICE)
    return _per_million(u, dynamodb)


def provisioned_floor_per_month(min_wcu: int, min_rcu: int) -> float:
    """What the autoscaling minimum costs per month (730 h) with no traffic at all."""
    return 730 * (min_wcu * WCU_HOUR_PRICE + min_rcu * RCU_HOUR_PRICE)


def _per_million(u: Usage, dynamodb: float) -> dict[str, float]:
    out = {
        "dynamodb": dynamodb,
        "s3": 1e6 * (u.s3_puts * S3_PUT_PRICE + u.s3_gets * S3_GET_PRICE),
        "api_gateway": 1e6 * u.apigw_requests * APIGW_PRICE,
        "lambda": 1e6 * (u.invocations * LAMBDA_REQUEST_PRICE + u.gb_seconds * LAMBDA_GBS_PRICE),
    }
    out["total"] = sum(out.values())
    return out


def sqs_per_million(body_bytes: float, batch: int) -> float:
    """SQS standard: send, receive and delete in batches of `batch` (≤ 10); each 64 KB of a send or
    receive payload is one request."""
    batch = min(batch, SQS_MAX_BATCH)
    payload_requests = math.ceil(batch * body_bytes / SQS_METER_BYTES)
    return 1e6 * SQS_PRICE * (2 * payload_requests + 1) / batch


def cloudflare_per_million(body_bytes: float) -> float:
    return 1e6 * CF_PRICE * CF_OPS_PER_MESSAGE * math.ceil(body_bytes / CF_METER_BYTES)
