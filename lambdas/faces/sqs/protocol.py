"""SQS's two wire protocols over botocore's own SQS service model (shipped with the Lambda runtime's
botocore): requests decoded to the model's parameter shape and checked by botocore's `ParamValidator`,
answers encoded back, errors in each protocol's form.

- AWS JSON 1.0 (botocore >= 1.31.81 and every current SDK): `X-Amz-Target: AmazonSQS.<Action>`, a JSON
  body with the model's member names, JSON answers; errors `{"__type", "message"}` plus the query code in
  `x-amzn-query-error` (`<code>;Sender`), from which botocore picks the modelled exception.
- The query protocol (older SDKs, kombu before its JSON support): a form body `Action=<Action>&...`
  posted to `/` or to the queue URL, XML answers `<ActionResponse><ActionResult>...`. Its member names
  differ from the JSON ones for lists and maps (`Attribute.1.Name`, `MessageAttribute.1.Value.DataType`,
  `SendMessageBatchRequestEntry.1.Id`): the tables below hold them, as SQS's query model (botocore
  1.31.80's `sqs/2012-11-05/service-2.json`) names them.
"""

from __future__ import annotations

import base64
import json
import re
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qsl
from xml.sax.saxutils import escape

from botocore.loaders import Loader
from botocore.model import ListShape, MapShape, OperationModel, ServiceModel, Shape, StructureShape
from botocore.validate import ParamValidator

from lambdas.faces.sqs.errors import SqsError, invalid, missing

JSON_CONTENT_TYPE = "application/x-amz-json-1.0"
XML_NAMESPACE = "http://queue.amazonaws.com/doc/2012-11-05/"
TARGET_PREFIX = "AmazonSQS."

# Query-protocol names where they differ from the JSON member names: (shape, member) → name for a
# structure member; shape → name for a list's member (flattened lists repeat it); shape → (key, value)
# for a map's entries. A map or list shape named here applies wherever it is used.
_MEMBER_NAMES: dict[tuple[str, str], str] = {
    ("CreateQueueRequest", "Attributes"): "Attribute",
    ("CreateQueueRequest", "tags"): "Tag",
    ("GetQueueAttributesResult", "Attributes"): "Attribute",
    ("ListQueueTagsResult", "Tags"): "Tag",
    ("Message", "Attributes"): "Attribute",
    ("Message", "MessageAttributes"): "MessageAttribute",
    ("MessageAttributeValue", "StringListValues"): "StringListValue",
    ("MessageAttributeValue", "BinaryListValues"): "BinaryListValue",
    ("MessageSystemAttributeValue", "StringListValues"): "StringListValue",
    ("MessageSystemAttributeValue", "BinaryListValues"): "BinaryListValue",
    ("SendMessageBatchRequestEntry", "MessageAttributes"): "MessageAttribute",
    ("SendMessageBatchRequestEntry", "MessageSystemAttributes"): "MessageSystemAttribute",
    ("SendMessageRequest", "MessageAttributes"): "MessageAttribute",
    ("SendMessageRequest", "MessageSystemAttributes"): "MessageSystemAttribute",
    ("SetQueueAttributesRequest", "Attributes"): "Attribute",
}
_SHAPE_NAMES: dict[str, str] = {
    "MessageSystemAttributeMap": "Attribute",
    "QueueAttributeMap": "Attribute",
    "TagMap": "Tag",
}
_LIST_MEMBERS: dict[str, str] = {
    "AWSAccountIdList": "AWSAccountId",
    "ActionNameList": "ActionName",
    "AttributeNameList": "AttributeName",
    "BatchResultErrorEntryList": "BatchResultErrorEntry",
    "BinaryList": "BinaryListValue",
    "ChangeMessageVisibilityBatchRequestEntryList": "ChangeMessageVisibilityBatchRequestEntry",
    "ChangeMessageVisibilityBatchResultEntryList": "ChangeMessageVisibilityBatchResultEntry",
    "DeleteMessageBatchRequestEntryList": "DeleteMessageBatchRequestEntry",
    "DeleteMessageBatchResultEntryList": "DeleteMessageBatchResultEntry",
    "ListMessageMoveTasksResultEntryList": "ListMessageMoveTasksResultEntry",
    "MessageAttributeNameList": "MessageAttributeName",
    "MessageList": "Message",
    "QueueUrlList": "QueueUrl",
    "SendMessageBatchRequestEntryList": "SendMessageBatchRequestEntry",
    "SendMessageBatchResultEntryList": "SendMessageBatchResultEntry",
    "StringList": "StringListValue",
    "TagKeyList": "TagKey",
}
_MAP_ENTRIES: dict[str, tuple[str, str]] = {"TagMap": ("Key", "Value")}  # others: Name, Value


