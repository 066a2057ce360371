"""Request bodies of the Cloudflare Queues face (validated by Powertools, documented in OpenAPI)."""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lambdas.common.schemas import Strict
from lambdas.faces.native.schemas import SendMessage
from sluice.models import MAX_DELAY_SECONDS, MAX_PULL_BATCH, MAX_VISIBILITY_MS, ContentType


class Lenient(BaseModel):
    """Unknown fields ignored, integers coerced: the Cloudflare face's pull and ack bodies
    use it; moving it to `Strict` is that face's call."""

    model_config = ConfigDict(extra="ignore")


def seconds(value: float | None) -> int | None:
    """Cloudflare types delays as numbers; Sluice schedules in whole seconds, rounded up, so a message
    is never delivered before the delay asked for (1.5 → 2)."""
    return None if value is None else math.ceil(value)


class CfMessage(Strict):
    """Strict like every send body (unknown fields and wrong types refused), fractional delays kept."""

    body: Any = Field(description="required (JSON null is a body); `{}` without it is refused")
    content_type: ContentType = "json"
    delay_seconds: float | None = Field(None, ge=0, le=MAX_DELAY_SECONDS)

    def to_send(self, default_delay: float | None = None) -> SendMessage:
        delay = self.delay_seconds if self.delay_seconds is not None else default_delay
        return SendMessage(body=self.body, content_type=self.content_type, delay_seconds=seconds(delay))


class CfBatch(Strict):
    messages: list[CfMessage] = Field(min_length=1)
    delay_seconds: float | None = Field(None, ge=0, le=MAX_DELAY_SECONDS)


class CfPull(Lenient):
    """An empty body means the defaults (Cloudflare's API reference sends none)."""

    batch_size: int | None = Field(None, ge=1, le=MAX_PULL_BATCH)
    visibility_timeout_ms: int | None = Field(None, ge=1, le=MAX_VISIBILITY_MS)
    visibility_timeout: int | None = Field(None, ge=1, le=MAX_VISIBILITY_MS, description="synonym, in ms")


class CfPeek(Lenient):
    batch_size: int = Field(5, ge=1, le=MAX_PULL_BATCH)


class CfRef(Lenient):
    ref: str = Field(min_length=1, max_length=512)


class CfPurgeRefs(Lenient):
    refs: list[CfRef] = Field(min_length=1, max_length=1000)


class CfLease(Lenient):
    lease_id: str = Field(min_length=1, max_length=512)


class CfRetry(CfLease):
    delay_seconds: float | None = Field(None, ge=0, le=MAX_DELAY_SECONDS)


class CfAck(Lenient):
    acks: list[CfLease] = Field(default_factory=list, max_length=1000)
    retries: list[CfRetry] = Field(default_factory=list, max_length=1000)
