"""Make moto behave as AWS does where Sluice depends on it.

SSM limits: moto accepts any tier change and any value size; AWS refuses a Standard value over 4 KB
and an Advanced one over 8 KB (4,096 and 8,192 bytes), and never downgrades an Advanced parameter to
Standard (ValidationException for all three), which the shard-map mirror must survive
(sluice/adapters/ssm.py). `apply()` makes moto refuse them too.

SSM throughput: GetParameter, GetParameters and GetParametersByPath share 40 transactions per second
per account and region by default ("Parameter Store throughput", AWS Systems Manager quotas); PutParameter
has its own, which AWS does not publish: 3 per second by default as AWS Support quoted it
(github-aws-runners/terraform-aws-github-runner#2944). Beyond them AWS answers `ThrottlingException:
Rate exceeded`, which botocore retries; moto never throttles. `apply()` puts a token bucket (one second
of burst) per account and region in front of each, so the suite fails wherever an account would.

DynamoDB: moto's DynamoDB is made linearizable per item, as DynamoDB is, and refuses a BatchWriteItem of
more than 25 requests as DynamoDB does ("BatchWriteItem ... up to 25 item put or delete operations",
ValidationException); moto takes any number. (Item size, BatchGetItem's 100 keys and a Query page's
1 MB moto enforces itself.)

moto checks a write's condition and then applies it without a lock, so two threads (the local
runtime's server threads, or a test's) can both pass `ver = :v` and both write: a lost update that
real DynamoDB never allows. Every conditional-write test would be meaningless, so the local runtime
and the test suite serialize moto's mutating DynamoDB calls. Query and Scan take the same lock: they
iterate the table's dicts, and a write adding an item meanwhile made them raise "dictionary changed
size during iteration" (a puller thread of tests/integration/test_engine.py died of it in CI), which
DynamoDB never answers. Single-item reads stay concurrent.

Writes can be watched (`on_write`): after each successful write call (a transaction once, as a whole,
and never when it was cancelled) the listeners get the backend and the (table, key) of every item it
wrote, still under the write lock, so what they read is the item as that write left it. The control
table's global-table emulation (`sluice.local.replication`) is built on it.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any

SSM_STANDARD_MAX_BYTES = 4096
SSM_ADVANCED_MAX_BYTES = 8192
SSM_READ_TPS = 40.0  # GetParameter + GetParameters + GetParametersByPath, shared
SSM_PUT_TPS = 3.0  # PutParameter
DYNAMODB_BATCH_WRITE_MAX = 25
_SSM_READS = ("get_parameter", "get_parameters", "get_parameters_by_path")
_lock = threading.RLock()
_MUTATIONS = ("put_item", "update_item", "delete_item", "transact_write_items", "batch_write_item")
_TABLE_WALKS = ("query", "scan")  # iterate a table's item dicts, which a concurrent write may resize
# (table name, key in DynamoDB JSON) of every item a write call changed.
Written = list[tuple[str, dict[str, Any]]]
WriteListener = Callable[[Any, Written], None]
_listeners: list[WriteListener] = []
_open = threading.local()  # per thread: nesting depth of write calls and what they wrote so far


def exclusive() -> threading.RLock:
    """The lock moto's DynamoDB writes hold: whoever changes tables directly takes it too."""
    return _lock


def on_write(listener: WriteListener) -> Callable[[], None]:
    """Call `listener(backend, written)` after every successful DynamoDB write; returns the unsubscriber."""
    _listeners.append(listener)
    return lambda: _listeners.remove(listener) if listener in _listeners else None


def apply() -> None:
    _ssm_limits()
    _ssm_throughput()
    _batch_write_limit()
    from moto.dynamodb.models import DynamoDBBackend

    for name in (*_MUTATIONS, *_TABLE_WALKS):  # a walk writes nothing: `_written` tells no listener
        original = getattr(DynamoDBBackend, name, None)
        if original is None or getattr(original, "_sluice_serialized", False):
            continue

        def serialized(self: Any, *args: Any, __original: Any = original, **kwargs: Any) -> Any:
            with _lock:
                outermost = not getattr(_open, "depth", 0)
                if outermost:
                    _open.written = []
                _open.depth = getattr(_open, "depth", 0) + 1
                try:
                    result = __original(self, *args, **kwargs)
                    if _listeners:
                        _open.written.extend(_written(self, __original.__name__, args, kwargs))
                finally:
                    _open.depth -= 1
                if outermost and _open.written:  # a cancelled transaction raised above: nothing to tell
                    for listener in list(_listeners):
                        listener(self, _open.written)
                return result

        functools.update_wrapper(serialized, original)
        serialized._sluice_serialized = True  # type: ignore[attr-defined]
        setattr(DynamoDBBackend, name, serialized)


