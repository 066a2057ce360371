"""Request bodies of the native `/v1` face. Powertools validates them and documents them in OpenAPI."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints

from lambdas.common.schemas import Strict
from sluice.engine.auth import MAX_TOKEN_LIFETIME_SECONDS
from sluice.models import (
    DEFAULT_GROUP,
    MAX_ATTRIBUTE_KEY_CHARS,
    MAX_ATTRIBUTE_VALUE_CHARS,
    MAX_ATTRIBUTES,
    MAX_DELAY_SECONDS,
    MAX_PARTITION_KEY_CHARS,
    MAX_PULL_BATCH,
    MAX_VISIBILITY_MS,
    MAX_WAIT_MS,
    RESERVED_ATTRIBUTE_PREFIX,
    ContentType,
)
from sluice.names import GroupName, QueueName, TokenBinding


def _integral(value: Any) -> Any:
    """JSON has one number type: 5.0 is 5 (Cloudflare's SDK types delays as floats). A fraction, a
    string or a boolean still fails the strict integer check after this."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


DelaySeconds = Annotated[int, BeforeValidator(_integral), Field(ge=0, le=MAX_DELAY_SECONDS)]


def _not_reserved(key: str) -> str:
    if key.startswith(RESERVED_ATTRIBUTE_PREFIX):
        raise ValueError(f"attribute names starting with {RESERVED_ATTRIBUTE_PREFIX!r} are reserved")
    return key


AttributeKey = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_ATTRIBUTE_KEY_CHARS), AfterValidator(_not_reserved)
]
AttributeValue = Annotated[str, StringConstraints(max_length=MAX_ATTRIBUTE_VALUE_CHARS)]


class CreateQueue(Strict):
    queue_name: QueueName
    settings: dict[str, Any] = Field(default_factory=dict, description="see QueueSettings; 400 10103 if bad")


class UpdateQueue(Strict):
    settings: dict[str, Any]


class SendMessage(Strict):
    body: Any = Field(description="required; any JSON value (json), a string (text) or base64 (bytes)")
    content_type: ContentType = "json"
    delay_seconds: DelaySeconds | None = None
    partition_key: str | None = Field(None, max_length=MAX_PARTITION_KEY_CHARS)
    attributes: dict[AttributeKey, AttributeValue] = Field(
        default_factory=dict,
        max_length=MAX_ATTRIBUTES,
        description="counted in the message's size with the body and partition key",
    )


class SendBatch(Strict):
    messages: list[SendMessage]  # the count limit is the engine's, with its own error code
    delay_seconds: DelaySeconds | None = None


class LeaseRef(Strict):
    lease_id: str = Field(min_length=1, max_length=512)


class Pull(Strict):
    batch_size: int = Field(5, ge=1, le=MAX_PULL_BATCH)
    visibility_timeout_ms: int | None = Field(None, ge=1, le=MAX_VISIBILITY_MS)
    visibility_timeout: int | None = Field(None, ge=1, le=MAX_VISIBILITY_MS, description="synonym, in ms")
    wait_time_ms: int = Field(0, ge=0, le=MAX_WAIT_MS)
    consumer_group: GroupName = DEFAULT_GROUP
    acks: list[LeaseRef] | None = Field(
        None,
        max_length=1000,
        description="leases to ack in the same state write as this pull (the answer's `ack` says how); "
        "as POST .../messages/ack, one write instead of two",
    )

    @property
    def visibility_ms(self) -> int | None:
        return self.visibility_timeout_ms or self.visibility_timeout


class Peek(Strict):
    batch_size: int = Field(5, ge=1, le=MAX_PULL_BATCH)
    consumer_group: GroupName = DEFAULT_GROUP


class RetryRef(LeaseRef):
    delay_seconds: DelaySeconds | None = None


class Ack(Strict):
    acks: list[LeaseRef] = Field(default_factory=list, max_length=1000)
    retries: list[RetryRef] = Field(default_factory=list, max_length=1000)


class ExtendLeases(Strict):
    lease_ids: list[Annotated[str, StringConstraints(min_length=1, max_length=512)]] = Field(
        min_length=1, max_length=1000
    )
    visibility_timeout_ms: int = Field(ge=1, le=MAX_VISIBILITY_MS)


class CreateToken(Strict):
    queue: TokenBinding = Field(description="a queue or stream name, or '*' for every queue")
    scopes: list[Literal["read", "write", "admin"]] = Field(min_length=1, max_length=3)
    expires_in_seconds: int | None = Field(
        None, ge=1, le=MAX_TOKEN_LIFETIME_SECONDS, description="refused from then on (401); absent: never"
    )


class CreateConsumer(Strict):
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
