"""Where a send's bodies go, by price (pure): inline in DynamoDB batch items, or one S3 object per send
with DynamoDB holding only the index (the payload tier, `sluice.engine.payloads`).

DynamoDB bills every KB written, and again for every 4 KB read; S3 bills a flat price per request
whatever the size, and storage at a tenth of DynamoDB's. So a small batch is cheaper inline and a
large one in S3. The tier costs latency too: one more sequential call on the send (an S3 PUT, median
in the tens of milliseconds on S3 Standard) and a GET on each read; S3 is chosen only when it saves at
least `LATENCY_MARGIN` of the DynamoDB price. With the prices below that puts the threshold at about
12 KB of compressed batch, 7 KB on bottomless queues, whose items are written again when their TTL is
set (`break_even_bytes`; bench/report.py prints the table).

List prices, us-east-1, on demand (bench/prices.py prices the bench with the same constants):
- DynamoDB: https://aws.amazon.com/dynamodb/pricing/on-demand/ — $0.625 per million write request
  units (1 KB each), $0.125 per million read request units (4 KB, eventually consistent reads half),
  storage $0.25 per GB-month.
- S3 Standard: https://aws.amazon.com/s3/pricing/ — PUT $0.005 and GET $0.0004 per 1,000 requests,
  storage $0.023 per GB-month (first 50 TB), no per-GB charge for transfer inside the region; object
  tags $0.01 per 10,000 tags per month.
- S3 Express One Zone (considered, not adopted: docs/design.md "Payload tier"): PUT $0.00113 and GET
  $0.00003 per 1,000 requests, $0.0032 per GB uploaded and $0.0006 per GB retrieved, storage $0.11
  per GB-month (https://aws.amazon.com/s3/faqs/, the S3 Express One Zone pricing examples).
"""

from __future__ import annotations

import bz2
import math
import zlib
from dataclasses import dataclass
from typing import Literal

PayloadTier = Literal["auto", "dynamodb", "s3"]
PAYLOAD_TIERS: tuple[PayloadTier, ...] = ("auto", "dynamodb", "s3")

WRU_PRICE = 0.625 / 1e6
RRU_PRICE = 0.125 / 1e6
DDB_GB_MONTH = 0.25
S3_PUT_PRICE = 0.005 / 1000
S3_GET_PRICE = 0.0004 / 1000
S3_GB_MONTH = 0.023
S3_TAG_MONTH = 0.01 / 10_000  # per tag
EXPRESS_PUT_PRICE = 0.00113 / 1000
EXPRESS_GET_PRICE = 0.00003 / 1000
EXPRESS_UPLOAD_GB = 0.0032
EXPRESS_RETRIEVAL_GB = 0.0006
EXPRESS_GB_MONTH = 0.11

GB = 1024**3
MONTH_SECONDS = 730 * 3600  # AWS bills a month as 730 hours
DAY_SECONDS = 86_400
MAX_HOT_DAYS = 14  # the hot tier never holds an item longer than 14 days (sluice.engine.shardwork)
LATENCY_MARGIN = 0.2  # S3 must save at least this share of the DynamoDB price to be worth its latency
READS_PER_BATCH = 2  # one consumer group's pull and the shard worker's flush
INDEX_BYTES_PER_MESSAGE = 4  # a tier index entry (body length, content type), compressed: ~3 B measured
ITEM_OVERHEAD_BYTES = 100  # keys, count, timestamp and TTL of a batch item
_SAMPLE_BYTES = 16 * 1024


@dataclass(frozen=True)
class BatchShape:
    """What the price of one send's bodies depends on."""

    messages: int
    body_bytes: int  # the bodies as sent (what an S3 object holds)
    item_bytes: int  # the batch as DynamoDB items would hold it (compressed; see `estimate_item_bytes`)
    hot_seconds: int  # how long the hot tier keeps it: the queue's retention, at most 14 days
    bottomless: bool  # its items are written again when their TTL is set after the flush


