"""The domain model: queue settings and the shapes the engine returns. Validation lives here once."""

from __future__ import annotations

import hashlib
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sluice.names import QueueName

DEFAULT_GROUP = "default"
QUEUE_ID_RE = re.compile(r"^[0-9a-f]{32}$")  # Cloudflare-style queue ids

MAX_BATCH_MESSAGES = 100
MAX_REQUEST_BYTES = 1024 * 1024
# A native send: 4 MiB of bodies, so 50 messages of 64 KB travel in one request. Lambda takes 6 MB per
# synchronous event, which 4 MiB of `bytes` bodies (base64 on the wire, 5.6 MB) still fits.
MAX_SEND_BYTES = 4 * 1024 * 1024
MAX_PULL_BATCH = 100
MAX_VISIBILITY_MS = 43_200_000
MAX_DELAY_SECONDS = 86_400
MAX_WAIT_MS = 20_000
MAX_RETENTION_SECONDS = 3_153_600_000  # 100 years: bottomless queues keep segments, not forever
# Numbers a client sends are bounded so that they fit everywhere they go: DynamoDB numbers (38 digits),
# 16-digit millisecond offsets, and 64-bit integers in clients.
MAX_VERSION = 2**63 - 1  # producer versions (`?version=`, native and Durable Streams)
MAX_TIMESTAMP_MS = 10**16 - 1  # the 16-digit millisecond part of an offset
MAX_COUNT = 10**9  # counts a client asks for (redrive's max_messages)
MAX_SHARD_ID = 2**31 - 1
MAX_PARTITION_KEY_CHARS = 256
MAX_SHARDS = 256  # the most shards a queue's settings allow (`min_shards`, `max_shards`)
MAX_ATTRIBUTES = 16
MAX_ATTRIBUTE_KEY_CHARS = 128
MAX_ATTRIBUTE_VALUE_CHARS = 1024
RESERVED_ATTRIBUTE_PREFIX = "sluice-"  # the engine's own attributes (e.g. a dead letter's source queue)

ContentType = Literal["json", "text", "bytes"]


class QueueSettings(BaseModel):
    """Per-queue settings of API.md, with their defaults and bounds."""

    model_config = ConfigDict(extra="forbid", strict=True)

    retention_seconds: int = Field(345_600, ge=60, le=MAX_RETENTION_SECONDS)
    bottomless: bool = False
    delivery_delay_seconds: int = Field(0, ge=0, le=MAX_DELAY_SECONDS)
    visibility_timeout_ms: int = Field(30_000, ge=1, le=MAX_VISIBILITY_MS)
    max_retries: int = Field(3, ge=0, le=100)
    retry_delay_seconds: int = Field(0, ge=0, le=MAX_DELAY_SECONDS)
    dead_letter_queue: QueueName | None = None
    ordered: bool = False
    min_shards: int = Field(1, ge=1, le=MAX_SHARDS)
    max_shards: int = Field(64, ge=1, le=MAX_SHARDS)
    max_message_bytes: int = Field(131_072, ge=1, le=1_048_576)
    # Where a send's bodies go: `auto` by price (sluice.engine.tierpolicy), or always one tier.
    payload_tier: Literal["auto", "dynamodb", "s3"] = "auto"

    @model_validator(mode="after")
    def _check(self) -> QueueSettings:
        if self.min_shards > self.max_shards:
            raise ValueError("min_shards must not exceed max_shards")
        if not self.bottomless and self.retention_seconds > 1_209_600:
            raise ValueError("retention_seconds above 1209600 needs bottomless: true")
        return self


ShardState = Literal["open", "sealed", "retired"]


class Shard(BaseModel):
    """One storage shard: a partition key in shard table `table` (an index into the table list)."""

    id: int
    table: int
    state: ShardState = "open"
    created_ms: int
    parents: list[int] = Field(default_factory=list)
    region: str | None = None  # where the shard's table is; None: the deployment's home (only) region


class OpenStreamFork(BaseModel):
    """Where a fork's inherited data comes from: the source stream's records below `base`, read in
    place (nothing is copied). `offset`/`sub_offset` are what the fork was asked for (compared on an
    idempotent PUT); `base` is where the fork's own records start in the offset space it shares with
    its source."""

    source_path: str
    source_queue: str
    source_incarnation: str
    offset: int
    sub_offset: int = 0
    base: int


class OpenStreamMeta(BaseModel):
    """What an open Durable Streams protocol stream was created with; fixed for its lifetime."""

    path: str
    content_type: str
    ttl_seconds: int | None = None
    expires_at: str | None = None  # RFC 3339, as sent (compared as sent on an idempotent PUT)
    expires_at_ms: int | None = None
    fork: OpenStreamFork | None = None


