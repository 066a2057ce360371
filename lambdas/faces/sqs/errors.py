"""SQS's errors, as both protocols answer them, and what each domain error becomes on this face.

An error has the shape name of SQS's service model (`QueueDoesNotExist`: the JSON protocol's `__type`, and
what botocore raises for a modelled error) and the query protocol's code (`AWS.SimpleQueueService.
NonExistentQueue`), which the JSON protocol repeats in the `x-amzn-query-error` header so that clients of
either generation raise the same modelled exception. The query codes and statuses are those of SQS's
query-protocol model (botocore <= 1.31.80; moto's SQS model extras list the same).
"""

from __future__ import annotations

from sluice import errors

# shape name → (query code, HTTP status); shapes not listed use their own name and 400.
_MODELLED: dict[str, tuple[str, int]] = {
    "BatchEntryIdsNotDistinct": ("AWS.SimpleQueueService.BatchEntryIdsNotDistinct", 400),
    "BatchRequestTooLong": ("AWS.SimpleQueueService.BatchRequestTooLong", 400),
    "EmptyBatchRequest": ("AWS.SimpleQueueService.EmptyBatchRequest", 400),
    "InvalidBatchEntryId": ("AWS.SimpleQueueService.InvalidBatchEntryId", 400),
    "MessageNotInflight": ("AWS.SimpleQueueService.MessageNotInflight", 400),
    "OverLimit": ("OverLimit", 403),
    "PurgeQueueInProgress": ("AWS.SimpleQueueService.PurgeQueueInProgress", 403),
    "QueueDeletedRecently": ("AWS.SimpleQueueService.QueueDeletedRecently", 400),
    "QueueDoesNotExist": ("AWS.SimpleQueueService.NonExistentQueue", 400),
    "QueueNameExists": ("QueueAlreadyExists", 400),
    "TooManyEntriesInBatchRequest": ("AWS.SimpleQueueService.TooManyEntriesInBatchRequest", 400),
    "UnsupportedOperation": ("AWS.SimpleQueueService.UnsupportedOperation", 400),
    # AWS's common errors (not in SQS's model: botocore raises a ClientError with this code)
    "AccessDenied": ("AccessDenied", 403),
    "IncompleteSignature": ("IncompleteSignature", 400),
    "InvalidClientTokenId": ("InvalidClientTokenId", 403),
    "ExpiredToken": ("ExpiredToken", 403),
    "MissingAuthenticationToken": ("MissingAuthenticationToken", 403),
    "SignatureDoesNotMatch": ("SignatureDoesNotMatch", 403),
    "RequestExpired": ("RequestExpired", 400),
    "InternalFailure": ("InternalFailure", 500),
    "ServiceUnavailable": ("ServiceUnavailable", 503),
}


class SqsError(Exception):
    """An answer in SQS's error shape. `shape`: the model's shape name (or a common error's code)."""

    def __init__(self, shape: str, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.shape = shape
        self.message = message
        self.query_code, self.status = _MODELLED.get(shape, (shape, 400))
        self.retry_after = retry_after

    @property
    def sender_fault(self) -> bool:
        return self.status < 500


def invalid(message: str) -> SqsError:
    return SqsError("InvalidParameterValue", message)


def missing(parameter: str) -> SqsError:
    return SqsError("MissingParameter", f"The request must contain the parameter {parameter}.")


def no_queue() -> SqsError:
    return SqsError("QueueDoesNotExist", "The specified queue does not exist.")


def from_domain(exc: errors.SluiceError) -> SqsError:
    """The SQS error a domain error is answered with (by class, never by message text)."""
    retry = getattr(exc, "retry_after_seconds", None)
    if isinstance(exc, errors.QueueNotFound | errors.ConsumerGroupNotFound):
        return no_queue()
    if isinstance(exc, errors.QueueAlreadyExists | errors.ConsumerGroupAlreadyExists):
        return SqsError("QueueNameExists", exc.message)
    if isinstance(exc, errors.Unauthorized):
        return SqsError("InvalidClientTokenId", exc.message)
    if isinstance(exc, errors.Forbidden):
        return SqsError("AccessDenied", exc.message)
    if isinstance(exc, errors.Throttled):
        return SqsError("RequestThrottled", exc.message, retry_after=retry)
    if isinstance(exc, errors.DependencyUnavailable):
        return SqsError("ServiceUnavailable", exc.message, retry_after=retry)
    if isinstance(exc, errors.QueuePaused):
        return SqsError("QueuePaused", f"{exc.message}; resume it to receive (POST /v1/queues/{{q}}/resume)")
    if isinstance(exc, errors.Conflict):
        return SqsError("RequestThrottled", exc.message, retry_after=retry)  # a retryable clash
    if isinstance(exc, errors.InvalidRequest | errors.MessageTooLarge | errors.RequestTooLarge):
        return invalid(exc.message)
    return SqsError("InternalFailure", exc.message)
