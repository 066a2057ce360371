"""SnapStart runtime hooks: Lambda's own registry where there is one, the same registry elsewhere.

Lambda's Python runtimes (3.12+) ship `snapshot_restore_py` and run its hooks themselves: the
before-snapshot hooks (in reverse order of registration) after a published version's init, before the
snapshot is taken; the after-restore hooks (in order) when an environment resumes from that snapshot,
before its first invocation. Only modules the handler imports can register. The library is not a
dependency of this project (PyPI's `snapshot-restore-py` is the same code; the runtime's copy is the
one that counts), so where it is absent this module keeps the same registry itself, and `sluice local`
replays it in every container of a SnapStart function (`snapshot_and_restore`) so a local container
starts as a restored one does.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

Hook = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]
F = TypeVar("F", bound=Callable[..., Any])


def _lambda_registry() -> ModuleType | None:
    try:
        return importlib.import_module("snapshot_restore_py")
    except ImportError:
        return None


_LAMBDA = _lambda_registry()
_before: list[Hook] = []
_after: list[Hook] = []


def register_before_snapshot(func: F, *args: Any, **kwargs: Any) -> F:
    """Run `func(*args, **kwargs)` before the snapshot is taken (usable as a decorator)."""
    if _LAMBDA is not None:
        _LAMBDA.register_before_snapshot(func, *args, **kwargs)
    else:
        _before.append((func, args, kwargs))
    return func


def register_after_restore(func: F, *args: Any, **kwargs: Any) -> F:
    """Run `func(*args, **kwargs)` in each environment resumed from the snapshot (usable as a decorator)."""
    if _LAMBDA is not None:
        _LAMBDA.register_after_restore(func, *args, **kwargs)
    else:
        _after.append((func, args, kwargs))
    return func


def before_snapshot_hooks() -> list[Hook]:
    return list(_LAMBDA.get_before_snapshot()) if _LAMBDA is not None else list(_before)


def after_restore_hooks() -> list[Hook]:
    return list(_LAMBDA.get_after_restore()) if _LAMBDA is not None else list(_after)


def snapshot_and_restore() -> list[str]:
    """What Lambda does between a SnapStart function's init and its first invocation, for runtimes that
    do not (the local one): the before-snapshot hooks newest first, then the after-restore hooks.
    Returns the names of the after-restore hooks run."""
    for func, args, kwargs in reversed(before_snapshot_hooks()):
        func(*args, **kwargs)
    ran = []
    for func, args, kwargs in after_restore_hooks():
        func(*args, **kwargs)
        ran.append(getattr(func, "__qualname__", repr(func)))
    return ran
