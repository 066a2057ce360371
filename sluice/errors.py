"""Domain exceptions. Each carries a stable numeric code from docs/api.md and a sentence a user can act on.

The HTTP status for each class is decided in one registry in the handler layer
(`lambdas/common/errors.py`); the core knows nothing about HTTP.
"""

from __future__ import annotations

from typing import Any, ClassVar


class SluiceError(Exception):
    """Base class: `code` is stable across releases, `message` is for people."""

    code: ClassVar[int] = 10000

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class Unauthorized(SluiceError):
    code = 10001


class Forbidden(SluiceError):
    code = 10002


class InvalidRequest(SluiceError):
    code = 10100


class MalformedJson(InvalidRequest):
    code = 10101


class InvalidQueueName(InvalidRequest):
    code = 10102


class InvalidSettings(InvalidRequest):
    code = 10103


class QueueNotFound(SluiceError):
    code = 10104


class QueueAlreadyExists(SluiceError):
    code = 10105


class BatchTooLarge(InvalidRequest):
    code = 10106


class MessageTooLarge(SluiceError):
    code = 10107


class RequestTooLarge(SluiceError):
    code = 10108


class QueuePaused(SluiceError):
    code = 10109


class ProducerFenced(SluiceError):
    code = 10110

    def __init__(self, message: str, *, current_version: int, provided_version: int) -> None:
        super().__init__(message, current_version=current_version, provided_version=provided_version)
        self.current_version = current_version
        self.provided_version = provided_version


class ConsumerGroupNotFound(SluiceError):
    code = 10111


class ConsumerGroupAlreadyExists(SluiceError):
    code = 10112


class TokenNotFound(SluiceError):
    code = 10113


class NotFound(SluiceError):
    """A route or resource that does not exist."""

    code = 10114


class Conflict(SluiceError):
    """A concurrent change won, or a keyed send is still running; the caller may retry."""

    code = 10115
    retry_after_seconds = 1


class IdempotencyKeyReused(SluiceError):
    """The Idempotency-Key was used within 5 minutes for a different request."""

    code = 10116


class MethodNotAllowed(SluiceError):
    """The path exists but not with this method; `allow` lists the methods it has."""

    code = 10120

    def __init__(self, message: str, *, allow: str) -> None:
        super().__init__(message)
        self.allow = allow


class StreamNameTooLong(InvalidRequest):
    code = 10121


class InvalidOffset(InvalidRequest):
    code = 10122


class ShardNotFound(NotFound):
    code = 10123


class Throttled(SluiceError):
    code = 10429

    def __init__(self, message: str, *, retry_after_seconds: int = 1) -> None:
        super().__init__(message, retry_after_seconds=retry_after_seconds)
        self.retry_after_seconds = retry_after_seconds


class DependencyUnavailable(SluiceError):
    code = 10503

    def __init__(self, message: str, *, retry_after_seconds: int = 2) -> None:
        super().__init__(message, retry_after_seconds=retry_after_seconds)
        self.retry_after_seconds = retry_after_seconds


class WriteRaced(DependencyUnavailable):
    """A publish lost its slot to gap repair after a long stall; nothing was stored, retry the send."""

    code = 10504


class InvalidConsumer(InvalidRequest):
    """A push consumer request with a bad target or setting."""

    code = 10124


class ConsumerNotFound(SluiceError):
    code = 10125


class ConsumerAlreadyExists(SluiceError):
    code = 10126


class GatewayRequestMalformed(InvalidRequest):
    """The HTTP request itself is broken (request line, Content-Length, a body cut short): refused by
    the gateway, no function runs."""

    code = 10400


class GatewayPayloadTooLarge(SluiceError):
    """The request is over Lambda's 6 MB synchronous invocation limit."""

    code = 10413


class GatewayUriTooLong(SluiceError):
    """The request line is over API Gateway's 10,240-byte quota."""

    code = 10414


class GatewayHeadersTooLarge(SluiceError):
    """The request line and headers are over API Gateway's 10,240-byte quota."""

    code = 10431


class GatewayThrottled(SluiceError):
    """Over the API stage's throttle or the account's API Gateway quota; no function ran. Not 10429,
    which a handler answers when what it calls throttles (a saturated shard, DynamoDB)."""

    code = 10430


class InvalidStreamName(InvalidRequest):
    """A stream name with empty, `.` or `..` segments, backslashes or control characters."""

    code = 10130


class NotADeadLetterQueue(InvalidRequest):
    """Redrive from a queue that is not the target queue's `dead_letter_queue`."""

    code = 10131


class StreamGone(SluiceError):
    """An open-protocol stream deleted while forks still read its data (soft-deleted: 410 Gone)."""

    code = 10141
