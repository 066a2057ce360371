"""Push consumers: configs, worker slots, and the worker loop (pull a batch → call the target → ack).

The coordinator starts workers in proportion to the backlog (`worker_count`); each worker first claims
a numbered slot (a control item with an expiry), so at most `max_concurrency` run at once even when
invocations overlap, and a crashed worker's slot frees itself. Targets are plain callables
(`sluice.adapters.targets` builds them: webhook, Lambda, in-process Python): a target that returns
delivers the batch, one that raises fails it, and the batch is retried (then dead-lettered after
`max_retries` deliveries, as pull consumers' messages are).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import re
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sluice import errors
from sluice.adapters.dynamo import ConditionFailed
from sluice.codec import body_to_native
from sluice.constants import LAMBDA_SYNC_PAYLOAD_BYTES
from sluice.engine import keys
from sluice.engine.backend import Backend
from sluice.engine.consume import RetryRequest
from sluice.models import (
    DEFAULT_GROUP,
    MAX_DELAY_SECONDS,
    MAX_PULL_BATCH,
    MAX_REQUEST_BYTES,
    Delivery,
    Queue,
)
from sluice.names import ConsumerId, GroupName

log = logging.getLogger(__name__)

CONSUMER_SK_PREFIX = "CONSUMER#"
SLOT_SK_PREFIX = "CSLOT#"
MAX_CONSUMERS_PER_QUEUE = 10
SLOT_TTL_MS = 60_000  # a worker renews its slot at half this; a crashed worker's slot frees after it
STOP_MARGIN_MS = 5_000  # stop taking batches this long before the invocation's deadline
# A pushed batch travels as one Lambda invocation payload (6 MB synchronous) or one webhook request: it
# is cut at the pulls' 5 MB budget. The engine always admits a pull's first message, so another pull is
# made only while a largest message (1 MiB body, base64 and escaping) still fits.
PUSH_PAYLOAD_BYTES = LAMBDA_SYNC_PAYLOAD_BYTES - 1_000_000
LARGEST_PUSHED_MESSAGE_BYTES = 2 * MAX_REQUEST_BYTES
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_ARN_RE = re.compile(
    r"^arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:function:[A-Za-z0-9_-]{1,64}(:[A-Za-z0-9_$-]+)?$"
)
_PYTHON_RE = re.compile(r"^python:[A-Za-z_][\w.]*(:[A-Za-z_]\w*)?$")

Target = Callable[[dict[str, Any]], None]


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


class ConsumerStore:
    """Consumer configs (`Q#<queue>` / `CONSUMER#<id>`) and worker slots (`CSLOT#<id>#<slot>`)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
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
                condition="attribute_not_exists(pk) OR inc <> :inc",
                values={":inc": queue.incarnation},
            )
        except ConditionFailed as exc:
            raise errors.ConsumerAlreadyExists(
                f"push consumer {consumer.id!r} already exists on queue {queue.name!r}"
            ) from exc
        return consumer

    def list(self, queue: Queue) -> list[PushConsumer]:
        items = self.table.query(keys.queue_pk(queue.name), sk_prefix=CONSUMER_SK_PREFIX, consistent=True)
        return [
            PushConsumer.model_validate_json(item["doc"])
            for item in items
            if item.get("inc") == queue.incarnation
        ]

    def get(self, queue: Queue, consumer_id: str) -> PushConsumer:
        item = self.table.get(keys.queue_pk(queue.name), CONSUMER_SK_PREFIX + consumer_id)
        if not item or item.get("inc") != queue.incarnation:
            raise errors.ConsumerNotFound(f"push consumer {consumer_id!r} not found on queue {queue.name!r}")
        return PushConsumer.model_validate_json(item["doc"])

    def replace(self, queue: Queue, consumer: PushConsumer) -> PushConsumer:
        """Overwrite an existing consumer's config (same id); running workers pick it up on their next run."""
        try:
            self.table.put(
                _consumer_item(queue, consumer),
                condition="inc = :inc",
                values={":inc": queue.incarnation},
            )
        except ConditionFailed as exc:
            raise errors.ConsumerNotFound(
                f"push consumer {consumer.id!r} not found on queue {queue.name!r}"
            ) from exc
        return consumer

    def delete(self, queue: Queue, consumer_id: str) -> None:
        try:
            self.table.delete(
                keys.queue_pk(queue.name),
                CONSUMER_SK_PREFIX + consumer_id,
                condition="inc = :inc",
                values={":inc": queue.incarnation},
            )
        except ConditionFailed as exc:
            raise errors.ConsumerNotFound(
                f"push consumer {consumer_id!r} not found on queue {queue.name!r}"
            ) from exc

    # -- worker slots --

    def _slot_sk(self, consumer_id: str, slot: int) -> str:
        return f"{SLOT_SK_PREFIX}{consumer_id}#{slot:04d}"

    def held_slots(self, queue: Queue, consumer_id: str, now: int) -> set[int]:
        items = self.table.query(
            keys.queue_pk(queue.name), sk_prefix=f"{SLOT_SK_PREFIX}{consumer_id}#", consistent=True
        )
        return {int(item["sk"].rsplit("#", 1)[1]) for item in items if item.get("exp_ms", 0) >= now}

    def claim(self, queue: Queue, consumer_id: str, slot: int, run_id: str, now: int) -> bool:
        try:
            self.table.put(
                {
                    "pk": keys.queue_pk(queue.name),
                    "sk": self._slot_sk(consumer_id, slot),
                    "holder": run_id,
                    "exp_ms": now + SLOT_TTL_MS,
                    "exp": (now + SLOT_TTL_MS) // 1000 + 3600,
                },
                condition="attribute_not_exists(pk) OR exp_ms < :now",
                values={":now": now},
            )
        except ConditionFailed:
            return False
        return True

    def renew(self, queue: Queue, consumer_id: str, slot: int, run_id: str, now: int) -> bool:
        try:
            self.table.update(
                keys.queue_pk(queue.name),
                self._slot_sk(consumer_id, slot),
                "SET exp_ms = :e",
                condition="holder = :me",
                values={":e": now + SLOT_TTL_MS, ":me": run_id},
            )
        except ConditionFailed:
            return False
        return True

    def release(self, queue: Queue, consumer_id: str, slot: int, run_id: str) -> None:
        with contextlib.suppress(ConditionFailed):
            self.table.delete(
                keys.queue_pk(queue.name),
                self._slot_sk(consumer_id, slot),
                condition="holder = :me",
                values={":me": run_id},
            )