def _written(backend: Any, operation: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Written:
    """The (table, key) a put/update/delete call wrote (transactions and batches are made of them)."""
    if operation not in ("put_item", "update_item", "delete_item"):
        return []
    named = dict(zip(("table_name", "key" if operation != "put_item" else "item_attrs"), args, strict=False))
    named.update(kwargs)
    table_name: str = named["table_name"]
    if operation != "put_item":
        return [(table_name, named["key"])]
    item = named["item_attrs"]
    table = backend.get_table(table_name)
    names = [table.hash_key_attr, *([table.range_key_attr] if table.range_key_attr else [])]
    return [(table_name, {name: item[name] for name in names})]


def _batch_write_limit() -> None:
    from moto.dynamodb.exceptions import MockValidationException
    from moto.dynamodb.responses import DynamoHandler

    original = DynamoHandler.batch_write_item
    if getattr(original, "_sluice_limits", False):
        return

    def batch_write_item(self: Any) -> Any:
        if sum(len(requests) for requests in self.body["RequestItems"].values()) > DYNAMODB_BATCH_WRITE_MAX:
            raise MockValidationException("Too many items requested for the BatchWriteItem call")
        return original(self)

    functools.update_wrapper(batch_write_item, original)
    batch_write_item._sluice_limits = True  # type: ignore[attr-defined]
    DynamoHandler.batch_write_item = batch_write_item  # type: ignore[method-assign]


def _ssm_limits() -> None:
    from moto.ssm.exceptions import ValidationException
    from moto.ssm.models import SimpleSystemManagerBackend

    original = SimpleSystemManagerBackend.put_parameter
    if getattr(original, "_sluice_limits", False):
        return

    def put_parameter(self: Any, name: str, description: str, value: str, *args: Any, **kwargs: Any) -> Any:
        tier = kwargs.get("tier") or "Standard"
        size = len((value or "").encode())
        if tier == "Advanced" and size > SSM_ADVANCED_MAX_BYTES:
            raise ValidationException(
                f"Advanced tier parameters support a maximum parameter value of {SSM_ADVANCED_MAX_BYTES} "
                "characters."
            )
        if tier == "Standard":
            if size > SSM_STANDARD_MAX_BYTES:
                raise ValidationException(
                    f"Standard tier parameters support a maximum parameter value of {SSM_STANDARD_MAX_BYTES} "
                    "characters."
                )
            versions = self._parameters.get(name) if name in self._parameters else None
            if versions and versions[-1].tier == "Advanced":
                raise ValidationException(
                    "You can't downgrade a parameter from the advanced-parameter tier to the "
                    "standard-parameter tier."
                )
        return original(self, name, description, value, *args, **kwargs)

    functools.update_wrapper(put_parameter, original)
    put_parameter._sluice_limits = True  # type: ignore[attr-defined]
    SimpleSystemManagerBackend.put_parameter = put_parameter  # type: ignore[method-assign]


class TokenBucket:
    """`rate` calls a second, at most one second of them at once."""

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self._clock = clock
        self._tokens = rate
        self._at = clock()
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            now = self._clock()
            self._tokens = min(self.rate, self._tokens + (now - self._at) * self.rate)
            self._at = now
            if self._tokens < 1.0:
                return False
            self._tokens -= 1.0
            return True


_buckets: dict[tuple[str, str, str], TokenBucket] = {}
_buckets_lock = threading.Lock()


def refill_ssm_quota() -> None:
    """Every account and region starts again with a full second of SSM quota (tests: one test's calls
    do not spend the next one's)."""
    with _buckets_lock:
        _buckets.clear()


def ssm_bucket(account: str, region: str, kind: str) -> TokenBucket:
    """The account and region's bucket for `kind` ("read" or "put")."""
    with _buckets_lock:
        key = (account, region, kind)
        if key not in _buckets:
            _buckets[key] = TokenBucket(SSM_READ_TPS if kind == "read" else SSM_PUT_TPS)
        return _buckets[key]


def _ssm_throughput() -> None:
    from moto.ssm.exceptions import SSMException
    from moto.ssm.responses import SimpleSystemManagerResponse

    for name in (*_SSM_READS, "put_parameter"):
        original = getattr(SimpleSystemManagerResponse, name)
        if getattr(original, "_sluice_throttled", False):
            continue
        kind = "read" if name in _SSM_READS else "put"

        def throttled(self: Any, __original: Any = original, __kind: str = kind) -> Any:
            if not ssm_bucket(self.current_account, self.region, __kind).take():
                raise SSMException("ThrottlingException", "Rate exceeded")
            return __original(self)

        functools.update_wrapper(throttled, original)
        throttled._sluice_throttled = True  # type: ignore[attr-defined]
        setattr(SimpleSystemManagerResponse, name, throttled)