def object_days(hot_seconds: int, bottomless: bool) -> int:
    """Days a tier object lives (its lifecycle tag): one past its batch item's expiry, since S3 counts
    expiration from creation in whole days. A bottomless queue's item expires `hot_seconds` after its
    flush, so the object gets the longest hot life plus that day."""
    if bottomless:
        return MAX_HOT_DAYS + 1
    return min(MAX_HOT_DAYS, math.ceil(hot_seconds / DAY_SECONDS)) + 1


def dynamodb_cost(shape: BatchShape) -> float:
    """Dollars one batch costs stored inline: the item writes, the reads, the TTL rewrite of a
    bottomless queue, and DynamoDB storage for its hot life."""
    wru = math.ceil((shape.item_bytes + ITEM_OVERHEAD_BYTES) / 1024)
    rru = READS_PER_BATCH * math.ceil(shape.item_bytes / 4096) / 2
    writes = wru * (2 if shape.bottomless else 1)
    storage = shape.item_bytes / GB * DDB_GB_MONTH * shape.hot_seconds / MONTH_SECONDS
    return writes * WRU_PRICE + rru * RRU_PRICE + storage


def s3_cost(shape: BatchShape) -> float:
    """Dollars one batch costs in the payload tier: an S3 PUT, a GET per read, storage for the
    object's lifecycle days, and the small index item in DynamoDB (written, read, TTL-rewritten)."""
    index = INDEX_BYTES_PER_MESSAGE * shape.messages
    index_shape = BatchShape(shape.messages, 0, index, shape.hot_seconds, shape.bottomless)
    days = object_days(shape.hot_seconds, shape.bottomless)
    storage = shape.body_bytes / GB * S3_GB_MONTH * days * DAY_SECONDS / MONTH_SECONDS
    tag = S3_TAG_MONTH * days * DAY_SECONDS / MONTH_SECONDS
    return S3_PUT_PRICE + READS_PER_BATCH * S3_GET_PRICE + storage + tag + dynamodb_cost(index_shape)


def choose_tier(setting: PayloadTier, shape: BatchShape) -> Literal["dynamodb", "s3"]:
    """The queue's `payload_tier`: `dynamodb` and `s3` are obeyed; `auto` takes S3 when it saves at
    least LATENCY_MARGIN of the inline price."""
    if setting != "auto":
        return setting
    if s3_cost(shape) <= (1 - LATENCY_MARGIN) * dynamodb_cost(shape):
        return "s3"
    return "dynamodb"


def might_pay_in_s3(raw_bytes: int) -> bool:
    """Cheap first test on the uncompressed batch: below this, even stored uncompressed in DynamoDB the
    batch costs less than an S3 PUT, so no estimate is needed."""
    shape = BatchShape(1, raw_bytes, raw_bytes, MAX_HOT_DAYS * DAY_SECONDS, True)
    return s3_cost(shape) <= (1 - LATENCY_MARGIN) * dynamodb_cost(shape)


def estimate_item_bytes(raw: bytes) -> int:
    """What `sluice.codec.encode_batch` would make of `raw`, from a 16 KiB sample: zlib level 1
    (~0.1 ms); where that halves it, bz2 as the codec would (~1 ms), within ~20 % of the real size on
    the bench's JSON events. Compressing the whole batch only to learn its size costs up to 50 ms on
    a 1 MB batch, more than the decision is worth."""
    sample = raw[:_SAMPLE_BYTES]
    if not sample:
        return 0
    ratio = len(zlib.compress(sample, 1)) / len(sample)
    if ratio < 0.5:
        ratio = min(ratio, len(bz2.compress(sample, 9)) / len(sample))
    return min(len(raw), math.ceil(ratio * len(raw)))


def break_even_bytes(hot_seconds: int, bottomless: bool, messages: int = 100) -> int:
    """The smallest compressed batch (bytes, in 256 B steps) that `auto` sends to S3: for docs and the
    bench, not consulted by the engine."""
    size = 256
    while size < 64 * 1024 * 1024:
        shape = BatchShape(messages, size, size, hot_seconds, bottomless)
        if choose_tier("auto", shape) == "s3":
            return size
        size += 256
    return size