# --- the worker --------------------------------------------------------------------------------------------


@dataclass
class WorkerReport:
    queue: str
    consumer_id: str
    slot: int
    batches: int = 0
    delivered: int = 0
    failed: int = 0
    stopped: str = ""


def push_message(d: Delivery) -> dict[str, Any]:
    """What a target receives per message: the native pull shape without the lease."""
    return {
        "id": d.id,
        "body": body_to_native(d.body, d.content_type),
        "content_type": d.content_type,
        "timestamp_ms": d.timestamp_ms,
        "attempts": d.attempts,
        "partition_key": d.partition_key,
        "attributes": d.attributes,
    }


def run_worker(
    engine: Any,
    queue_name: str,
    consumer_id: str,
    slot: int,
    target_for: Callable[[PushConsumer], Target],
    remaining_ms: Callable[[], int],
) -> WorkerReport:
    """Claim `slot`, then pull → deliver → ack until the group's backlog is empty or time runs out."""
    report = WorkerReport(queue_name, consumer_id, slot)
    store = ConsumerStore(engine.backend)
    clock = engine.backend.clock
    queue = engine.queues.get(queue_name)
    consumer = store.get(queue, consumer_id)
    run_id = uuid.uuid4().hex
    if not store.claim(queue, consumer.id, slot, run_id, clock()):
        report.stopped = "slot held by another worker"
        return report
    target = target_for(consumer)
    renewed = clock()
    try:
        while True:
            if remaining_ms() < STOP_MARGIN_MS:
                report.stopped = "invocation time running out"
                break
            if clock() - renewed > SLOT_TTL_MS // 2:
                if not store.renew(queue, consumer.id, slot, run_id, clock()):
                    report.stopped = "slot lost"
                    break
                renewed = clock()
            batch = _collect(engine, queue_name, consumer, remaining_ms)
            if not batch:
                report.stopped = "backlog empty"
                break
            report.batches += 1
            payload = {
                "queue": queue_name,
                "consumer_id": consumer.id,
                "messages": [push_message(d) for d in batch],
            }
            try:
                target(payload)
            except Exception as exc:
                report.failed += len(batch)
                log.warning("push consumer %s: target failed (%s); retrying %d", consumer.id, exc, len(batch))
                engine.consumer.ack(
                    queue_name,
                    [],
                    [RetryRequest(d.lease_id, consumer.retry_delay_seconds) for d in batch],
                    max_retries=consumer.max_retries,
                )
                continue
            engine.consumer.ack(queue_name, [d.lease_id for d in batch], max_retries=consumer.max_retries)
            report.delivered += len(batch)
    finally:
        store.release(queue, consumer.id, slot, run_id)
    return report


def _collect(
    engine: Any, queue_name: str, consumer: PushConsumer, remaining_ms: Callable[[], int]
) -> list[Delivery]:
    """Up to max_batch_size messages; a partial batch waits up to max_batch_timeout_ms to fill."""
    batch: list[Delivery] = []
    used = 0
    deadline = time.monotonic() + consumer.max_batch_timeout_ms / 1000
    while len(batch) < consumer.max_batch_size and used <= PUSH_PAYLOAD_BYTES - LARGEST_PUSHED_MESSAGE_BYTES:
        result = engine.consumer.pull(
            queue_name,
            group=consumer.consumer_group,
            batch_size=consumer.max_batch_size - len(batch),
            size_of=_pushed_size,
            max_bytes=PUSH_PAYLOAD_BYTES - used,
        )
        batch += result.messages
        used += sum(_pushed_size(d) for d in result.messages)
        if not result.messages and not batch:
            return batch  # nothing there: the worker stops, the coordinator starts one when needed
        if len(batch) >= consumer.max_batch_size or time.monotonic() >= deadline:
            break
        if remaining_ms() < STOP_MARGIN_MS:
            break
        if not result.messages:
            time.sleep(0.05)
    return batch


def _pushed_size(d: Delivery) -> int:
    return len(json.dumps(push_message(d), separators=(",", ":"))) + 1


def _consumer_item(queue: Queue, consumer: PushConsumer) -> dict[str, Any]:
    """A push consumer's config item, with its queue's incarnation (a re-created queue starts empty)."""
    return {
        "pk": keys.queue_pk(queue.name),
        "sk": CONSUMER_SK_PREFIX + consumer.id,
        "inc": queue.incarnation,
        "doc": consumer.model_dump_json(),
    }