@lru_cache(maxsize=1)
def service_model() -> ServiceModel:
    """Loaded at the first SQS request (not at import: other faces' cold starts do not pay for it)."""
    return ServiceModel(Loader().load_service_model("sqs", "service-2"), "sqs")


def operation(action: str) -> OperationModel:
    model = service_model()
    if action not in model.operation_names:
        raise SqsError("InvalidAction", f"The action {action} is not valid for this endpoint.")
    return model.operation_model(action)


# --- requests ---------------------------------------------------------------------------------------------


class Request:
    """One decoded SQS call: the action, its parameters in the model's (JSON) shape, and the protocol."""

    def __init__(self, action: str, params: dict[str, Any], query: bool) -> None:
        self.action = action
        self.params = params
        self.query = query


def protocol_of(headers: dict[str, str]) -> bool:
    """True for the query protocol (a form body), False for JSON 1.0 (an `X-Amz-Target`)."""
    return not headers.get("x-amz-target", "").startswith(TARGET_PREFIX)


def decode(headers: dict[str, str], body: bytes, path_queue: str | None = None) -> Request:
    """The call a request makes; parameters validated against the operation's input shape. A query
    request posted to a queue URL (`path_queue`) names its queue by the path, not a QueueUrl."""
    if not protocol_of(headers):
        action = headers["x-amz-target"][len(TARGET_PREFIX) :]
        op = operation(action)
        try:
            params = json.loads(body or b"{}")
        except ValueError as exc:
            raise SqsError("SerializationException", "the request body is not valid JSON") from exc
        if not isinstance(params, dict):
            raise SqsError("SerializationException", "the request body must be a JSON object")
        params = _blobs_from_json(op.input_shape, params) if op.input_shape else {}
        query = False
    else:
        try:
            form = dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False))
        except UnicodeDecodeError as exc:
            raise invalid("the request body is not UTF-8") from exc
        action = form.pop("Action", "")
        if not action:
            raise missing("Action")
        op = operation(action)
        params = _from_form(op.input_shape, form, "") or {} if op.input_shape else {}
        if path_queue and op.input_shape is not None and "QueueUrl" in op.input_shape.members:
            params.setdefault("QueueUrl", path_queue)
        query = True
    if op.input_shape is not None:
        _validate(params, op.input_shape)
    return Request(action, params, query)


_MISSING = re.compile(r'Missing required parameter in [^:]*: "([^"]+)"')
_VALIDATOR = ParamValidator()


def _validate(params: dict[str, Any], shape: StructureShape) -> None:
    report = _VALIDATOR.validate(params, shape)
    if not report.has_errors():
        return
    text = report.generate_report()
    if found := _MISSING.search(text):
        raise missing(found.group(1))
    raise invalid(text.splitlines()[-1].strip() or "invalid parameters")


def _blobs_from_json(shape: Shape, value: Any) -> Any:
    """JSON carries blobs as base64 text; the validator and the actions want bytes."""
    if isinstance(shape, StructureShape) and isinstance(value, dict):
        return {
            k: _blobs_from_json(shape.members[k], v) if k in shape.members else v for k, v in value.items()
        }
    if isinstance(shape, ListShape) and isinstance(value, list):
        return [_blobs_from_json(shape.member, v) for v in value]
    if isinstance(shape, MapShape) and isinstance(value, dict):
        return {k: _blobs_from_json(shape.value, v) for k, v in value.items()}
    if shape.type_name == "blob" and isinstance(value, str):
        return _b64decode(value)
    return value


