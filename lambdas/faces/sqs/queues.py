"""SQS queues over Sluice queues: names and URLs, the face's own per-queue record, and SQS's queue
attributes mapped onto Sluice's settings.

Names: a Sluice queue `orders` is the SQS queue `orders`, or `orders.fifo` when it is ordered (SQS's rule:
a FIFO queue's name ends in `.fifo`; the suffix is not part of the Sluice name, so a standard and a FIFO
queue cannot share a base name here). A consumer group `analytics` of it is the SQS queue
`orders@analytics` (`orders@analytics.fifo`): a queue URL of its own, so an unchanged SQS client reads the
group. URLs are `<base>/000000000000/<sqs name>`, ARNs `arn:aws:sqs:<region>:000000000000:<sqs name>`.

What SQS keeps and Sluice's settings do not (ReceiveMessageWaitTimeSeconds, FIFO deduplication options,
tags, the last change, move tasks) lives in one control item per queue, `Q#<queue>` / `SQS`, scoped to
the queue's incarnation like the Cloudflare face's consumer record, and cached per container for
`CACHE_SECONDS` (SQS itself says attribute changes take up to 60 s to apply everywhere).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from lambdas.faces.sqs.errors import SqsError, invalid, no_queue
from sluice.adapters.dynamo import Table
from sluice.constants import SQS_ACCOUNT_ID
from sluice.engine import keys
from sluice.models import DEFAULT_GROUP, MAX_DELAY_SECONDS, MAX_VISIBILITY_MS, Queue
from sluice.names import GROUP, QUEUE

FIFO_SUFFIX = ".fifo"
GROUP_MARK = "@"
SQS_SK = "SQS"
CACHE_SECONDS = 30.0
MAX_TAGS = 50
SQS_MAX_MESSAGE_BYTES = 1_048_576  # SQS's default and largest MaximumMessageSize
NO_DLQ_MAX_RECEIVES = 100  # no RedrivePolicy: SQS keeps redelivering; Sluice's largest max_retries


@dataclass(frozen=True)
class Target:
    """What a queue URL or name addresses: a queue, one of its consumer groups, FIFO or not."""

    queue: str
    group: str
    fifo: bool

    @property
    def is_group(self) -> bool:
        return self.group != DEFAULT_GROUP


def sqs_name(queue: str, group: str, fifo: bool) -> str:
    base = queue if group == DEFAULT_GROUP else f"{queue}{GROUP_MARK}{group}"
    return base + (FIFO_SUFFIX if fifo else "")


def _split(name: str) -> tuple[str, str | None, bool]:
    """(queue, group or None, fifo) of an SQS name, unchecked."""
    fifo = name.endswith(FIFO_SUFFIX)
    queue, mark, group = (name[: -len(FIFO_SUFFIX)] if fifo else name).partition(GROUP_MARK)
    return queue, group if mark else None, fifo


def _group_ok(group: str | None) -> bool:
    return group is None or (GROUP.ok(group) and group != DEFAULT_GROUP)


def parse_name(name: str) -> Target:
    """The target an SQS queue name names; QueueDoesNotExist for a name no Sluice queue can have."""
    queue, group, fifo = _split(name)
    if not QUEUE.ok(queue) or not _group_ok(group):
        raise no_queue()
    return Target(queue, group or DEFAULT_GROUP, fifo)


def name_for_create(name: str) -> Target:
    """CreateQueue's name, with the reason when no Sluice queue can be named so."""
    queue, group, fifo = _split(name)
    if not QUEUE.ok(queue):
        raise invalid(
            f"Can only include alphanumeric characters, hyphens, or underscores. {QUEUE.message(queue)}"
        )
    if not _group_ok(group):
        raise invalid(GROUP.message(group))
    return Target(queue, group or DEFAULT_GROUP, fifo)


def parse_url(url: str) -> Target:
    """A QueueUrl (any host: clients configured with another endpoint still name the queue), a path,
    or a bare queue name (SQS accepts one)."""
    return parse_name(url.rstrip("/").rsplit("/", 1)[-1])


