"""SQS messages over Sluice messages: bodies, message attributes with their data types, system
attributes, and the MD5 digests SQS answers with (the Java, .NET and Go SDKs check MD5OfMessageBody and
MD5OfMessageAttributes on sends and receives; botocore does not).

A message attribute is stored as a Sluice attribute of the same name (so native consumers see it), its
value the string, or base64 for `Binary` types; data types other than `String` go in the engine-reserved
attribute `sluice-sqs-types` (`{"name": "Number"}`), which like every `sluice-` attribute does not count
against the message size. The sender's access key, the deduplication id and an `AWSTraceHeader` are kept
in reserved attributes too. A message sent on another face reads as `String` attributes; its body reads
as its text (`json` and `text`) or base64 (`bytes`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import struct
from typing import Any

from lambdas.faces.sqs.errors import SqsError, invalid
from sluice import offsets
from sluice.engine.operations import SOURCE_ATTRIBUTE
from sluice.models import RESERVED_ATTRIBUTE_PREFIX, Delivery

TYPES_ATTRIBUTE = "sluice-sqs-types"
SENDER_ATTRIBUTE = "sluice-sqs-sender"
DEDUP_ATTRIBUTE = "sluice-sqs-dedup"
TRACE_ATTRIBUTE = "sluice-sqs-trace"
MAX_MESSAGE_ATTRIBUTES = 10
_NAME_RE = re.compile(r"\A(?!aws\.|amazon\.)(?!\.)(?!.*\.\.)[A-Za-z0-9_.-]{1,256}(?<!\.)\Z", re.IGNORECASE)
_TYPE_RE = re.compile(r"\A(String|Number|Binary)(\.[^\s]{1,250})?\Z")
# What SQS accepts in a body or string value: #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF.
_INVALID_CHARS = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def check_body(body: str) -> bytes:
    if not body:
        raise missing_body()
    if _INVALID_CHARS.search(body):
        raise SqsError(
            "InvalidMessageContents",
            "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | "
            "#xE000 to #xFFFD | #x10000 to #x10FFFF",
        )
    return body.encode()


def missing_body() -> SqsError:
    return invalid("The request must contain a non-empty message body.")


def attributes_md5(attributes: dict[str, dict[str, Any]]) -> str | None:
    """SQS's digest of message attributes: for each name in order, length-prefixed name, data type,
    a transport byte (1 string, 2 binary) and the length-prefixed value."""
    if not attributes:
        return None
    out = bytearray()

    def put(data: bytes) -> None:
        out.extend(struct.pack(">I", len(data)) + data)

    for name in sorted(attributes):
        value = attributes[name]
        put(name.encode())
        put(value["DataType"].encode())
        if "BinaryValue" in value:
            out.append(2)
            put(value["BinaryValue"])
        else:
            out.append(1)
            put(value["StringValue"].encode())
    return md5(bytes(out))


def to_stored(attributes: dict[str, dict[str, Any]]) -> dict[str, str]:
    """SQS message attributes → Sluice attributes (reserved type map included when needed)."""
    if len(attributes) > MAX_MESSAGE_ATTRIBUTES:
        raise invalid(f"Number of message attributes [{len(attributes)}] exceeds the allowed maximum [10].")
    stored: dict[str, str] = {}
    types: dict[str, str] = {}
    for name, value in attributes.items():
        if not _NAME_RE.match(name) or name.startswith(RESERVED_ATTRIBUTE_PREFIX):
            raise invalid(f"Message attribute name '{name}' is invalid (reserved or not [A-Za-z0-9_.-]).")
        kind = value.get("DataType", "")
        if not _TYPE_RE.match(kind):
            raise invalid(f"The message attribute '{name}' has an invalid message attribute type.")
        if value.get("StringListValues") or value.get("BinaryListValues"):
            raise invalid(f"Message attribute '{name}': list values are reserved by SQS and not supported.")
        if kind.startswith("Binary"):
            if "BinaryValue" not in value:
                raise invalid(f"The message attribute '{name}' with type 'Binary' must use field 'Binary'.")
            stored[name] = base64.b64encode(value["BinaryValue"]).decode()
        else:
            text = value.get("StringValue")
            if text is None:
                raise invalid(
                    f"The message attribute '{name}' must contain a non-empty value of type String."
                )
            if kind.startswith("Number") and not _is_number(text):
                raise invalid(f"Can't cast the value of message attribute '{name}' to a number.")
            check_body(text)
            stored[name] = text
        if kind != "String":
            types[name] = kind
    if types:
        stored[TYPES_ATTRIBUTE] = json.dumps(types, separators=(",", ":"))
    return stored


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def from_stored(attributes: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Sluice attributes → SQS message attributes (reserved `sluice-` ones are not message attributes)."""
    try:
        types = json.loads(attributes.get(TYPES_ATTRIBUTE, "{}"))
    except ValueError:
        types = {}
    out: dict[str, dict[str, Any]] = {}
    for name, value in attributes.items():
        if name.startswith(RESERVED_ATTRIBUTE_PREFIX):
            continue
        kind = types.get(name, "String")
        if kind.startswith("Binary"):
            out[name] = {"DataType": kind, "BinaryValue": base64.b64decode(value)}
        else:
            out[name] = {"DataType": kind, "StringValue": value}
    return out