def _b64decode(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError as exc:
        raise invalid("a binary value is not valid base64") from exc


def _member_name(parent: StructureShape, key: str) -> str:
    member = parent.members[key]
    return _MEMBER_NAMES.get((parent.name, key)) or _SHAPE_NAMES.get(member.name) or key


def _from_form(shape: Shape, form: dict[str, str], name: str) -> Any:
    """The value under `name` in a query form (None when absent), typed by `shape`."""
    if isinstance(shape, StructureShape):
        prefix = f"{name}." if name else ""
        out = {}
        for key in shape.members:
            value = _from_form(shape.members[key], form, prefix + _member_name(shape, key))
            if value is not None:
                out[key] = value
        return out or None
    if isinstance(shape, ListShape):
        base = name.rsplit(".", 1)[0] + "." if "." in name else ""
        item = base + _LIST_MEMBERS.get(shape.name, name.rsplit(".", 1)[-1])
        items: list[Any] = []
        while (value := _from_form(shape.member, form, f"{item}.{len(items) + 1}")) is not None:
            items.append(value)
        return items or None
    if isinstance(shape, MapShape):
        key_name, value_name = _MAP_ENTRIES.get(shape.name, ("Name", "Value"))
        entries: dict[str, Any] = {}
        index = 1
        while (key := form.get(f"{name}.{index}.{key_name}")) is not None:
            entries[key] = _from_form(shape.value, form, f"{name}.{index}.{value_name}")
            index += 1
        return entries or None
    raw = form.get(name)
    if raw is None:
        return None
    if shape.type_name in ("integer", "long"):
        try:
            return int(raw)
        except ValueError as exc:
            raise invalid(f"Value {raw} for parameter {name} is invalid: not an integer.") from exc
    if shape.type_name == "boolean":
        if raw.lower() not in ("true", "false"):
            raise invalid(f"Value {raw} for parameter {name} is invalid: not a boolean.")
        return raw.lower() == "true"
    if shape.type_name == "blob":
        return _b64decode(raw)
    return raw


# --- answers ----------------------------------------------------------------------------------------------


def encode(request: Request, result: dict[str, Any], request_id: str) -> tuple[str, str]:
    """(content type, body) of a successful answer."""
    op = operation(request.action)
    if not request.query:
        return JSON_CONTENT_TYPE, json.dumps(_json_value(op.output_shape, result) if op.output_shape else {})
    inner = ""
    if op.output_shape is not None:
        inner = f"<{request.action}Result>{_xml_members(op.output_shape, result)}</{request.action}Result>"
    body = (
        f'<?xml version="1.0"?><{request.action}Response xmlns="{XML_NAMESPACE}">{inner}'
        f"<ResponseMetadata><RequestId>{escape(request_id)}</RequestId></ResponseMetadata>"
        f"</{request.action}Response>"
    )
    return "text/xml", body


def _json_value(shape: Shape, value: Any) -> Any:
    if isinstance(shape, StructureShape):
        return {k: _json_value(shape.members[k], v) for k, v in value.items() if v is not None}
    if isinstance(shape, ListShape):
        return [_json_value(shape.member, v) for v in value]
    if isinstance(shape, MapShape):
        return {k: _json_value(shape.value, v) for k, v in value.items()}
    if shape.type_name == "blob":
        return base64.b64encode(value).decode()
    return value


def _xml_members(shape: StructureShape, value: dict[str, Any]) -> str:
    return "".join(
        _xml(shape.members[key], _member_name(shape, key), v) for key, v in value.items() if v is not None
    )


def _xml(shape: Shape, name: str, value: Any) -> str:
    if isinstance(shape, StructureShape):
        return f"<{name}>{_xml_members(shape, value)}</{name}>"
    if isinstance(shape, ListShape):  # SQS's lists are flattened: the member element repeats
        member = _LIST_MEMBERS.get(shape.name, name)
        return "".join(_xml(shape.member, member, v) for v in value)
    if isinstance(shape, MapShape):
        key_name, value_name = _MAP_ENTRIES.get(shape.name, ("Name", "Value"))
        return "".join(
            f"<{name}><{key_name}>{escape(k)}</{key_name}>{_xml(shape.value, value_name, v)}</{name}>"
            for k, v in value.items()
        )
    if shape.type_name == "blob":
        text = base64.b64encode(value).decode()
    elif shape.type_name == "boolean":
        text = "true" if value else "false"
    else:
        text = escape(str(value))
    return f"<{name}>{text}</{name}>"


def error_answer(exc: SqsError, query: bool, request_id: str) -> tuple[int, dict[str, str], str]:
    """(status, headers, body) of an error in the caller's protocol."""
    fault = "Sender" if exc.sender_fault else "Receiver"
    headers = {"x-amzn-RequestId": request_id}
    if exc.retry_after is not None:
        headers["Retry-After"] = str(exc.retry_after)
    if not query:
        headers |= {"Content-Type": JSON_CONTENT_TYPE, "x-amzn-query-error": f"{exc.query_code};{fault}"}
        body = json.dumps({"__type": f"com.amazonaws.sqs#{exc.shape}", "message": exc.message})
        return exc.status, headers, body
    headers["Content-Type"] = "text/xml"
    body = (
        f'<?xml version="1.0"?><ErrorResponse xmlns="{XML_NAMESPACE}"><Error><Type>{fault}</Type>'
        f"<Code>{escape(exc.query_code)}</Code><Message>{escape(exc.message)}</Message><Detail/></Error>"
        f"<RequestId>{escape(request_id)}</RequestId></ErrorResponse>"
    )
    return exc.status, headers, body
