"""`Idempotency-Key` on sends, with Powertools' idempotency utility on the control table.

A repeat of a key within 5 minutes returns the first response and stores nothing; the same key with
a different request is refused (409, code 10116); a repeat while the first is still running gets 409
(10115, retry, with `Retry-After`). A send that raised releases its key at once (Powertools deletes
the record); one whose process died (crash, OOM, kill) leaves an in-progress record that expires
after `IN_PROGRESS_SECONDS` at most (or when the invocation would have timed out, if sooner), so the
client's retry succeeds within seconds instead of being refused for the whole function timeout. A
live send slower than that window can overlap a retry of its key: at most a duplicate, never a loss
(delivery is at-least-once anyway). Records live in the control table as
`pk = IDEM#<hash of queue and key>`, `sk = IDEM`, expiring through the table's TTL attribute `exp`.
Multi-region: in this region's replica of the control table (`SLUICE_REGION`), so a keyed send makes no
cross-region call; a retry sent to another region sees the record once the global table replicated it
(typically within a second), earlier it is sent again: at most a duplicate.

Why a small subclass: with a sort key, Powertools puts every record under one static partition key,
which would make a single DynamoDB partition (~1,000 writes/s) the ceiling of all idempotent sends
of a deployment. Keying the partition by the record's hash spreads them like every other item.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any, cast

from lambdas.common import snapstart
from sluice import errors
from sluice.adapters import aws
from sluice.engine import keys
from sluice.settings import get_settings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig
    from aws_lambda_powertools.utilities.typing import LambdaContext

HEADER = "idempotency-key"
TTL_SECONDS = 300
IN_PROGRESS_SECONDS = 5  # a send takes ~2 DynamoDB round trips; a dead one blocks its key this long at most
MAX_KEY_LENGTH = 255


@lru_cache(maxsize=1)
def _guarded() -> tuple[IdempotencyConfig, Callable[..., dict[str, Any]]]:
    """Built at the first keyed send: sends without the header never import the utility (cold start)."""
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        IdempotencyConfig,
        idempotent_function,
    )

    class ControlTablePersistence(DynamoDBPersistenceLayer):
        """Records keyed `pk = <idempotency key>`, `sk = IDEM` in the shared control table."""

        def _get_key(self, idempotency_key: str) -> dict:
            return {self.key_attr: {"S": idempotency_key}, keys.SK: {"S": keys.IDEMPOTENCY_SK}}

    settings = get_settings()
    persistence = ControlTablePersistence(
        table_name=settings.control_table,
        key_attr=keys.PK,
        expiry_attr=keys.TTL,
        # This region's control table (a replica of the home one when multi-region): a keyed send never
        # leaves its region. Same table name in every region.
        boto3_client=aws.client("dynamodb", settings.aws_endpoint_url, settings.region),
    )
    config = IdempotencyConfig(
        event_key_jmespath="[queue, key]",
        payload_validation_jmespath="request",
        expires_after_seconds=TTL_SECONDS,
    )

    @idempotent_function(
        data_keyword_argument="call",
        persistence_store=persistence,
        config=config,
        key_prefix=keys.IDEMPOTENCY_PK_PREFIX,
    )
    def run(*, call: dict[str, Any], send: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        return send()

    return config, run


# SnapStart (lambdas/common/restore.py): the utility is imported into the snapshot, and its persistence
# layer (which holds a client) is rebuilt in each restored environment.
snapstart.register_before_snapshot(importlib.import_module, "aws_lambda_powertools.utilities.idempotency")
snapstart.register_after_restore(_guarded.cache_clear)


def header_key(headers: dict[str, str] | None) -> str | None:
    """The Idempotency-Key header of a request, validated; None when absent."""
    value = next((v for k, v in (headers or {}).items() if k.lower() == HEADER), None)
    if value is None:
        return None
    if not value or len(value) > MAX_KEY_LENGTH:
        raise errors.InvalidRequest(f"Idempotency-Key must be 1-{MAX_KEY_LENGTH} characters")
    return value


def once(
    queue: str,
    key: str | None,
    request: Any,
    send: Callable[[], dict[str, Any]],
    context: LambdaContext | None = None,
) -> dict[str, Any]:
    """`send()`, or with a key the first response for (queue, key) when one was stored in 5 minutes."""
    if key is None:
        return send()
    from aws_lambda_powertools.utilities.idempotency.exceptions import (
        IdempotencyAlreadyInProgressError,
        IdempotencyValidationError,
    )

    config, run = _guarded()
    # Powertools reads only get_remaining_time_in_millis() from the context it is given
    config.register_lambda_context(cast("LambdaContext", _InProgressWindow(context)))
    try:
        return run(call={"queue": queue, "key": key, "request": request}, send=send)
    except IdempotencyValidationError as exc:
        raise errors.IdempotencyKeyReused(
            "this Idempotency-Key was used for a different request in the last 5 minutes; use a new key"
        ) from exc
    except IdempotencyAlreadyInProgressError as exc:
        raise errors.Conflict("a request with this Idempotency-Key is still in progress; retry") from exc


class _InProgressWindow:
    """What Powertools reads from the Lambda context to date an in-progress record's expiry: the
    invocation's remaining time, capped at `IN_PROGRESS_SECONDS` (a dead send must not block its key
    for the whole function timeout; Powertools alone would use the remaining time, up to 29 s)."""

    def __init__(self, context: LambdaContext | None) -> None:
        self._context = context

    def get_remaining_time_in_millis(self) -> int:
        cap = int(IN_PROGRESS_SECONDS * 1000)
        return cap if self._context is None else min(cap, self._context.get_remaining_time_in_millis())