def wanted(names: list[str] | None, name: str) -> bool:
    """ReceiveMessage's MessageAttributeNames: `All`, `.*`, a name, or a `prefix.*`."""
    for pattern in names or []:
        if pattern in ("All", ".*") or pattern == name:
            return True
        if pattern.endswith(".*") and name.startswith(pattern[:-1]):
            return True
    return False


def body_text(d: Delivery) -> str:
    if d.content_type == "bytes":
        return base64.b64encode(d.body).decode()
    return d.body.decode()


def sequence_number(timestamp_ms: int, seq: int) -> str:
    """A FIFO message's SequenceNumber: its offset as a number (grows within a message group, whose
    messages share one shard)."""
    return str(int(offsets.encode(timestamp_ms, seq)))


def system_attributes(
    d: Delivery, names: set[str], fifo: bool, received_ms: int, arn_of: Any
) -> dict[str, str]:
    every = "All" in names
    out: dict[str, str] = {}

    def want(name: str) -> bool:
        return every or name in names

    if want("SenderId") and SENDER_ATTRIBUTE in d.attributes:
        out["SenderId"] = d.attributes[SENDER_ATTRIBUTE]
    if want("SentTimestamp"):
        out["SentTimestamp"] = str(d.timestamp_ms)
    if want("ApproximateReceiveCount"):
        out["ApproximateReceiveCount"] = str(d.attempts)
    if want("ApproximateFirstReceiveTimestamp") and d.attempts == 1:
        out["ApproximateFirstReceiveTimestamp"] = str(received_ms)  # later receives: not recorded
    if want("AWSTraceHeader") and TRACE_ATTRIBUTE in d.attributes:
        out["AWSTraceHeader"] = d.attributes[TRACE_ATTRIBUTE]
    if want("DeadLetterQueueSourceArn") and SOURCE_ATTRIBUTE in d.attributes:
        out["DeadLetterQueueSourceArn"] = arn_of(d.attributes[SOURCE_ATTRIBUTE])
    if fifo:
        if want("MessageGroupId") and d.partition_key is not None:
            out["MessageGroupId"] = d.partition_key
        if want("MessageDeduplicationId") and DEDUP_ATTRIBUTE in d.attributes:
            out["MessageDeduplicationId"] = d.attributes[DEDUP_ATTRIBUTE]
        if want("SequenceNumber"):
            out["SequenceNumber"] = sequence_number(d.timestamp_ms, d.seq)
    return out


def trace_md5(trace: str) -> str:
    """MD5OfMessageSystemAttributes of a send carrying AWSTraceHeader (the one system attribute sends
    take), computed as message attributes are."""
    return attributes_md5({"AWSTraceHeader": {"DataType": "String", "StringValue": trace}}) or ""
