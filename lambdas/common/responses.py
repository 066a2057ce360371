"""Response bodies of every JSON route, as pydantic models: the routes' return annotations
(`Response[Envelope[QueueView]]`), so Powertools documents them in OpenAPI and checks each answer
against them before it leaves.

`Wire` models keep a body's keys exactly as the route built them: a key the route left out stays out
(no `null` appears) and a key not declared here passes through, so the check never reshapes an answer."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from sluice.models import QueueSettings


class Wire(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    @model_serializer(mode="wrap")
    def _as_sent(self, handler: SerializerFunctionWrapHandler):
        # No return annotation: pydantic then documents the model's own fields, not `dict[str, Any]`.
        data = handler(self)
        kept = {f.alias or n for n, f in type(self).model_fields.items() if n in self.model_fields_set}
        return {k: v for k, v in data.items() if k in kept or k in (self.model_extra or {})}


T = TypeVar("T")


class ErrorItem(Wire):
    code: int
    message: str


class Envelope(Wire, Generic[T]):
    """Every native and Cloudflare answer: Cloudflare's v4 envelope."""

    success: bool
    errors: list[ErrorItem]
    messages: list[Any]
    result: T


# --- the native face (/v1) -----------------------------------------------------------------------------


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


class TokenView(Wire):
    token_id: str
    queue: str
    scopes: list[str]
    created_on: int = Field(description="epoch milliseconds")


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


class Acked(Wire):
    ackCount: int
    retryCount: int
    warnings: list[Any]


class Pulled(Wire):
    messages: list[NativeMessage]
    message_backlog_count: int
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


# --- the Cloudflare face (/client/v4) ------------------------------------------------------------------


class CfMetrics(Wire):
    backlog_count: int
    backlog_bytes: int
    oldest_message_timestamp_ms: int | None = None


class CfMetricsHolder(Wire):
    metrics: CfMetrics


class CfSent(Wire):
    metadata: CfMetricsHolder


class CfConsumerView(Wire):
    consumer_id: str
    created_on: str
    queue_id: str
    queue_name: str
    dead_letter_queue: str
    type: str = Field(description="worker | http_pull")
    script: str | None = None
    script_name: str | None = None
    settings: dict[str, Any]


class CfQueueSettingsView(Wire):
    delivery_delay: int
    delivery_paused: bool
    message_retention_period: int


class CfQueueView(Wire):
    queue_id: str
    queue_name: str
    created_on: str
    producers: list[Any]
    producers_total_count: int
    consumers: list[CfConsumerView] | None = None
    consumers_total_count: int | None = None
    settings: CfQueueSettingsView


class CfMessageView(Wire):
    id: str
    body: str = Field(description="base64 of the message's bytes")
    timestamp_ms: int
    attempts: int
    metadata: dict[str, str]
    lease_id: str | None = Field(None, description="pull")
    ref: str | None = Field(None, description="peek: not leased")


class CfPulled(Wire):
    messages: list[CfMessageView]
    message_backlog_count: int
    metadata: CfMetricsHolder


class CfPeeked(Wire):
    messages: list[CfMessageView]


class CfAcked(Wire):
    ackCount: int
    retryCount: int
    warnings: Any


class CfPurgedRefs(Wire):
    errors: list[Any]
    warnings: Any


class CfPurgeStatus(Wire):
    started_at: str | None
    completed: str | None


# --- the Durable Streams face (/streams/{name}); bodies written by the routes themselves ----------------


class StreamAppended(Wire):
    offsets: list[str] | None = Field(None, description="one per record appended")
    version: int | None = Field(None, description="an empty `records` bumps the version only")


class StreamRecord(Wire):
    offset: str
    data: Any


class StreamRecords(Wire):
    records: list[StreamRecord]


class StreamDeleted(Wire):
    success: bool


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


def body_of(model: type[BaseModel]) -> dict[int, OpenAPIResponse]:
    """OpenAPI `responses` of a route that writes its JSON body itself (the Durable Streams face embeds
    stored record text without a parse and dump): the shape is documented, not checked on the way out."""
    return {200: {"description": "Successful Response", "content": {"application/json": {"model": model}}}}
