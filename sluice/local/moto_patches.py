"""Make moto's DynamoDB linearizable per item, as DynamoDB is.

moto checks a write's condition and then applies it without a lock, so two threads (the local
runtime's server threads, or a test's) can both pass `ver = :v` and both write: a lost update that
real DynamoDB never allows. Every conditional-write test would be meaningless, so the local runtime
and the test suite serialize moto's mutating DynamoDB calls (reads stay concurrent).
"""

from __future__ import annotations

import functools
import threading
from typing import Any

_lock = threading.RLock()
_MUTATIONS = ("put_item", "update_item", "delete_item", "transact_write_items", "batch_write_item")


def apply() -> None:
    from moto.dynamodb.models import DynamoDBBackend

    for name in _MUTATIONS:
        original = getattr(DynamoDBBackend, name, None)
        if original is None or getattr(original, "_sluice_serialized", False):
            continue

        def serialized(self: Any, *args: Any, __original: Any = original, **kwargs: Any) -> Any:
            with _lock:
                return __original(self, *args, **kwargs)

        functools.update_wrapper(serialized, original)
        serialized._sluice_serialized = True  # type: ignore[attr-defined]
        setattr(DynamoDBBackend, name, serialized)
