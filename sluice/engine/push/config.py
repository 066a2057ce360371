"""Push consumer configs: validation of a create request, the store (`Q#<queue>` / `CONSUMER#<id>`),
and how many workers a backlog wants."""

from __future__ import annotations

import math
import re
import secrets
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sluice import errors
from sluice.adapters.dynamo import ConditionFailed
from sluice.engine import keys
from sluice.engine.backend import Backend
from sluice.models import DEFAULT_GROUP, MAX_DELAY_SECONDS, MAX_PULL_BATCH, Queue
from sluice.names import ConsumerId, GroupName

MAX_CONSUMERS_PER_QUEUE = 10
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_ARN_RE = re.compile(
    r"^arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:function:[A-Za-z0-9_-]{1,64}(:[A-Za-z0-9_$-]+)?$"
)
_PYTHON_RE = re.compile(r"^python:[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class PushConsumer(BaseModel):
    """A push consumer of one queue: where batches go and how hard to push."""

    model_config = ConfigDict(extra="forbid")

    id: ConsumerId
    type: Literal["lambda", "webhook"]
    function_arn: str | None = None  # type lambda (locally also `python:module:function`)
    url: str | None = None  # type webhook
    consumer_group: GroupName = DEFAULT_GROUP
    max_batch_size: int = Field(10, ge=1, le=MAX_PULL_BATCH)
    max_batch_timeout_ms: int = Field(1_000, ge=0, le=20_000)
    max_concurrency: int = Field(4, ge=1, le=250)
    max_retries: int = Field(3, ge=0, le=100)
    retry_delay_seconds: int = Field(0, ge=0, le=MAX_DELAY_SECONDS)
    created_ms: int = 0

    def public(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


def parse_consumer(raw: dict[str, Any], *, allow_local: bool, now: int) -> PushConsumer:
    """Validate a create request; bad input raises `InvalidConsumer` and changes nothing."""
    body = {k: v for k, v in raw.items() if v is not None}
    body.setdefault("id", "c-" + secrets.token_hex(5))
    body["created_ms"] = now
    try:
        consumer = PushConsumer.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "consumer"
        raise errors.InvalidConsumer(f"invalid push consumer {where}: {first['msg']}") from exc
    validate_target(consumer, allow_local=allow_local)
    return consumer


def validate_target(consumer: PushConsumer, *, allow_local: bool) -> None:
    if consumer.type == "webhook":
        if not consumer.url or consumer.function_arn:
            raise errors.InvalidConsumer("a webhook consumer needs `url` (and no `function_arn`)")
        parts = urlsplit(consumer.url)
        local = allow_local and parts.scheme == "http" and parts.hostname in LOCAL_HOSTS
        if not (parts.scheme == "https" and parts.hostname) and not local:
            raise errors.InvalidConsumer(
                f"webhook url {consumer.url!r} must be an https:// URL"
                + (" (or http:// on 127.0.0.1 in the local runtime)" if allow_local else "")
            )
        return
    arn = consumer.function_arn or ""
    if consumer.url or not (_ARN_RE.match(arn) or (allow_local and _PYTHON_RE.match(arn))):
        raise errors.InvalidConsumer(
            f"a lambda consumer needs `function_arn`: a Lambda function ARN, got {arn!r}"
            + (" (locally also python:module:function)" if allow_local else "")
        )


def worker_count(backlog: int, consumer: PushConsumer, batches_per_worker: int) -> int:
    """Workers to run now: one per `batches_per_worker` full batches of backlog, up to max_concurrency."""
    if backlog <= 0:
        return 0
    return min(consumer.max_concurrency, math.ceil(backlog / consumer.max_batch_size / batches_per_worker))


_SAME_INCARNATION = f"{keys.INCARNATION} = :inc"  # the item exists and belongs to this incarnation


class ConsumerStore:
    """Consumer configs, one control item each, stamped with their queue's incarnation."""

    def __init__(self, backend: Backend) -> None:
        self.table = backend.control

    def create(self, queue: Queue, consumer: PushConsumer) -> PushConsumer:
        if consumer.consumer_group not in queue.groups:
            raise errors.ConsumerGroupNotFound(
                f"consumer group {consumer.consumer_group!r} not found on queue {queue.name!r}; "
                "create it first"
            )
        if len(self.list(queue)) >= MAX_CONSUMERS_PER_QUEUE:
            raise errors.InvalidConsumer(
                f"queue {queue.name!r} already has {MAX_CONSUMERS_PER_QUEUE} push consumers; delete one first"
            )
        try:
            self.table.put(
                _consumer_item(queue, consumer),
                condition=f"{keys.NEW_ITEM} OR {keys.INCARNATION} <> :inc",
                values={":inc": queue.incarnation},
            )
        except ConditionFailed as exc:
            raise errors.ConsumerAlreadyExists(
                f"push consumer {consumer.id!r} already exists on queue {queue.name!r}"
            ) from exc
        return consumer

    def list(self, queue: Queue) -> list[PushConsumer]:
        items = self.table.query(
            keys.queue_pk(queue.name), sk_prefix=keys.CONSUMER_SK_PREFIX, consistent=True
        )
        return [
            PushConsumer.model_validate_json(item[keys.DOC])
            for item in items
            if item.get(keys.INCARNATION) == queue.incarnation
        ]

    def get(self, queue: Queue, consumer_id: str) -> PushConsumer:
        item = self.table.get(keys.queue_pk(queue.name), keys.consumer_sk(consumer_id))
        if not item or item.get(keys.INCARNATION) != queue.incarnation:
            raise _not_found(queue, consumer_id)
        return PushConsumer.model_validate_json(item[keys.DOC])

    def replace(self, queue: Queue, consumer: PushConsumer) -> PushConsumer:
        """Overwrite an existing consumer's config (same id); running workers pick it up on their next run."""
        try:
            self.table.put(
                _consumer_item(queue, consumer),
                condition=_SAME_INCARNATION,
                values={":inc": queue.incarnation},
            )
        except ConditionFailed as exc:
            raise _not_found(queue, consumer.id) from exc
        return consumer

    def delete(self, queue: Queue, consumer_id: str) -> None:
        try:
            self.table.delete(
                keys.queue_pk(queue.name),
                keys.consumer_sk(consumer_id),
                condition=_SAME_INCARNATION,
                values={":inc": queue.incarnation},
            )
        except ConditionFailed as exc:
            raise _not_found(queue, consumer_id) from exc


def _not_found(queue: Queue, consumer_id: str) -> errors.ConsumerNotFound:
    """The one answer for a consumer that is absent or belongs to an earlier incarnation of `queue`."""
    return errors.ConsumerNotFound(f"push consumer {consumer_id!r} not found on queue {queue.name!r}")


def _consumer_item(queue: Queue, consumer: PushConsumer) -> dict[str, Any]:
    """A push consumer's config item, with its queue's incarnation (a re-created queue starts empty)."""
    return {
        keys.PK: keys.queue_pk(queue.name),
        keys.SK: keys.consumer_sk(consumer.id),
        keys.INCARNATION: queue.incarnation,
        keys.DOC: consumer.model_dump_json(),
    }
