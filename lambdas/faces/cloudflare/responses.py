"""Response bodies of the Cloudflare Queues face (the `result` of Cloudflare's envelope)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from lambdas.common.responses import Wire


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