def queue_url(base: str, name: str) -> str:
    return f"{base}/{SQS_ACCOUNT_ID}/{name}"


def queue_arn(region: str, name: str) -> str:
    return f"arn:aws:sqs:{region}:{SQS_ACCOUNT_ID}:{name}"


def parse_arn(arn: str) -> Target:
    parts = arn.split(":")
    if len(parts) != 6 or parts[:3] != ["arn", "aws", "sqs"]:
        raise invalid(f"{arn!r} is not an SQS queue ARN")
    return parse_name(parts[5])


def check_target(queue: Queue, target: Target) -> None:
    """The target exists as addressed: the `.fifo` suffix matches the queue's kind, the group exists."""
    if target.fifo != queue.settings.ordered or target.group not in queue.groups:
        raise no_queue()
    if queue.stream_name or queue.open_stream:
        raise no_queue()  # a stream face's queue is that face's business


# --- the face's per-queue record -----------------------------------------------------------------------


class MoveTask(BaseModel):
    handle: str
    status: str
    source_arn: str
    destination_arn: str | None = None
    started_ms: int
    moved: int
    to_move: int | None = None
    failure: str | None = None


class SqsQueueMeta(BaseModel):
    receive_wait_seconds: int = 0
    content_based_deduplication: bool = False
    deduplication_scope: str = "queue"
    fifo_throughput_limit: str = "perQueue"
    redrive_allow_policy: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    last_modified_ms: int | None = None
    move_tasks: list[MoveTask] = Field(default_factory=list)  # newest first, at most 10


class MetaStore:
    def __init__(self, control: Table) -> None:
        self.control = control
        self._cache: dict[tuple[str, str], tuple[float, SqsQueueMeta]] = {}
        self._lock = threading.Lock()

    def get(self, queue: Queue, *, fresh: bool = False) -> SqsQueueMeta:
        key = (queue.name, queue.incarnation)
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(key)
        if cached and cached[0] > now and not fresh:
            return cached[1]
        item = self.control.get(keys.queue_pk(queue.name), SQS_SK)
        meta = (
            SqsQueueMeta.model_validate_json(item[keys.DOC])
            if item and item.get(keys.INCARNATION) == queue.incarnation
            else SqsQueueMeta()
        )
        with self._lock:
            self._cache[key] = (now + CACHE_SECONDS, meta)
        return meta

    def put(self, queue: Queue, meta: SqsQueueMeta) -> None:
        self.control.put(
            {
                keys.PK: keys.queue_pk(queue.name),
                keys.SK: SQS_SK,
                keys.INCARNATION: queue.incarnation,
                keys.DOC: meta.model_dump_json(exclude_defaults=True),
            }
        )
        with self._lock:
            self._cache[(queue.name, queue.incarnation)] = (time.monotonic() + CACHE_SECONDS, meta)


# --- attributes --------------------------------------------------------------------------------------------

READ_ONLY = {
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
    "CreatedTimestamp",
    "LastModifiedTimestamp",
    "QueueArn",
}
SETTABLE = {
    "DelaySeconds",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "ReceiveMessageWaitTimeSeconds",
    "VisibilityTimeout",
    "RedrivePolicy",
    "RedriveAllowPolicy",
    "SqsManagedSseEnabled",
    "ContentBasedDeduplication",
    "DeduplicationScope",
    "FifoThroughputLimit",
}
FIFO_ONLY = {"ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit"}
_NO_KMS = "KMS keys are not supported: data is encrypted at rest with AWS owned keys"
REFUSED = {
    "Policy": "queue policies are not supported: access is Sluice token scopes (docs/api.md)",
    "KmsMasterKeyId": _NO_KMS,
    "KmsDataKeyReusePeriodSeconds": _NO_KMS,
}


