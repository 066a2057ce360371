"""The one rule for every name a client chooses: queues, consumer groups, push consumers, stream names
and token bindings (a queue or a stream). Every face and the engine check names here, so a name one
route accepts is a name every route accepts (a queue `"qa\\n"` was once created and then refused by
every other route).

Each rule is a character class and a length, checked with anchored `\\A...\\Z` regexes (`^...$` lets a
trailing newline through in Python). Request models use the `Annotated` types, whose error types map
to stable error codes in the handler layer's registry; the engine uses the `check_*` functions, which
raise the domain errors directly.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from sluice import errors

ALL_QUEUES = "*"  # a token bound to every queue
MAX_STREAM_NAME_CHARS = 256


class NameRule:
    """Names of one kind: `chars` is a regex character class body, 1..`max_len` of them."""

    def __init__(self, kind: str, chars: str, max_len: int, described: str) -> None:
        self.kind = kind
        self.error_type = f"invalid_{kind.replace(' ', '_')}"
        self.described = described
        self.json_pattern = f"^[{chars}]{{1,{max_len}}}$"  # OpenAPI's (ECMA) form of the same rule
        self.json_schema = {"type": "string", "pattern": self.json_pattern}
        self._re = re.compile(rf"\A[{chars}]{{1,{max_len}}}\Z")

    def ok(self, name: Any) -> bool:
        return isinstance(name, str) and self._re.match(name) is not None

    def message(self, name: Any) -> str:
        shown = name if len(str(name)) <= 80 else str(name)[:80] + "..."
        return f"{self.kind} {shown!r} is invalid: use {self.described}"

    def field(self, name: str) -> str:
        """Pydantic validator: the name, or a custom error whose type the error registry maps to a code."""
        if not self.ok(name):
            raise PydanticCustomError(self.error_type, self.message(name))
        return name


QUEUE = NameRule("queue name", "A-Za-z0-9_-", 63, "1-63 characters of letters, digits, '_' and '-'")
GROUP = NameRule("consumer group name", "A-Za-z0-9_.-", 63, "1-63 characters of letters, digits, '_.-'")
CONSUMER = NameRule("push consumer id", "A-Za-z0-9_-", 63, "1-63 characters of letters, digits, '_' and '-'")

QueueName = Annotated[str, AfterValidator(QUEUE.field), WithJsonSchema(QUEUE.json_schema)]
GroupName = Annotated[str, AfterValidator(GROUP.field), WithJsonSchema(GROUP.json_schema)]
ConsumerId = Annotated[str, AfterValidator(CONSUMER.field), WithJsonSchema(CONSUMER.json_schema)]


def check_queue_name(name: Any) -> str:
    if not QUEUE.ok(name):
        raise errors.InvalidQueueName(QUEUE.message(name))
    return name


def check_group_name(name: Any) -> str:
    if not GROUP.ok(name):
        raise errors.InvalidRequest(GROUP.message(name))
    return name


# --- stream names (Durable Streams): path-like, so refused rather than normalised -----------------------

_SEGMENT_RE = re.compile(r"\A[^\x00-\x1f\x7f/\\]+\Z")


def _stream_name_problem(name: Any) -> errors.SluiceError | None:
    if not isinstance(name, str) or not name:
        return errors.InvalidStreamName("Stream name is empty")
    if len(name) > MAX_STREAM_NAME_CHARS:
        return errors.StreamNameTooLong(f"Stream name is longer than {MAX_STREAM_NAME_CHARS} characters")
    if any(seg in ("", ".", "..") or not _SEGMENT_RE.match(seg) for seg in name.split("/")):
        return errors.InvalidStreamName(
            "Invalid stream name: use '/'-separated segments without empty, '.' or '..' segments, "
            "backslashes or control characters"
        )
    return None


def check_stream_name(name: str) -> str:
    """A stream name is 1-256 characters of `/`-separated segments. Names that a path normaliser, a
    proxy or a file system would read as another name are refused, not normalised, so one stream has
    exactly one name: empty segments (`a//b`, a leading or trailing `/`), `.` and `..` segments,
    backslashes and control characters (a decoded `%00` among them). Every queue name is one."""
    problem = _stream_name_problem(name)
    if problem is not None:
        raise problem
    return name


# --- token bindings: every queue (`*`), or one queue or stream by name ---------------------------------

_TOKEN_BINDING_ERROR = "invalid_token_binding"
_TOKEN_BINDING_RULE = "'*', a queue name or a stream name (1-256 characters of '/'-separated segments)"


def _token_binding_ok(name: Any) -> bool:
    return name == ALL_QUEUES or QUEUE.ok(name) or _stream_name_problem(name) is None


def _token_binding(name: str) -> str:
    if not _token_binding_ok(name):
        raise PydanticCustomError(_TOKEN_BINDING_ERROR, f"a token is bound to {_TOKEN_BINDING_RULE}")
    return name


TokenBinding = Annotated[
    str,
    AfterValidator(_token_binding),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": MAX_STREAM_NAME_CHARS}),
]


def check_token_binding(name: Any) -> str:
    if not _token_binding_ok(name):
        raise errors.InvalidQueueName(f"a token is bound to {_TOKEN_BINDING_RULE}")
    return name


ERROR_CODES: dict[str, int] = {
    QUEUE.error_type: errors.InvalidQueueName.code,
    GROUP.error_type: errors.InvalidRequest.code,
    CONSUMER.error_type: errors.InvalidConsumer.code,
    _TOKEN_BINDING_ERROR: errors.InvalidQueueName.code,
}
"""Pydantic error type of a name field → the code its domain check raises, for the error registry."""