class Queue(BaseModel):
    """A queue and its shard map: one control item, changed only by conditional writes on `version`.

    The same document is mirrored to SSM for brokers to cache, so a broker learns settings, pause
    state and shards from one cached read.
    """

    name: str
    settings: QueueSettings
    created_ms: int
    paused: bool = False
    incarnation: str  # changes when a queue is deleted and created again: ids and keys stay unique
    version: int = 1
    shards: list[Shard] = Field(default_factory=list)
    next_shard_id: int = 0
    fence: int = 0  # highest coordinator fencing token that wrote this map (single region)
    # Multi-region: each region's coordinator has its own ownership item and token (region → the highest
    # token of that region's coordinator that wrote this map); absent in older documents.
    fences: dict[str, int] = Field(default_factory=dict)
    groups: dict[str, int] = Field(default_factory=lambda: {DEFAULT_GROUP: 0})  # name → start ms
    stream_name: str | None = None  # the Durable Streams name this queue serves, if any
    open_stream: OpenStreamMeta | None = None  # set when the queue serves an open-protocol stream

    @property
    def queue_id(self) -> str:
        """A stable 32-hex id (Cloudflare addresses queues by one): fixed for this queue's life, new when
        a queue of the same name is created again, derived so that no stored document changes."""
        return hashlib.sha256(f"{self.name}:{self.incarnation}".encode()).hexdigest()[:32]

    @property
    def lease_key(self) -> str:
        """What lease ids are bound to: this queue, this incarnation."""
        return f"{self.name}:{self.incarnation}"

    @property
    def open_shards(self) -> list[Shard]:
        return [s for s in self.shards if s.state == "open"]

    @property
    def readable_shards(self) -> list[Shard]:
        """Shards that may still hold undelivered messages."""
        return [s for s in self.shards if s.state != "retired"]

    def shard(self, shard_id: int) -> Shard | None:
        return next((s for s in self.shards if s.id == shard_id), None)

    def shards_in(self, region: str | None, home: str | None = None) -> list[Shard]:
        """The shards stored in `region` (a shard without a region is in the `home` region)."""
        return [s for s in self.shards if (s.region or home) == region]

    def fence_of(self, region: str | None) -> int:
        """The fencing token a coordinator of `region` (None: the single-region one) must not be below."""
        return self.fence if region is None else self.fences.get(region, 0)

    def with_fence(self, region: str | None, token: int) -> Queue:
        if region is None:
            return self.model_copy(update={"fence": token})
        return self.model_copy(update={"fences": {**self.fences, region: token}})

    def with_new_shards(self, count: int, region: str | None, tables: int, now_ms: int) -> Queue:
        """`count` more open shards in `region` (None: single region), with ids no shard of this queue
        in any region has had, spread over the region's `tables` shard tables."""
        first = self.next_shard_id
        added = [
            Shard(id=sid, table=sid % tables, created_ms=now_ms, region=region)
            for sid in range(first, first + count)
        ]
        return self.model_copy(update={"shards": [*self.shards, *added], "next_shard_id": first + count})

    def public(self) -> dict[str, Any]:
        return {
            "queue_name": self.name,
            "queue_id": self.queue_id,
            "created_on": self.created_ms,
            "paused": self.paused,
            "settings": self.settings.model_dump(),
            "shard_count": len(self.open_shards),
            **({"stream_name": self.stream_name} if self.stream_name else {}),
        }


class OutgoingMessage(BaseModel):
    """One message to publish, after the face that received it has normalised its body."""

    body: bytes
    content_type: ContentType = "json"
    delay_seconds: int | None = None  # None: the queue's delivery_delay_seconds; 0: no delay
    partition_key: str | None = None
    attributes: dict[str, str] = Field(default_factory=dict)

    @property
    def size(self) -> int:
        """What counts against `max_message_bytes`: body, partition key and the client's attributes in
        UTF-8 (the engine's own `sluice-` attributes are free, so dead-lettering never overflows)."""
        extra = sum(
            len(k.encode()) + len(v.encode())
            for k, v in self.attributes.items()
            if not k.startswith(RESERVED_ATTRIBUTE_PREFIX)
        )
        return len(self.body) + len((self.partition_key or "").encode()) + extra


class PublishResult(BaseModel):
    message_ids: list[str]
    offsets: list[str]
    shard: int
    tail_seq: int | None = None  # the shard's next sequence after this append (guarded appends)


class Delivery(BaseModel):
    """A message handed to a pull consumer under a lease."""

    id: str
    body: bytes
    content_type: ContentType
    timestamp_ms: int
    attempts: int
    lease_id: str
    partition_key: str | None = None
    attributes: dict[str, str] = Field(default_factory=dict)
    shard: int
    seq: int


class AckResult(BaseModel):
    ack_count: int
    retry_count: int
    warnings: list[str]


class BacklogFigures(BaseModel):
    """A group's unacked messages over the queue, split: available now (never delivered, or due again),
    in flight (leased) and delayed (a retry's or a send's delay not over yet)."""

    available: int = 0
    in_flight: int = 0
    delayed: int = 0


class LeasedBatch(BaseModel):
    """What one engine pull leased, with the group's backlog (the SDK's own is `sluice.client.PullResult`).

    `backlog_exact`: the pull read every lane of every shard of every region (the queue's whole state at
    one moment): the backlog and its split are exact, and an empty answer proves nothing was deliverable.
    Otherwise (the batch filled from the lanes it tried first) the count is an estimate and `backlog`
    is None. Clients stop on an exact 0, never on an estimate."""

    messages: list[Delivery]
    message_backlog_count: int
    backlog_exact: bool = False
    backlog: BacklogFigures | None = None
    ack: AckResult | None = None  # the outcome of acks carried on the pull, when it carried any