def _int(name: str, value: str, low: int, high: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise SqsError("InvalidAttributeValue", f"Invalid value for the parameter {name}.") from None
    if not low <= number <= high:
        raise SqsError(
            "InvalidAttributeValue", f"Invalid value for the parameter {name}: it must be {low} to {high}."
        )
    return number


def _bool(name: str, value: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise SqsError("InvalidAttributeValue", f"Invalid value for the parameter {name}: true or false.")
    return value.lower() == "true"


def apply_attributes(
    attributes: dict[str, str], *, fifo: bool, meta: SqsQueueMeta, creating: bool
) -> dict[str, Any]:
    """Sluice settings (a `QueueSettings` patch) for SQS attributes, the rest applied to `meta`. Raises
    before anything is written: a refused attribute changes nothing."""
    settings: dict[str, Any] = {}
    for name, value in attributes.items():
        if name in REFUSED:
            raise SqsError("InvalidAttributeName", f"Unsupported attribute {name}: {REFUSED[name]}.")
        if name == "FifoQueue":
            if not creating:
                raise SqsError("InvalidAttributeName", "FifoQueue is fixed when a queue is created.")
            if _bool(name, value) != fifo:
                raise SqsError(
                    "InvalidAttributeValue", "FifoQueue must be true exactly when the name ends in .fifo."
                )
            continue
        if name in READ_ONLY or name not in SETTABLE:
            raise SqsError("InvalidAttributeName", f"Unknown Attribute {name}.")
        if name in FIFO_ONLY and not fifo:
            raise SqsError("InvalidAttributeName", f"{name} applies to FIFO queues only.")
        if name == "DelaySeconds":  # SQS: at most 900; Sluice delays up to a day
            settings["delivery_delay_seconds"] = _int(name, value, 0, MAX_DELAY_SECONDS)
        elif name == "MaximumMessageSize":
            settings["max_message_bytes"] = _int(name, value, 1024, SQS_MAX_MESSAGE_BYTES)
        elif name == "MessageRetentionPeriod":
            settings["retention_seconds"] = _int(name, value, 60, 1_209_600)
        elif name == "VisibilityTimeout":
            seconds = _int(name, value, 0, MAX_VISIBILITY_MS // 1000)
            settings["visibility_timeout_ms"] = max(1, seconds * 1000)
        elif name == "ReceiveMessageWaitTimeSeconds":
            meta.receive_wait_seconds = _int(name, value, 0, 20)
        elif name == "RedrivePolicy":
            settings |= _redrive_policy(value)
        elif name == "RedriveAllowPolicy":
            meta.redrive_allow_policy = _redrive_allow_policy(value)
        elif name == "SqsManagedSseEnabled":
            if not _bool(name, value):
                raise SqsError("InvalidAttributeValue", "Encryption at rest is always on (AWS owned keys).")
        elif name == "ContentBasedDeduplication":
            meta.content_based_deduplication = _bool(name, value)
        elif name == "DeduplicationScope":
            meta.deduplication_scope = _choice(name, value, ("queue", "messageGroup"))
        elif name == "FifoThroughputLimit":
            meta.fifo_throughput_limit = _choice(name, value, ("perQueue", "perMessageGroupId"))
    return settings


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise SqsError(
            "InvalidAttributeValue", f"Invalid value for the parameter {name}: {' or '.join(allowed)}."
        )
    return value


def _redrive_policy(value: str) -> dict[str, Any]:
    """`{"deadLetterTargetArn", "maxReceiveCount"}` → dead_letter_queue and max_retries (Sluice dead-letters
    a message once it was delivered max_retries times: SQS's maxReceiveCount). `""` removes it."""
    if value == "":
        return {"dead_letter_queue": None, "max_retries": NO_DLQ_MAX_RECEIVES}
    try:
        doc = json.loads(value)
        target = parse_arn(str(doc["deadLetterTargetArn"]))
        count = int(doc["maxReceiveCount"])
    except (ValueError, KeyError, TypeError, SqsError):
        raise SqsError(
            "InvalidAttributeValue",
            'Invalid value for the parameter RedrivePolicy: {"deadLetterTargetArn": "<queue ARN>", '
            '"maxReceiveCount": 1-100}.',
        ) from None
    if target.is_group or not 1 <= count <= NO_DLQ_MAX_RECEIVES:
        raise SqsError(
            "InvalidAttributeValue",
            "Invalid value for the parameter RedrivePolicy: the target must be a queue (not a group) and "
            f"maxReceiveCount 1 to {NO_DLQ_MAX_RECEIVES}.",
        )
    return {"dead_letter_queue": target.queue, "max_retries": count}


def _redrive_allow_policy(value: str) -> str:
    try:
        doc = json.loads(value)
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or doc.get("redrivePermission") != "allowAll":
        raise SqsError(
            "InvalidAttributeValue",
            'RedriveAllowPolicy: only {"redrivePermission": "allowAll"} is supported (any queue may use '
            "this one as its dead letter queue).",
        )
    return value


def queue_attributes(
    queue: Queue,
    meta: SqsQueueMeta,
    target: Target,
    counts: dict[str, int],
    region: str,
) -> dict[str, str]:
    """Every attribute of the queue (GetQueueAttributes filters), as SQS names and formats them."""
    settings = queue.settings
    attributes = {
        "QueueArn": queue_arn(region, sqs_name(queue.name, target.group, target.fifo)),
        "ApproximateNumberOfMessages": str(counts["visible"]),
        "ApproximateNumberOfMessagesNotVisible": str(counts["in_flight"]),
        "ApproximateNumberOfMessagesDelayed": str(counts["delayed"]),
        "CreatedTimestamp": str(queue.created_ms // 1000),
        "LastModifiedTimestamp": str((meta.last_modified_ms or queue.created_ms) // 1000),
        "VisibilityTimeout": str(settings.visibility_timeout_ms // 1000),
        "MaximumMessageSize": str(settings.max_message_bytes),
        "MessageRetentionPeriod": str(settings.retention_seconds),
        "DelaySeconds": str(settings.delivery_delay_seconds),
        "ReceiveMessageWaitTimeSeconds": str(meta.receive_wait_seconds),
        "SqsManagedSseEnabled": "true",
    }
    if settings.dead_letter_queue:
        policy = {
            "deadLetterTargetArn": queue_arn(
                region, sqs_name(settings.dead_letter_queue, DEFAULT_GROUP, False)
            ),
            "maxReceiveCount": settings.max_retries,
        }
        attributes["RedrivePolicy"] = json.dumps(policy, separators=(",", ":"))
    if meta.redrive_allow_policy:
        attributes["RedriveAllowPolicy"] = meta.redrive_allow_policy
    if target.fifo:
        attributes |= {
            "FifoQueue": "true",
            "ContentBasedDeduplication": "true" if meta.content_based_deduplication else "false",
            "DeduplicationScope": meta.deduplication_scope,
            "FifoThroughputLimit": meta.fifo_throughput_limit,
        }
    return attributes


def visible_counts(metrics: dict[str, Any], group: str) -> dict[str, int]:
    """SQS's three counts from a group's exact backlog figures (issue 22): visible = available now (never
    delivered, or due again), not visible = in flight, delayed; they add up to the unacked backlog."""
    figures = metrics["consumer_groups"][group] if "consumer_groups" in metrics else metrics
    return {
        "visible": int(figures["available"]),
        "in_flight": int(figures["in_flight"]),
        "delayed": int(figures["delayed"]),
    }


def check_tags(tags: dict[str, str]) -> None:
    if len(tags) > MAX_TAGS:
        raise invalid(f"Too many tags: a queue has at most {MAX_TAGS}.")
    for key, value in tags.items():
        if not 1 <= len(key) <= 128 or len(value) > 256 or key.startswith("aws:"):
            raise invalid(f"Tag {key!r}: keys are 1-128 characters not starting with aws:, values 0-256.")
