"""Make moto behave as AWS does where Sluice depends on it.

SSM tiers: moto accepts any tier change and any value size; AWS refuses a Standard value over 4 KB
and never downgrades an Advanced parameter to Standard (ValidationException for both), which the
shard-map mirror must survive (sluice/adapters/ssm.py). `apply()` makes moto refuse them too.

DynamoDB: moto's DynamoDB is made linearizable per item, as DynamoDB is.

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
    _ssm_tiers()
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


def _ssm_tiers() -> None:
    from moto.ssm.exceptions import ValidationException
    from moto.ssm.models import SimpleSystemManagerBackend

    original = SimpleSystemManagerBackend.put_parameter
    if getattr(original, "_sluice_tiers", False):
        return

    def put_parameter(self: Any, name: str, description: str, value: str, *args: Any, **kwargs: Any) -> Any:
        tier = kwargs.get("tier") or "Standard"
        if tier == "Standard":
            if value and len(value) > 4096:
                raise ValidationException(
                    "Standard tier parameters support a maximum parameter value of 4096 characters."
                )
            versions = self._parameters.get(name) if name in self._parameters else None
            if versions and versions[-1].tier == "Advanced":
                raise ValidationException(
                    "You can't downgrade a parameter from the advanced-parameter tier to the "
                    "standard-parameter tier."
                )
        return original(self, name, description, value, *args, **kwargs)

    functools.update_wrapper(put_parameter, original)
    put_parameter._sluice_tiers = True  # type: ignore[attr-defined]
    SimpleSystemManagerBackend.put_parameter = put_parameter  # type: ignore[method-assign]
