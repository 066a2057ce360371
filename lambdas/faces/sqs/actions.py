"""Every SQS action, on the engine. One function per action: parameters in the model's shape in, the
output shape out (docs/api.md, "SQS face", has the table of what each maps to).

Access: every action names its queue, and the caller's token (the access key's) needs the scope the
native face would ask for the same thing: read to receive or look, read+write to delete or change
visibility, write to send, admin to create, delete, purge, set attributes, tag and move messages. A
queue outside the token's binding is AccessDenied before anything is read, so it says nothing of the
queue's existence. Receipt handles are lease ids.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from lambdas.common import idempotency, snapstart
from lambdas.common.http import RESPONSE_BUDGET_BYTES
from lambdas.common.runtime import service
from lambdas.faces.sqs import messages as m
from lambdas.faces.sqs.errors import SqsError, from_domain, invalid, missing, no_queue
from lambdas.faces.sqs.protocol import service_model
from lambdas.faces.sqs.queues import (
    NO_DLQ_MAX_RECEIVES,
    SQS_MAX_MESSAGE_BYTES,
    MetaStore,
    MoveTask,
    SqsQueueMeta,
    Target,
    apply_attributes,
    check_tags,
    check_target,
    name_for_create,
    parse_arn,
    parse_url,
    queue_arn,
    queue_attributes,
    queue_url,
    sqs_name,
    visible_counts,
)
from sluice import errors
from sluice.engine.auth import Principal
from sluice.engine.consume import RetryRequest
from sluice.models import DEFAULT_GROUP, MAX_VISIBILITY_MS, OutgoingMessage, Queue

MAX_BATCH_ENTRIES = 10
PURGE_INTERVAL_MS = 60_000
_ENTRY_ID_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")


@dataclass
class Call:
    """One authenticated SQS call: who, where the API is, and the Lambda context (idempotency)."""

    principal: Principal
    access_key_id: str
    base_url: str
    region: str
    context: LambdaContext | None
    path_queue: str | None = None  # the queue URL a query-protocol request was posted to

    def target(self, params: dict[str, Any]) -> Target:
        url = params.get("QueueUrl") or self.path_queue
        if not url:
            raise missing("QueueUrl")
        return parse_url(url)

    def allow(self, scope: str, queue: str) -> None:
        if not self.principal.allows(scope, queue):  # type: ignore[arg-type]
            raise SqsError(
                "AccessDenied", f"Access to the resource {queue_url(self.base_url, queue)} is denied."
            )

    def url(self, queue: Queue, group: str = DEFAULT_GROUP) -> str:
        return queue_url(self.base_url, sqs_name(queue.name, group, queue.settings.ordered))

    def arn(self, name: str) -> str:
        return queue_arn(self.region, name)


@lru_cache(maxsize=1)
def meta_store() -> MetaStore:
    return MetaStore(service().backend.control)


# SnapStart (lambdas/common/restore.py): the record cache holds the engine's client, rebuilt after a
# restore; botocore's SQS model is loaded into the snapshot so a restored broker does not parse it.
snapstart.register_after_restore(meta_store.cache_clear)
snapstart.register_before_snapshot(service_model)


def _open(call: Call, params: dict[str, Any], *scopes: str, hot: bool = False) -> tuple[Queue, Target]:
    """The queue a call addresses, after the scope check (AccessDenied first: existence is not told).
    `hot` (sends, receives, deletes): from the cached shard-map mirror, as the native face's message
    paths read it; otherwise the control item."""
    target = call.target(params)
    for scope in scopes:
        call.allow(scope, target.queue)
    engine = service()
    try:
        queue = engine.directory.get(target.queue) if hot else engine.queues.get(target.queue)
        if hot and target.group not in queue.groups:  # a group made a moment ago: the mirror may lag
            queue = engine.queues.get(target.queue)
    except errors.QueueNotFound:
        raise no_queue() from None
    check_target(queue, target)
    return queue, target


def _entries(params: dict[str, Any], what: str) -> list[dict[str, Any]]:
    entries = params.get("Entries") or []
    if not entries:
        raise SqsError(
            "EmptyBatchRequest", f"There should be at least one {what}RequestEntry in the request."
        )
    if len(entries) > MAX_BATCH_ENTRIES:
        raise SqsError(
            "TooManyEntriesInBatchRequest",
            f"Maximum number of entries per request are {MAX_BATCH_ENTRIES}. You have sent {len(entries)}.",
        )
    seen: set[str] = set()
    for entry in entries:
        entry_id = entry["Id"]
        if not entry_id or len(entry_id) > 80 or set(entry_id) - _ENTRY_ID_CHARS:
            raise SqsError(
                "InvalidBatchEntryId",
                "A batch entry id can only contain alphanumeric characters, hyphens and underscores. "
                "It can be at most 80 letters long.",
            )
        if entry_id in seen:
            raise SqsError("BatchEntryIdsNotDistinct", f"Id {entry_id} repeated.")
        seen.add(entry_id)
    return entries


def _failed(entry_id: str, exc: SqsError) -> dict[str, Any]:
    return {"Id": entry_id, "SenderFault": exc.sender_fault, "Code": exc.query_code, "Message": exc.message}


# --- queues -------------------------------------------------------------------------------------------------


def create_queue(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    target = name_for_create(params["QueueName"])
    call.allow("admin", target.queue)
    attributes = dict(params.get("Attributes") or {})
    tags = dict(params.get("tags") or {})
    check_tags(tags)
    if target.is_group:
        return _create_group(call, target, attributes, tags)
    meta = SqsQueueMeta(tags=tags)
    given = apply_attributes(attributes, fifo=target.fifo, meta=meta, creating=True)
    defaults = {
        "ordered": target.fifo,
        "max_message_bytes": SQS_MAX_MESSAGE_BYTES,
        "max_retries": NO_DLQ_MAX_RECEIVES,
    }
    try:
        queue = service().queues.create(target.queue, defaults | given)
    except errors.QueueAlreadyExists:
        return _existing(call, target, given, meta)
    except errors.SluiceError as exc:
        raise from_domain(exc) from None
    meta.last_modified_ms = queue.created_ms
    meta_store().put(queue, meta)
    return {"QueueUrl": call.url(queue)}


def _existing(call: Call, target: Target, given: dict[str, Any], meta: SqsQueueMeta) -> dict[str, Any]:
    """SQS's CreateQueue is idempotent: the existing queue's URL, unless an attribute asked for differs."""
    queue = service().queues.get(target.queue)
    current = queue.settings.model_dump()
    stored = meta_store().get(queue, fresh=True)
    kept = {"tags", "last_modified_ms", "move_tasks"}
    if (
        queue.settings.ordered != target.fifo
        or any(current.get(k) != v for k, v in given.items())
        or stored.model_dump(exclude=kept) != meta.model_dump(exclude=kept)
    ):
        raise SqsError(
            "QueueNameExists",
            "A queue already exists with the same name and a different value for an attribute.",
        )
    return {"QueueUrl": call.url(queue)}


def _create_group(
    call: Call, target: Target, attributes: dict[str, str], tags: dict[str, str]
) -> dict[str, Any]:
    """A consumer group as a queue of its own: `<queue>@<group>`; the tag `sluice:start` picks where it
    starts (earliest, the default; latest; or a time in ms): a replay from any point."""
    if attributes:
        raise SqsError(
            "InvalidAttributeName",
            "A consumer group takes no attributes: they are its queue's (set them there).",
        )
    start_tag = tags.pop("sluice:start", "earliest")
    if tags:
        raise invalid("A consumer group takes only the tag sluice:start (earliest, latest or milliseconds).")
    start: Any = int(start_tag) if start_tag.isdigit() else start_tag
    engine = service()
    try:
        queue = engine.queues.get(target.queue)
    except errors.QueueNotFound:
        raise no_queue() from None
    if queue.settings.ordered != target.fifo:
        raise no_queue()
    with contextlib.suppress(errors.ConsumerGroupAlreadyExists):  # idempotent, as CreateQueue is
        engine.groups.create(target.queue, target.group, start)
    return {"QueueUrl": call.url(queue, target.group)}


def get_queue_url(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue, target = _open(call, {"QueueUrl": params["QueueName"]}, "read")
    return {"QueueUrl": call.url(queue, target.group)}


def list_queues(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    """The queues (and consumer groups) the caller may read, by SQS name, paged by name."""
    prefix = params.get("QueueNamePrefix") or ""
    limit = params.get("MaxResults")
    if limit is not None and not 1 <= limit <= 1000:
        raise invalid("MaxResults must be 1 to 1000.")
    after = _token(params.get("NextToken"))
    names: list[tuple[str, Queue, str]] = []
    cursor: str | None = None
    while True:
        page = service().queues.list(limit=100, after=cursor)
        for queue in page:
            if queue.stream_name or queue.open_stream or not call.principal.allows("read", queue.name):
                continue
            for group in sorted(queue.groups):
                name = sqs_name(queue.name, group, queue.settings.ordered)
                if name.startswith(prefix) and (after is None or name > after):
                    names.append((name, queue, group))
        if len(page) < 100:
            break
        cursor = page[-1].name
    names.sort(key=lambda n: n[0])
    cap = limit or 1000
    out: dict[str, Any] = {"QueueUrls": [call.url(q, g) for _, q, g in names[:cap]]}
    if limit is not None and len(names) > cap:
        out["NextToken"] = base64.urlsafe_b64encode(names[cap - 1][0].encode()).decode()
    if not out["QueueUrls"]:
        del out["QueueUrls"]
    return out


def _token(token: str | None) -> str | None:
    if token is None:
        return None
    try:
        return base64.urlsafe_b64decode(token.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        raise invalid("Invalid NextToken: pass the token a previous page returned.") from None


def delete_queue(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue, target = _open(call, params, "admin")
    try:
        if target.is_group:
            service().groups.delete(queue.name, target.group)
        else:
            service().queues.delete(queue.name)
    except (errors.QueueNotFound, errors.ConsumerGroupNotFound):
        pass  # gone meanwhile: SQS answers a repeated delete with success
    return {}


def purge_queue(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue, target = _open(call, params, "admin")
    if target.is_group:
        raise SqsError(
            "UnsupportedOperation", "Purge the queue itself: a purge removes every group's messages."
        )
    operations = service().operations
    last = operations.last_purge_ms(queue.name)
    if last is not None and service().backend.clock() - last < PURGE_INTERVAL_MS:
        raise SqsError(
            "PurgeQueueInProgress",
            f"Only one PurgeQueue operation on {queue.name} is allowed every 60 seconds.",
        )
    operations.purge(queue.name)
    return {}


def get_queue_attributes(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue, target = _open(call, params, "read")
    names = set(params.get("AttributeNames") or [])
    counts = {"visible": 0, "in_flight": 0, "delayed": 0}
    if names & {
        "All",
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    }:
        counts = visible_counts(service().operations.metrics(queue.name, groups=[target.group]), target.group)
    everything = queue_attributes(queue, meta_store().get(queue), target, counts, call.region)
    unknown = (
        names
        - set(everything)
        - {
            "All",
            "Policy",
            "KmsMasterKeyId",
            "KmsDataKeyReusePeriodSeconds",
            "FifoQueue",
            "ContentBasedDeduplication",
            "DeduplicationScope",
            "FifoThroughputLimit",
            "RedrivePolicy",
            "RedriveAllowPolicy",
        }
    )
    if unknown:
        raise SqsError("InvalidAttributeName", f"Unknown Attribute {sorted(unknown)[0]}.")
    chosen = everything if "All" in names else {k: v for k, v in everything.items() if k in names}
    return {"Attributes": chosen} if chosen else {}


def set_queue_attributes(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue, target = _open(call, params, "admin")
    if target.is_group:
        raise SqsError(
            "InvalidAttributeName", "A consumer group's attributes are its queue's: set them there."
        )
    store = meta_store()
    meta = store.get(queue, fresh=True).model_copy(deep=True)
    settings = apply_attributes(params["Attributes"], fifo=target.fifo, meta=meta, creating=False)
    if settings:
        try:
            service().queues.update_settings(queue.name, settings)
        except errors.SluiceError as exc:
            raise from_domain(exc) from None
    meta.last_modified_ms = service().backend.clock()
    store.put(queue, meta)
    return {}


def tag_queue(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    return _retag(call, params, lambda tags: tags | dict(params["Tags"]))


def untag_queue(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    drop = set(params["TagKeys"])
    return _retag(call, params, lambda tags: {k: v for k, v in tags.items() if k not in drop})


def _retag(
    call: Call, params: dict[str, Any], change: Callable[[dict[str, str]], dict[str, str]]
) -> dict[str, Any]:
    queue, target = _open(call, params, "admin")
    if target.is_group:
        raise invalid("Tag the queue itself: a consumer group has no tags of its own.")
    store = meta_store()
    meta = store.get(queue, fresh=True).model_copy(deep=True)
    meta.tags = change(meta.tags)
    check_tags(meta.tags)
    store.put(queue, meta)
    return {}


def list_queue_tags(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue, target = _open(call, params, "read")
    tags = {} if target.is_group else meta_store().get(queue).tags
    return {"Tags": tags} if tags else {}


# --- messages -----------------------------------------------------------------------------------------------


def send_message(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue, target = _open(call, params, "write", hot=True)
    _no_group_writes(target)
    prepared = _prepare(call, queue, params)
    return _send(call, queue, [prepared])[0]


def send_message_batch(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue, target = _open(call, params, "write", hot=True)
    _no_group_writes(target)
    entries = _entries(params, "SendMessageBatch")
    total = sum(len(e.get("MessageBody", "").encode()) for e in entries)
    if total > SQS_MAX_MESSAGE_BYTES:
        raise SqsError(
            "BatchRequestTooLong",
            f"Batch requests cannot be longer than {SQS_MAX_MESSAGE_BYTES} bytes. "
            f"You have sent {total} bytes.",
        )
    failed: list[dict[str, Any]] = []
    ready: list[tuple[str, _Prepared]] = []
    for entry in entries:
        try:
            ready.append((entry["Id"], _prepare(call, queue, entry)))
        except SqsError as exc:
            failed.append(_failed(entry["Id"], exc))
    results = _send(call, queue, [p for _, p in ready]) if ready else []
    successful = [{"Id": entry_id, **r} for (entry_id, _), r in zip(ready, results, strict=True)]
    return {"Successful": successful, "Failed": failed}


def _no_group_writes(target: Target) -> None:
    if target.is_group:
        raise SqsError(
            "UnsupportedOperation", "Send to the queue itself: every consumer group receives what it is sent."
        )


@dataclass
class _Prepared:
    message: OutgoingMessage
    answer: dict[str, Any]
    dedup_key: str | None


def _prepare(call: Call, queue: Queue, entry: dict[str, Any]) -> _Prepared:
    """One message checked and converted, with the answer fields that do not depend on storing it."""
    body = m.check_body(entry.get("MessageBody") or "")
    attributes = entry.get("MessageAttributes") or {}
    stored = m.to_stored(attributes)
    stored[m.SENDER_ATTRIBUTE] = call.access_key_id
    answer: dict[str, Any] = {"MD5OfMessageBody": m.md5(body)}
    if md5_attrs := m.attributes_md5(attributes):
        answer["MD5OfMessageAttributes"] = md5_attrs
    system = entry.get("MessageSystemAttributes") or {}
    for name in system:
        if name != "AWSTraceHeader":
            raise invalid(
                f"Message system attribute '{name}' is not supported on sends (only AWSTraceHeader)."
            )
    if "AWSTraceHeader" in system:
        trace = system["AWSTraceHeader"].get("StringValue") or ""
        stored[m.TRACE_ATTRIBUTE] = trace
        answer["MD5OfMessageSystemAttributes"] = m.trace_md5(trace)
    delay = entry.get("DelaySeconds")
    group_id = entry.get("MessageGroupId")
    dedup_id = entry.get("MessageDeduplicationId")
    dedup_key = None
    if queue.settings.ordered:
        if not group_id:
            raise missing("MessageGroupId")
        if delay:
            raise invalid(
                "Value for parameter DelaySeconds is invalid. Reason: The request includes a parameter that "
                "is not valid for this queue type (FIFO queues take the queue's delay only)."
            )
        meta = meta_store().get(queue)
        if not dedup_id:
            if not meta.content_based_deduplication:
                raise invalid(
                    "The queue should either have ContentBasedDeduplication enabled or "
                    "MessageDeduplicationId provided explicitly"
                )
            dedup_id = hashlib.sha256(body).hexdigest()
        _check_token(dedup_id, "MessageDeduplicationId")
        stored[m.DEDUP_ATTRIBUTE] = dedup_id
        scope = group_id if meta.deduplication_scope == "messageGroup" else ""
        dedup_key = f"sqs\x00{scope}\x00{dedup_id}"
    elif dedup_id:
        raise invalid(
            "Value for parameter MessageDeduplicationId is invalid. Reason: The request includes a parameter "
            "that is not valid for this queue type."
        )
    if group_id is not None:
        _check_token(group_id, "MessageGroupId")
    if delay is not None and not 0 <= delay <= 900:
        raise invalid(f"Value {delay} for parameter DelaySeconds is invalid. Reason: must be 0 to 900.")
    message = OutgoingMessage(
        body=body, content_type="text", delay_seconds=delay, partition_key=group_id, attributes=stored
    )
    if message.size > queue.settings.max_message_bytes:  # checked here: a batch fails this entry only
        raise invalid(
            f"One or more parameters are invalid. Reason: Message must be shorter than "
            f"{queue.settings.max_message_bytes} bytes."
        )
    return _Prepared(message, answer, dedup_key)


def _check_token(value: str, name: str) -> None:
    if not 1 <= len(value) <= 128 or any(not (0x21 <= ord(c) <= 0x7E) for c in value):
        raise invalid(f"Value {value} for parameter {name} is invalid: 1-128 printable ASCII characters.")


def _send(call: Call, queue: Queue, prepared: list[_Prepared]) -> list[dict[str, Any]]:
    """Store the messages (one publish for a standard queue's batch; FIFO messages one at a time through
    the 5-minute deduplication record) and complete their answers."""
    if not queue.settings.ordered:
        result = _publish(queue.name, [p.message for p in prepared])
        return [{**p.answer, "MessageId": mid} for p, mid in zip(prepared, result.message_ids, strict=True)]
    answers = []
    for p in prepared:

        def publish_one(p: _Prepared = p) -> dict[str, Any]:
            result = _publish(queue.name, [p.message])
            ts, seq = result.offsets[0][:16], result.offsets[0][16:]
            return {
                "MessageId": result.message_ids[0],
                "SequenceNumber": m.sequence_number(int(ts), int(seq)),
            }

        try:
            stored = idempotency.once(queue.name, p.dedup_key, None, publish_one, call.context)
        except errors.SluiceError as exc:
            raise from_domain(exc) from None
        answers.append({**p.answer, **stored})
    return answers


def _publish(queue_name: str, messages: list[OutgoingMessage]) -> Any:
    try:
        return service().publisher.publish(queue_name, messages)
    except errors.SluiceError as exc:
        raise from_domain(exc) from None


def receive_message(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue, target = _open(call, params, "read", hot=True)
    count = params.get("MaxNumberOfMessages", 1)
    if not 1 <= count <= MAX_BATCH_ENTRIES:
        raise invalid(
            f"Value {count} for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10."
        )
    visibility = params.get("VisibilityTimeout")
    if visibility is not None and not 0 <= visibility <= MAX_VISIBILITY_MS // 1000:
        raise invalid(f"Value {visibility} for parameter VisibilityTimeout is invalid. Reason: 0 to 43200.")
    wait = params.get("WaitTimeSeconds")
    if wait is None:
        wait = meta_store().get(queue).receive_wait_seconds
    if not 0 <= wait <= 20:
        raise invalid(
            f"Value {wait} for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20."
        )
    system_names = set(params.get("AttributeNames") or []) | set(
        params.get("MessageSystemAttributeNames") or []
    )
    attribute_names = params.get("MessageAttributeNames") or []
    engine = service()
    now = engine.backend.clock()
    fifo = queue.settings.ordered

    def shape(d: Any) -> dict[str, Any]:
        body = m.body_text(d)
        attributes = {k: v for k, v in m.from_stored(d.attributes).items() if m.wanted(attribute_names, k)}
        out: dict[str, Any] = {
            "MessageId": d.id,
            "ReceiptHandle": d.lease_id,
            "MD5OfBody": m.md5(body.encode()),
            "Body": body,
        }
        system = m.system_attributes(
            d, system_names, fifo, now, lambda q: call.arn(sqs_name(q, DEFAULT_GROUP, False))
        )
        if system:
            out["Attributes"] = system
        if attributes:
            out["MessageAttributes"] = attributes
            out["MD5OfMessageAttributes"] = m.attributes_md5(attributes)
        return out

    def size_of(d: Any) -> int:
        return len(json.dumps(shape(d), default=lambda b: base64.b64encode(b).decode())) * 2

    try:
        batch = engine.consumer.pull(
            queue.name,
            group=target.group,
            batch_size=count,
            visibility_ms=None if visibility is None else max(1, visibility * 1000),
            wait_ms=wait * 1000,
            size_of=size_of,
            max_bytes=RESPONSE_BUDGET_BYTES,
        )
    except errors.SluiceError as exc:
        raise from_domain(exc) from None
    return {"Messages": [shape(d) for d in batch.messages]} if batch.messages else {}


def _ack(queue: Queue, handles: list[str]) -> None:
    try:
        service().consumer.ack(queue.name, handles)
    except errors.SluiceError as exc:
        raise from_domain(exc) from None


def _invalid_handle(queue: Queue, handle: str) -> bool:
    return service().consumer.signer.verify(queue.lease_key, handle) is None


def _handle_error(handle: str) -> SqsError:
    return SqsError(
        "ReceiptHandleIsInvalid", f'The input receipt handle "{handle}" is not a valid receipt handle.'
    )


def delete_message(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue, _ = _open(call, params, "read", "write", hot=True)
    handle = params["ReceiptHandle"]
    if _invalid_handle(queue, handle):
        raise _handle_error(handle)
    _ack(queue, [handle])
    return {}


def delete_message_batch(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue, _ = _open(call, params, "read", "write", hot=True)
    entries = _entries(params, "DeleteMessageBatch")
    good = [e for e in entries if not _invalid_handle(queue, e["ReceiptHandle"])]
    if good:
        _ack(queue, [e["ReceiptHandle"] for e in good])
    good_ids = {e["Id"] for e in good}
    return {
        "Successful": [{"Id": e["Id"]} for e in good],
        "Failed": [
            _failed(e["Id"], _handle_error(e["ReceiptHandle"])) for e in entries if e["Id"] not in good_ids
        ],
    }


def change_message_visibility(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue, _ = _open(call, params, "read", "write", hot=True)
    error = _change_visibility(queue, params["ReceiptHandle"], params["VisibilityTimeout"])
    if error is not None:
        raise error
    return {}


def change_message_visibility_batch(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    queue, _ = _open(call, params, "read", "write", hot=True)
    successful, failed = [], []
    for entry in _entries(params, "ChangeMessageVisibilityBatch"):
        error = _change_visibility(queue, entry["ReceiptHandle"], entry.get("VisibilityTimeout", 0))
        if error is None:
            successful.append({"Id": entry["Id"]})
        else:
            failed.append(_failed(entry["Id"], error))
    return {"Successful": successful, "Failed": failed}


def _change_visibility(queue: Queue, handle: str, seconds: int) -> SqsError | None:
    """Extend a lease (SQS's VisibilityTimeout from now), or with 0 hand the message back at once."""
    if not 0 <= seconds <= MAX_VISIBILITY_MS // 1000:
        return invalid(f"Value {seconds} for parameter VisibilityTimeout is invalid. Reason: 0 to 43200.")
    if _invalid_handle(queue, handle):
        return _handle_error(handle)
    consumer = service().consumer
    try:
        if seconds == 0:
            result = consumer.ack(queue.name, [], [RetryRequest(handle, 0)])
            done = result.retry_count
        else:
            result = consumer.extend(queue.name, [handle], seconds * 1000)
            done = result.ack_count
    except errors.SluiceError as exc:
        return from_domain(exc)
    if not done:
        return SqsError(
            "MessageNotInflight",
            "The message referred to is not in flight (it was deleted or received again).",
        )
    return None


# --- dead letters and move tasks ------------------------------------------------------------------------


def list_dead_letter_source_queues(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    dlq, _ = _open(call, params, "read")
    limit = params.get("MaxResults")
    after = _token(params.get("NextToken"))
    sources: list[Queue] = []
    cursor: str | None = None
    while True:
        page = service().queues.list(limit=100, after=cursor)
        sources += [
            q
            for q in page
            if q.settings.dead_letter_queue == dlq.name
            and call.principal.allows("read", q.name)
            and (after is None or q.name > after)
        ]
        if len(page) < 100:
            break
        cursor = page[-1].name
    cap = limit or 1000
    out: dict[str, Any] = {"queueUrls": [call.url(q) for q in sources[:cap]]}
    if limit is not None and len(sources) > cap:
        out["NextToken"] = base64.urlsafe_b64encode(sources[cap - 1].name.encode()).decode()
    return out


def start_message_move_task(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    """Redrive: the DLQ's messages back into the queue that dead-letters into it (the destination, or
    when none is given the one queue whose RedrivePolicy names this DLQ). The move runs within this call
    (the engine's redrive budget); a task that could not move everything reports FAILED with the count
    left, and another task moves the rest."""
    source = parse_arn(params["SourceArn"])
    call.allow("admin", source.queue)
    try:
        dlq = service().queues.get(source.queue)
    except errors.QueueNotFound:
        raise SqsError("ResourceNotFoundException", "The source queue does not exist.") from None
    if params.get("DestinationArn"):
        destination = parse_arn(params["DestinationArn"]).queue
    else:
        sources = list_dead_letter_source_queues(call, {"QueueUrl": call.url(dlq)}).get("queueUrls", [])
        if len(sources) != 1:
            raise invalid(
                "DestinationArn is required: the source is the dead letter queue of "
                f"{len(sources)} queues (Sluice moves a task's messages to one queue)."
            )
        destination = parse_url(sources[0]).queue
    call.allow("write", destination)
    if (
        params.get("MaxNumberOfMessagesPerSecond") is not None
        and not 1 <= params["MaxNumberOfMessagesPerSecond"] <= 500
    ):
        raise invalid("MaxNumberOfMessagesPerSecond must be 1 to 500.")
    engine = service()
    started = engine.backend.clock()
    try:
        moved = engine.operations.redrive(destination, dlq.name)
    except errors.NotADeadLetterQueue as exc:
        raise invalid(exc.message) from None
    except errors.SluiceError as exc:
        raise from_domain(exc) from None
    handle = base64.urlsafe_b64encode(f"{dlq.name}:{secrets.token_hex(8)}".encode()).decode()
    left = int(moved["remaining_in_source"])
    task = MoveTask(
        handle=handle,
        status="COMPLETED" if left == 0 else "FAILED",
        source_arn=params["SourceArn"],
        destination_arn=params.get("DestinationArn"),
        started_ms=started,
        moved=int(moved["moved"]),
        to_move=int(moved["moved"]) + left,
        failure=None if left == 0 else f"{left} messages were left: start another task to move them",
    )
    store = meta_store()
    meta = store.get(dlq, fresh=True).model_copy(deep=True)
    meta.move_tasks = [task, *meta.move_tasks][:10]
    store.put(dlq, meta)
    return {"TaskHandle": handle}


def list_message_move_tasks(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    source = parse_arn(params["SourceArn"])
    call.allow("read", source.queue)
    try:
        dlq = service().queues.get(source.queue)
    except errors.QueueNotFound:
        raise SqsError("ResourceNotFoundException", "The source queue does not exist.") from None
    limit = params.get("MaxResults", 1)
    if not 1 <= limit <= 10:
        raise invalid("MaxResults must be 1 to 10.")
    results = []
    for task in meta_store().get(dlq, fresh=True).move_tasks[:limit]:
        entry: dict[str, Any] = {
            "Status": task.status,
            "SourceArn": task.source_arn,
            "ApproximateNumberOfMessagesMoved": task.moved,
            "StartedTimestamp": task.started_ms,
        }
        if task.destination_arn:
            entry["DestinationArn"] = task.destination_arn
        if task.to_move is not None:
            entry["ApproximateNumberOfMessagesToMove"] = task.to_move
        if task.failure:
            entry["FailureReason"] = task.failure
        results.append(entry)
    return {"Results": results}


def cancel_message_move_task(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    try:
        queue_name = base64.urlsafe_b64decode(params["TaskHandle"].encode()).decode().split(":", 1)[0]
    except (ValueError, UnicodeDecodeError):
        raise SqsError("ResourceNotFoundException", "No such message movement task.") from None
    call.allow("admin", queue_name)
    raise SqsError(
        "ResourceNotFoundException",
        "Only a running task can be cancelled: Sluice's move tasks finish within the call that starts them.",
    )


def add_permission(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    _open(call, params, "admin")
    raise SqsError(
        "UnsupportedOperation",
        "Queue policies are not supported: grant access with Sluice tokens (scopes per queue, docs/api.md).",
    )


def remove_permission(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    return add_permission(call, params)


ACTIONS: dict[str, Callable[[Call, dict[str, Any]], dict[str, Any]]] = {
    "CreateQueue": create_queue,
    "GetQueueUrl": get_queue_url,
    "ListQueues": list_queues,
    "DeleteQueue": delete_queue,
    "PurgeQueue": purge_queue,
    "GetQueueAttributes": get_queue_attributes,
    "SetQueueAttributes": set_queue_attributes,
    "TagQueue": tag_queue,
    "UntagQueue": untag_queue,
    "ListQueueTags": list_queue_tags,
    "SendMessage": send_message,
    "SendMessageBatch": send_message_batch,
    "ReceiveMessage": receive_message,
    "DeleteMessage": delete_message,
    "DeleteMessageBatch": delete_message_batch,
    "ChangeMessageVisibility": change_message_visibility,
    "ChangeMessageVisibilityBatch": change_message_visibility_batch,
    "ListDeadLetterSourceQueues": list_dead_letter_source_queues,
    "StartMessageMoveTask": start_message_move_task,
    "ListMessageMoveTasks": list_message_move_tasks,
    "CancelMessageMoveTask": cancel_message_move_task,
    "AddPermission": add_permission,
    "RemovePermission": remove_permission,
}
