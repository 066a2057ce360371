"""Response bodies of the native face (`/v1`): the routes' return annotations (see
lambdas/common/responses.py for how `Wire` models keep an answer as built)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from lambdas.common.responses import Wire
from sluice.models import QueueSettings


class QueueView(Wire):
    queue_name: str
    queue_id: str
    created_on: int = Field(description="epoch milliseconds")
    paused: bool
    settings: QueueSettings
    shard_count: int
    stream_name: str | None = Field(None, description="present for a queue made by a stream face")


class QueueList(Wire):
    queues: list[QueueView]
    cursor: str | None = Field(description="pass as `cursor` for the next page; null on the last")


class TokenCreated(Wire):
    token_id: str
    token: str = Field(description="shown once")
    queue: str
    scopes: list[str]
    expires_on: int | None = Field(None, description="epoch milliseconds; absent: never")


class AccessKeyIssued(Wire):
    token_id: str
    access_key_id: str
    secret_access_key: str = Field(description="shown once; SigV4 on the SQS face as this token")


class TokenView(Wire):
    token_id: str
    queue: str
    scopes: list[str]
    created_on: int = Field(description="epoch milliseconds")
    expires_on: int | None = Field(None, description="epoch milliseconds; absent: never")


class Sent(Wire):
    message_ids: list[str]
    offsets: list[str]


class NativeMessage(Wire):
    id: str
    body: Any = Field(description="JSON value (json), string (text) or base64 (bytes)")
    content_type: str
    timestamp_ms: int
    attempts: int
    partition_key: str | None
    attributes: dict[str, str]
    lease_id: str


class PeekedMessage(Wire):
    id: str
    body: Any = Field(description="JSON value (json), string (text) or base64 (bytes)")
    content_type: str
    timestamp_ms: int
    attempts: int = Field(description="deliveries so far (a peek is not one)")
    attributes: dict[str, str]


class Peeked(Wire):
    messages: list[PeekedMessage]


class Acked(Wire):
    ackCount: int
    retryCount: int
    warnings: list[Any]


class BacklogSplit(Wire):
    available: int
    in_flight: int
    delayed: int


class Pulled(Wire):
    messages: list[NativeMessage]
    message_backlog_count: int
    backlog_exact: bool = Field(description="true: the count (and `backlog`) is exact; false: an estimate")
    backlog: BacklogSplit | None = None  # only when exact
    ack: Acked | None = None  # only when the pull carried acks


class Extended(Wire):
    extendedCount: int
    warnings: list[Any]


class RecordView(Wire):
    offset: str
    shard: int
    id: str
    body: Any = Field(description="JSON value (json), string (text) or base64 (bytes)")
    content_type: str
    timestamp_ms: int
    partition_key: str | None
    attributes: dict[str, str]
    region: str | None = Field(None, description="the shard's region (multi-region deployments only)")


class Records(Wire):
    records: list[RecordView]
    next_offset: str | None


class ShardRange(Wire):
    shard: int
    state: str
    parents: list[int]
    children: list[int]
    created_ms: int
    first_offset: str | None
    last_offset: str | None
    flushed_seq: int
    next_seq: int
    region: str | None = Field(None, description="where the shard is (multi-region deployments only)")
    unreachable: bool | None = Field(None, description="its region cannot be reached now: offsets unknown")


class Shards(Wire):
    shards: list[ShardRange]


class Group(Wire):
    name: str
    start_ms: int


class Groups(Wire):
    consumer_groups: list[Group]


class ConsumerView(Wire):
    id: str
    type: str = Field(description="lambda | webhook")
    url: str | None = None
    function_arn: str | None = None
    consumer_group: str
    max_batch_size: int
    max_batch_timeout_ms: int
    max_concurrency: int
    max_retries: int
    retry_delay_seconds: int
    created_ms: int


class Consumers(Wire):
    consumers: list[ConsumerView]


class Backlog(Wire):
    backlog_count: int
    backlog_bytes: int
    available: int = Field(description="never delivered, or due again: deliverable now (exact)")
    in_flight: int
    delayed: int
    oldest_message_timestamp_ms: int | None


class QueueMetrics(Backlog):
    queue_name: str
    paused: bool
    shard_count: int
    oldest_message_age_ms: int | None
    consumer_groups: dict[str, Backlog]
    shards: list[dict[str, Any]] = Field(
        description="per shard: state, next_seq, purge_floor, groups (multi-region: and its region)"
    )
    regions: dict[str, Backlog] | None = Field(
        None, description="multi-region deployments: the top-level figures per region"
    )


class Purged(Wire):
    queue_name: str
    shards_purged: int
    started_ms: int


class Redriven(Wire):
    moved: int
    remaining_in_source: int
    from_queue: str = Field(alias="from")
    to: str


class WebhookKey(Wire):
    """One public key that verifies signed webhook deliveries (RFC 8037: an Ed25519 OKP key)."""

    kty: str
    crv: str
    x: str
    kid: str
    use: str
    alg: str


class WebhookKeys(Wire):
    keys: list[WebhookKey]
