"""Make moto behave as AWS does where Sluice depends on it.

SSM limits: moto accepts any tier change and any value size; AWS refuses a Standard value over 4 KB
and an Advanced one over 8 KB (4,096 and 8,192 bytes), and never downgrades an Advanced parameter to
Standard (ValidationException for all three), which the shard-map mirror must survive
(sluice/adapters/ssm.py). `apply()` makes moto refuse them too.

DynamoDB: moto's DynamoDB is made linearizable per item, as DynamoDB is.

moto checks a write's condition and then applies it without a lock, so two threads (the local
runtime's server threads, or a test's) can both pass `ver = :v` and both write: a lost update that
real DynamoDB never allows. Every conditional-write test would be meaningless, so the local runtime
and the test suite serialize moto's mutating DynamoDB calls (reads stay concurrent).

Writes can be watched (`on_write`): after each successful write call (a transaction once, as a whole,
and never when it was cancelled) the listeners get the backend and the (table, key) of every item it
wrote, still under the write lock, so what they read is the item as that write left it. The control
table's global-table emulation (`sluice.local.replication`) is built on it.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

SSM_STANDARD_MAX_BYTES = 4096
SSM_ADVANCED_MAX_BYTES = 8192
_lock = threading.RLock()
_MUTATIONS = ("put_item", "update_item", "delete_item", "transact_write_items", "batch_write_item")
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
    from moto.dynamodb.models import DynamoDBBackend

    for name in _MUTATIONS:
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
