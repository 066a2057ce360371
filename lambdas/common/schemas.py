"""Request bodies of the native `/v1` face. Powertools validates them and documents them in OpenAPI."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sluice.models import (
    DEFAULT_GROUP,
    GROUP_NAME_PATTERN,
    MAX_DELAY_SECONDS,
    MAX_PULL_BATCH,
    MAX_VISIBILITY_MS,
    MAX_WAIT_MS,
    ContentType,
)


class Lenient(BaseModel):
    """Unknown fields are ignored, as Cloudflare's and SQS's clients expect."""

    model_config = ConfigDict(extra="ignore")


class CreateQueue(Lenient):
    queue_name: str = Field(min_length=1)
    settings: dict[str, Any] = Field(default_factory=dict)


class UpdateQueue(Lenient):
    settings: dict[str, Any]


class SendMessage(Lenient):
    body: Any = None
    content_type: ContentType = "json"
    delay_seconds: int | None = Field(None, ge=0, le=MAX_DELAY_SECONDS)
    partition_key: str | None = Field(None, max_length=256)
    attributes: dict[str, str] = Field(default_factory=dict)


class SendBatch(Lenient):
    messages: list[SendMessage]  # the count limit is the engine's, with its own error code
    delay_seconds: int | None = Field(None, ge=0, le=MAX_DELAY_SECONDS)


class Pull(Lenient):
    batch_size: int = Field(5, ge=1, le=MAX_PULL_BATCH)
    visibility_timeout_ms: int | None = Field(None, ge=1, le=MAX_VISIBILITY_MS)
    visibility_timeout: int | None = Field(None, ge=1, le=MAX_VISIBILITY_MS, description="synonym, in ms")
    wait_time_ms: int = Field(0, ge=0, le=MAX_WAIT_MS)
    consumer_group: str = Field(DEFAULT_GROUP, pattern=GROUP_NAME_PATTERN)

    @property
    def visibility_ms(self) -> int | None:
        return self.visibility_timeout_ms or self.visibility_timeout


class LeaseRef(Lenient):
    lease_id: str = Field(min_length=1, max_length=512)


class RetryRef(LeaseRef):
    delay_seconds: int | None = Field(None, ge=0, le=MAX_DELAY_SECONDS)


class Ack(Lenient):
    acks: list[LeaseRef] = Field(default_factory=list, max_length=1000)
    retries: list[RetryRef] = Field(default_factory=list, max_length=1000)


class ExtendLeases(Lenient):
    lease_ids: list[str] = Field(min_length=1, max_length=1000)
    visibility_timeout_ms: int = Field(ge=1, le=MAX_VISIBILITY_MS)


class CreateToken(Lenient):
    queue: str = Field(min_length=1)
    scopes: list[str] = Field(min_length=1)


class CreateConsumer(Lenient):
    """A push consumer; bounds are checked by the engine (`sluice.engine.push`), with error 10124."""

    id: str | None = Field(None, description="1-63 of [A-Za-z0-9_-]; generated when absent")
    type: str = Field(description="lambda | webhook")
    function_arn: str | None = Field(None, description="type lambda: the function's ARN")
    url: str | None = Field(None, description="type webhook: an https:// URL")
    consumer_group: str | None = None
    max_batch_size: int | None = Field(None, description="1..100 [10]")
    max_batch_timeout_ms: int | None = Field(None, description="0..20000 [1000]")
    max_concurrency: int | None = Field(None, description="1..250 [4]")
    max_retries: int | None = Field(None, description="0..100 [3]")
    retry_delay_seconds: int | None = Field(None, description="0..86400 [0]")
